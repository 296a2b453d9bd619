#pragma once

/// @file
/// `BatchRequest`: one check of a batch (`allow_many`), the same on every backend.

#include <cstdint>
#include <string_view>

namespace ratelimit {

/// One check of a batch for `allow_many` (in memory and on Redis; `redis::Request` names it too). Not named
/// `Request`: code that uses `ratelimit` and an HTTP library's namespace together would find two.
struct BatchRequest {
  /// The user key (any bytes, at most `max_key_bytes`). Viewed, not copied: it must outlive the call.
  std::string_view key;
  /// Units to consume; >= 0.
  std::int64_t cost = 1;
};

}  // namespace ratelimit
