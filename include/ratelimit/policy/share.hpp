#pragma once

/// @file
/// `share_of`: one process's share of a policy's quota when `n` processes split it (e.g. a Redis limiter's
/// in-memory fallback during an outage, include/ratelimit/redis/README.md "Fallback during outages").

#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "ratelimit/policy/fixed_window.hpp"
#include "ratelimit/policy/gcra.hpp"
#include "ratelimit/policy/sliding_window_counter.hpp"
#include "ratelimit/policy/sliding_window_log.hpp"
#include "ratelimit/policy/token_bucket.hpp"

namespace ratelimit {

namespace detail {
/// `period * n`, refusing an overflow (the share of a rate is the same count over a longer period).
inline std::chrono::nanoseconds share_period(std::chrono::nanoseconds period, std::int64_t n) {
  if (period.count() > std::numeric_limits<std::int64_t>::max() / n) {
    throw std::invalid_argument("share_of: the period times " + std::to_string(n) + " overflows");
  }
  return period * n;
}
/// `max(1, count / n)`: a share never rounds a quota to nothing.
inline std::int64_t share_count(std::int64_t count, std::int64_t n) noexcept {
  const std::int64_t share = count / n;
  return share < 1 ? 1 : share;
}
inline void require_share(std::int64_t n) {
  if (n < 1) throw std::invalid_argument("share_of: n must be >= 1");
}
}  // namespace detail

/// GCRA: the same count over `n` periods (the rate divided by `n` exactly), burst `max(1, burst / n)`.
/// Throws `std::invalid_argument` for `n < 1` or when `period * n` overflows.
[[nodiscard]] inline Gcra share_of(const Gcra& p, std::int64_t n) {
  detail::require_share(n);
  return Gcra{p.limit, detail::share_period(p.period, n), detail::share_count(p.burst, n)};
}

/// Token bucket: the same refill over `n` periods, capacity `max(1, capacity / n)`. Throws as above.
[[nodiscard]] inline TokenBucket share_of(const TokenBucket& p, std::int64_t n) {
  detail::require_share(n);
  return TokenBucket{detail::share_count(p.capacity, n), p.refill_tokens, detail::share_period(p.refill_period, n)};
}

/// Window policies: `max(1, limit / n)` per window. Throws `std::invalid_argument` for `n < 1`.
[[nodiscard]] inline FixedWindow share_of(const FixedWindow& p, std::int64_t n) {
  detail::require_share(n);
  return FixedWindow{detail::share_count(p.limit, n), p.window};
}
[[nodiscard]] inline SlidingWindowLog share_of(const SlidingWindowLog& p, std::int64_t n) {
  detail::require_share(n);
  return SlidingWindowLog{detail::share_count(p.limit, n), p.window};
}
[[nodiscard]] inline SlidingWindowCounter share_of(const SlidingWindowCounter& p, std::int64_t n) {
  detail::require_share(n);
  return SlidingWindowCounter{detail::share_count(p.limit, n), p.window};
}

}  // namespace ratelimit
