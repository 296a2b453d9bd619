// SlidingWindowCounter computes in 64 bits when the previous window's weight fits and in 128 bits otherwise:
// both paths give exactly the decision of the formula of include/ratelimit/README.md "Policy formulas" computed in 128
// bits with plain divisions, for counts, costs, limits, windows and times at and around every edge.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <ratelimit/ratelimit.hpp>

namespace {
namespace swc_arithmetic {  // named: the unity build joins this file with others

using ratelimit::SlidingWindowCounter;
using ratelimit::TickDecision;
using State = SlidingWindowCounter::Rules::State;
__extension__ typedef __int128 i128;

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a / b - ((a % b != 0 && a < 0) ? 1 : 0); }

// The decision as the formula gives it, every product and quotient in 128 bits (the policy before its 64-bit
// path): an independent copy, so that a slip in either path shows as a difference.
TickDecision reference(std::int64_t limit, std::int64_t w, const State& s, std::int64_t now, std::int64_t cost) {
  const std::int64_t lo = kMin + 4 * w + 1, hi = kMax - 4 * w - 1;
  std::int64_t t = now > s.written ? now : s.written;
  t = t < lo ? lo : (t > hi ? hi : t);
  const std::int64_t start = floor_div(t, w) * w, offset = t - start;
  std::int64_t cur = 0, prev = 0;
  if (s.written >= start) {
    cur = s.current;
    prev = s.previous;
  } else if (s.written >= start - w) {
    prev = s.current;
  }
  const i128 weighted_prev = i128{prev} * (w - offset);
  const bool fits = cost <= limit;
  TickDecision d{.limit = limit};
  d.allowed = cost == 0 || (fits && weighted_prev + (i128{cur} + cost) * w <= i128{limit} * w);
  const std::int64_t current = d.allowed ? cur + cost : cur;
  const auto room = static_cast<std::int64_t>((i128{limit} * w - weighted_prev) / w);
  d.remaining = room > current ? room - current : 0;
  d.reset_after = current > 0 ? 2 * w - offset : (prev > 0 ? w - offset : 0);
  if (!fits) return ratelimit::detail::never_passes(d);
  if (!d.allowed) {
    const std::int64_t a = limit - cur - cost;
    if (prev > 0 && a >= 0) {
      const auto r1 = static_cast<std::int64_t>(i128{w} - i128{a} * w / prev);
      if (r1 < w) {
        d.retry_after = r1 - offset;
        return d;
      }
    }
    const std::int64_t r2 = cur > 0 ? static_cast<std::int64_t>(i128{w} - i128{limit - cost} * w / cur) : 0;
    d.retry_after = (w - offset) + (r2 > 0 ? r2 : 0);
  }
  return d;
}

TEST(SlidingWindowCounterArithmetic, SixtyFourBitPathDecidesAsTheFormulaInOneHundredTwentyEightBits) {
  std::mt19937_64 random(42);
  auto pick = [&](const std::vector<std::int64_t>& values) { return values[random() % values.size()]; };
  auto below = [&](std::int64_t bound) {
    return static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(bound));
  };
  const std::int64_t max_window = kMax / 4 / 2;  // the horizon check: two windows within a quarter of the range
  const std::vector<std::int64_t> windows{1,
                                          2,
                                          3,
                                          7,
                                          1000,
                                          999'999'937,
                                          1'000'000'000,
                                          60'000'000'000,
                                          std::int64_t{1} << 32,
                                          (std::int64_t{1} << 40) + 1,
                                          max_window};
  std::int64_t checks = 0, wide = 0;
  for (const std::int64_t w : windows) {
    const std::int64_t pmax = kMax / w;  // the 64-bit path's bound on the previous count
    const std::int64_t above = pmax < kMax ? pmax + 1 : kMax;
    const std::vector<std::int64_t> limits{1, 2, 10, 1000, 1'000'000'000'000, pmax - 1, pmax, above, kMax / 2, kMax};
    const std::vector<std::int64_t> counts{0, 1, 2, 999, 1000, 1001, pmax - 1, pmax, above, kMax / 2, kMax - 1};
    for (int i = 0; i < 20'000; ++i) {
      const std::int64_t limit = random() % 4 == 0 ? 1 + below(kMax) : pick(limits);
      if (limit < 1) continue;
      // A state as the policy writes it (counts >= 0), or a count over the limit as a change of policy leaves.
      State s;
      s.previous = random() % 3 == 0 ? below(limit < kMax ? limit + 1 : kMax) : pick(counts);
      s.current = random() % 3 == 0 ? below(limit < kMax ? limit + 1 : kMax) : pick(counts);
      const std::int64_t base = pick({0, 1'700'000'000'000'000'000, -w, -3 * w - 1, kMin / 4, kMax / 4});
      s.written = random() % 8 == 0 ? kMin : base + below(3 * w) - w;
      const std::int64_t now = random() % 8 == 0 ? pick({kMin, kMax, s.written}) : s.written + below(3 * w);
      const std::int64_t cost =
          random() % 4 == 0 ? pick({0, 1, limit - 1, limit, limit < kMax ? limit + 1 : kMax, kMax}) : below(limit) + 1;
      if (cost < 0) continue;
      const auto rules = SlidingWindowCounter{.limit = limit, .window = std::chrono::nanoseconds(w)}.rules(1);
      const TickDecision got = rules.evaluate(s, now, cost);
      const TickDecision want = reference(limit, w, s, now, cost);
      ASSERT_EQ(got, want) << "limit " << limit << " window " << w << " previous " << s.previous << " current "
                           << s.current << " written " << s.written << " now " << now << " cost " << cost
                           << ": allowed " << got.allowed << "/" << want.allowed << " remaining " << got.remaining
                           << "/" << want.remaining << " retry " << got.retry_after << "/" << want.retry_after;
      ++checks;
      if (s.previous > pmax) ++wide;
    }
  }
  EXPECT_GT(wide, checks / 20) << "the 128-bit path was exercised too rarely";
  EXPECT_GT(checks - wide, checks / 2) << "the 64-bit path was exercised too rarely";
}

}  // namespace swc_arithmetic
}  // namespace
