// Division by an invariant divisor (detail::Divider): the same quotient as the hardware division for every
// edge numerator and divisor, and the signed floor quotient the same as detail::floor_div.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <ratelimit/detail/arithmetic.hpp>
#include <ratelimit/detail/divider.hpp>

namespace {

using ratelimit::detail::Divider;
using ratelimit::detail::floor_div;

constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint64_t kI64Max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();

// Divisors: 1, 2, 3, every power of two and its neighbours, the largest ones, and random ones of every width.
std::vector<std::uint64_t> divisors() {
  std::vector<std::uint64_t> d{1, 2, 3, 5, 7, 10, 1000, 1'000'000'000, 60'000'000'000, 86'400'000'000'000};
  for (int b = 1; b < 64; ++b) {
    const std::uint64_t p = std::uint64_t{1} << b;
    d.insert(d.end(), {p - 1, p, p + 1});
  }
  d.insert(d.end(), {kI64Max - 1, kI64Max, kI64Max + 1, kI64Max + 2, kU64Max - 1, kU64Max});
  std::mt19937_64 random(20261202);
  for (int i = 0; i < 200; ++i) d.push_back((random() >> (random() % 64)) | 1);
  return d;
}

// Numerators around 0, d and its multiples, the powers of two and the ends of the range, and random ones.
std::vector<std::uint64_t> numerators(std::uint64_t d, std::mt19937_64& random) {
  std::vector<std::uint64_t> n{0,           1,           2,       d - 1,       d,
                               d + 1,       2 * d - 1,   2 * d,   kI64Max - 1, kI64Max,
                               kI64Max + 1, kU64Max - 1, kU64Max, kU64Max - d, kU64Max - kU64Max % d};
  for (int b = 1; b < 64; ++b) {
    const std::uint64_t p = std::uint64_t{1} << b;
    n.insert(n.end(), {p - 1, p, p + 1});
  }
  for (int i = 0; i < 50; ++i) {
    n.push_back(random());
    n.push_back(random() >> (random() % 64));
    const std::uint64_t q = d == 1 ? random() : random() % (kU64Max / d + 1);  // a multiple of d, its neighbours
    n.insert(n.end(), {q * d, q * d - 1, q * d + (d - 1)});
  }
  return n;
}

TEST(Divider, QuotientEqualsHardwareDivision) {
  std::mt19937_64 random(7);
  for (const std::uint64_t d : divisors()) {
    const Divider divider(d);
    for (const std::uint64_t n : numerators(d, random)) {
      ASSERT_EQ(divider.quotient(n), n / d) << n << " / " << d;
    }
  }
}

TEST(Divider, FloorQuotientEqualsFloorDivOnBothSidesOfZero) {
  std::mt19937_64 random(11);
  for (const std::uint64_t d : divisors()) {
    if (d > kI64Max) continue;  // signed divisors only
    const Divider divider(d);
    const auto sd = static_cast<std::int64_t>(d);
    for (const std::uint64_t n : numerators(d, random)) {
      const auto a = static_cast<std::int64_t>(n);  // the upper half of the range wraps to negatives
      ASSERT_EQ(divider.floor_quotient(a), floor_div(a, sd)) << a << " / " << sd;
      if (a != kI64Min) {
        ASSERT_EQ(divider.floor_quotient(-a), floor_div(-a, sd)) << -a << " / " << sd;
      }
    }
    ASSERT_EQ(divider.floor_quotient(kI64Min), floor_div(kI64Min, sd)) << "INT64_MIN / " << sd;
    ASSERT_EQ(divider.floor_quotient(kI64Min + 1), floor_div(kI64Min + 1, sd)) << "INT64_MIN + 1 / " << sd;
  }
}

TEST(Divider, IsAConstantExpression) {
  static_assert(Divider(7).quotient(kU64Max) == kU64Max / 7);
  static_assert(Divider(1).quotient(kU64Max) == kU64Max);
  static_assert(Divider(3).floor_quotient(-1) == -1 && Divider(3).floor_quotient(-3) == -1);
  static_assert(Divider(3).floor_quotient(-4) == -2 && Divider(3).floor_quotient(kI64Min) == floor_div(kI64Min, 3));
  SUCCEED();
}

}  // namespace
