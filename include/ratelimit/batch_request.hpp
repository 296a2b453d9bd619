#pragma once

/// @file
/// `BatchRequest`: one check of a batch (`allow_many`), the same on every backend.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ratelimit/detail/key_length.hpp"
#include "ratelimit/policy/policy.hpp"

namespace ratelimit {

/// One check of a batch for `allow_many` (in memory and on Redis; `redis::Request` names it too). Not named
/// `Request`: code that uses `ratelimit` and an HTTP library's namespace together would find two.
struct BatchRequest {
  /// The user key (any bytes, at most `max_key_bytes`). Viewed, not copied: it must outlive the call.
  std::string_view key;
  /// Units to consume; >= 0.
  std::int64_t cost = 1;
};

namespace detail {

[[noreturn, gnu::cold, gnu::noinline]] inline void throw_bad_batch_request(std::size_t index, const BatchRequest& r,
                                                                           std::size_t max_key_bytes) {
  const std::string field = "requests[" + std::to_string(index) + "]";
  if (r.key.size() > max_key_bytes) throw_key_too_long(r.key.size(), max_key_bytes, field + ".key");
  throw_negative_cost(r.cost, field + ".cost");
}

/// Checks every request of a batch before any is checked against a limit (include/ratelimit/README.md "Batches"):
/// throws `std::invalid_argument` naming the first bad one, `"requests[i].key: N bytes exceeds max_key_bytes (M)"` or
/// `"requests[i].cost: must be >= 0, got C"`.
inline void validate_batch(std::span<const BatchRequest> requests, std::size_t max_key_bytes) {
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].key.size() > max_key_bytes || requests[i].cost < 0) [[unlikely]]
      throw_bad_batch_request(i, requests[i], max_key_bytes);
  }
}

}  // namespace detail

}  // namespace ratelimit
