#pragma once

/// @file
/// Division by an invariant divisor with a precomputed multiplier: what the window policies divide by (the
/// window length) is fixed when their rules are built, and a multiply-high plus shifts costs a fraction of
/// a hardware division on every check.

#include <bit>
#include <cstdint>

namespace ratelimit::detail {

/// `n / d` for a divisor `d >= 1` fixed at construction, exact for every 64-bit `n`: the round-up method of
/// Granlund and Montgomery, "Division by Invariant Integers using Multiplication" (PLDI 1994), figure 4.1.
/// With `l = ceil(log2 d)` and `m = floor(2^64 * (2^l - d) / d) + 1` (which fits in 64 bits),
/// `n / d = (t + ((n - t) >> min(l, 1))) >> max(l - 1, 0)` where `t = (m * n) >> 64`. Immutable, so
/// thread-safe.
class Divider {
 public:
  /// `d >= 1` (the window policies' validation guarantees it; 0 would divide by zero here).
  constexpr explicit Divider(std::uint64_t d) noexcept
      : magic_(multiplier(d, ceil_log2(d))),
        shift1_(static_cast<std::uint8_t>(ceil_log2(d) > 0 ? 1 : 0)),
        shift2_(static_cast<std::uint8_t>(ceil_log2(d) > 0 ? ceil_log2(d) - 1 : 0)) {}

  /// `n / d`, rounded down.
  [[nodiscard]] constexpr std::uint64_t quotient(std::uint64_t n) const noexcept {
    const auto t = static_cast<std::uint64_t>((Wide{magic_} * n) >> 64);
    return (t + ((n - t) >> shift1_)) >> shift2_;
  }

  /// `floor(a / d)` for any signed `a` (also `INT64_MIN`), for `1 <= d <= INT64_MAX`: the same value as
  /// `detail::floor_div(a, d)`. A negative `a` is divided as `~a = -a - 1 >= 0`, since
  /// `floor(a / d) = -1 - floor((-a - 1) / d)`.
  [[nodiscard]] constexpr std::int64_t floor_quotient(std::int64_t a) const noexcept {
    const auto sign = static_cast<std::uint64_t>(a >> 63);  // all ones when negative
    return static_cast<std::int64_t>(quotient(static_cast<std::uint64_t>(a) ^ sign) ^ sign);
  }

  friend constexpr bool operator==(const Divider&, const Divider&) = default;

 private:
  __extension__ typedef unsigned __int128 Wide;  // GCC and Clang on 64-bit targets

  static constexpr int ceil_log2(std::uint64_t d) noexcept { return d <= 1 ? 0 : 64 - std::countl_zero(d - 1); }

  // 2^l - d < d, so the multiplier is below 2^64 (l = 64, for d > 2^63, is computed in 128 bits).
  static constexpr std::uint64_t multiplier(std::uint64_t d, int l) noexcept {
    const Wide excess = (Wide{1} << l) - d;
    return static_cast<std::uint64_t>((excess << 64) / d + 1);
  }

  std::uint64_t magic_;
  std::uint8_t shift1_;
  std::uint8_t shift2_;
};

}  // namespace ratelimit::detail
