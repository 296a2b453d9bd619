#pragma once

/// @file
/// Exact integer helpers shared by the policies: floor division, saturating sums, tick conversion,
/// range checks.

#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

#include "ratelimit/detail/requirements.hpp"

namespace ratelimit::detail {

__extension__ typedef __int128 i128;  // GCC and Clang on 64-bit targets

inline constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
inline constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();

/// The longest duration (in nanoseconds) a policy may report; a quarter of the int64 range (~73 years),
/// so that time plus twice any result never overflows.
inline constexpr std::int64_t kMaxHorizonNs = kInt64Max / 4;

/// floor(a / b) for b > 0, also for negative a (windows are aligned to the epoch on both sides of it).
[[nodiscard]] constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

/// ceil(a / b) for a >= 0, b > 0.
[[nodiscard]] constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) noexcept {
  return a / b + (a % b != 0 ? 1 : 0);
}

/// a + b, clamped to [INT64_MIN, INT64_MAX] instead of overflowing. Pure.
[[nodiscard]] constexpr std::int64_t saturating_add(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? kInt64Max : kInt64Min;
  return r;
}

/// a - b, clamped to [INT64_MIN, INT64_MAX] instead of overflowing. Pure.
[[nodiscard]] constexpr std::int64_t saturating_sub(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? kInt64Max : kInt64Min;
  return r;
}

[[noreturn]] inline void invalid(std::string_view field, std::string_view what) {
  throw std::invalid_argument(std::string(field) + ": " + std::string(what));
}

/// Throws `std::invalid_argument` naming `field` unless `value >= 1`.
inline void require_positive(std::int64_t value, std::string_view field) {
  if (value < 1) invalid(field, "must be >= 1, got " + std::to_string(value));
}

/// A duration in whole ticks of `tick_ns` nanoseconds; throws `std::invalid_argument` naming `field`
/// when it is not positive or not a whole number of ticks (e.g. sub-microsecond on Redis).
[[nodiscard]] inline std::int64_t to_ticks(std::chrono::nanoseconds duration, std::int64_t tick_ns,
                                           std::string_view field) {
  if (duration.count() <= 0) {
    // A negative count is rarely meant: a long duration (1,000 years) wraps in the caller's duration_cast.
    invalid(field, "must be > 0, got " + std::to_string(duration.count()) + " ns" +
                       (duration.count() < 0 ? " (a negative duration usually means an overflow converting it)" : ""));
  }
  if (duration.count() % tick_ns != 0) {
    invalid(field, "must be a whole number of " + std::to_string(tick_ns) + " ns ticks, got " +
                       std::to_string(duration.count()) + " ns");
  }
  return duration.count() / tick_ns;
}

/// Throws `std::invalid_argument` naming `field` when `horizon_ticks` (the longest duration the
/// policy can report) cannot be represented with headroom in int64 nanoseconds.
inline void require_horizon(i128 horizon_ticks, std::int64_t tick_ns, std::string_view field) {
  if (horizon_ticks > kMaxHorizonNs / tick_ns) {
    invalid(field, "the policy's longest wait exceeds the representable range (~73 years)");
  }
}

/// Keeps a clock reading where time plus twice the policy's horizon cannot overflow. A clock beyond
/// that (year 2262 for a nanosecond epoch clock) behaves as if it stood still at the edge.
[[nodiscard]] constexpr std::int64_t clamp_time(std::int64_t t, std::int64_t horizon) noexcept {
  const std::int64_t lo = kInt64Min + 2 * horizon + 1;
  const std::int64_t hi = kInt64Max - 2 * horizon - 1;
  return t < lo ? lo : (t > hi ? hi : t);
}

}  // namespace ratelimit::detail
