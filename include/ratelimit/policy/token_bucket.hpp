#pragma once

/// @file
/// Token bucket, decided exactly as GCRA.

#include <chrono>
#include <cstdint>
#include <string_view>

#include "ratelimit/policy/gcra.hpp"

namespace ratelimit {

/// Token bucket (include/ratelimit/README.md "Policy formulas"): holds up to `capacity` tokens, starts full, and gains
/// one token every `T = ceil(refill_period / refill_tokens)` ticks; a request of cost n takes n tokens.
///
/// Stored as the time the bucket would be full again (a GCRA TAT), the same idea as folly's
/// TokenBucket, but in integer ticks: no floating-point drift after any number of calls.
/// Decides exactly as `Gcra{.limit = refill_tokens, .period = refill_period, .burst = capacity}`.
/// A plain aggregate, validated when a limiter is made from it (`std::invalid_argument` naming
/// `TokenBucket.capacity`, `.refill_tokens` or `.refill_period`).
/// Example:
///   // A bucket of 20 tokens, refilled by 5 per second; an upload costs as many tokens as it has MB.
///   ratelimit::TokenBucket policy{.capacity = 20, .refill_tokens = 5, .refill_period = std::chrono::seconds(1)};
///   ratelimit::MemoryLimiter<ratelimit::TokenBucket> limiter(policy);
///   const std::int64_t megabytes = 3;
///   if (!limiter.allow("uploader:9", megabytes)) { /* answer 429 */ }
struct TokenBucket {
  static constexpr std::string_view kind = "token_bucket";

  /// Equal when every parameter is (two policies of equal rules in ticks may still differ, e.g. in the
  /// window they advertise).
  friend bool operator==(const TokenBucket&, const TokenBucket&) = default;

  /// Most tokens the bucket holds (and the largest burst); >= 1.
  std::int64_t capacity = 0;
  /// Tokens added per `refill_period`; >= 1.
  std::int64_t refill_tokens = 0;
  /// > 0, a whole number of ticks, and `refill_period / refill_tokens >= 1 tick`.
  std::chrono::nanoseconds refill_period{0};

  using Rules = Gcra::Rules;

  /// Validates for a backend whose tick is `tick_ns` nanoseconds. Throws `std::invalid_argument`
  /// naming `TokenBucket.capacity`, `TokenBucket.refill_tokens` or `TokenBucket.refill_period`.
  [[nodiscard]] Rules rules(std::int64_t tick_ns) const {
    static constexpr Gcra::FieldNames names{"TokenBucket.refill_tokens", "TokenBucket.refill_period",
                                            "TokenBucket.capacity"};
    return Gcra::make_rules(refill_tokens, refill_period, capacity, tick_ns, names);
  }
};

}  // namespace ratelimit
