// Time arithmetic of the layer helpers at the ends of the int64 nanosecond range: penalties of
// nanoseconds::max() seen from before the epoch, and a plan cache whose clock jumps across the whole
// range. Each result is clamped, never an overflow (this file is also built with
// -fsanitize=address,undefined -fno-sanitize-recover=all; see the commit that added it).
#include <gtest/gtest.h>

#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::ManualClock;

namespace {
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kFiveSeconds = 5'000'000'000;
}  // namespace

TEST(ExtremeTimes, SaturatingAddAndSubClampAtBothEnds) {
  using ratelimit::detail::saturating_add;
  using ratelimit::detail::saturating_sub;
  EXPECT_EQ(saturating_add(kMax, 1), kMax);
  EXPECT_EQ(saturating_add(kMin, -1), kMin);
  EXPECT_EQ(saturating_add(kMax, kMin), -1);
  EXPECT_EQ(saturating_add(-kFiveSeconds, kMax), kMax - kFiveSeconds);
  EXPECT_EQ(saturating_sub(kMax, -kFiveSeconds), kMax);
  EXPECT_EQ(saturating_sub(kMin, 1), kMin);
  EXPECT_EQ(saturating_sub(kMax, kMin), kMax);
  EXPECT_EQ(saturating_sub(kMin, kMax), kMin);
  EXPECT_EQ(saturating_sub(-1, kMin), kMax);
  EXPECT_EQ(saturating_sub(7, 9), -2);
}

TEST(ExtremeTimes, PenaltyBoxClampsTheRestOfAnEndlessPenalty) {
  ratelimit::PenaltyBox box;
  box.block("k", 0, kMax);  // until the end of time
  EXPECT_EQ(box.blocked_for("k", -kFiveSeconds), kMax);  // INT64_MAX + 5 s does not fit: clamped
  EXPECT_EQ(box.blocked_for("k", kMin), kMax);
  EXPECT_EQ(box.blocked_for("k", 0), kMax);
  EXPECT_EQ(box.blocked_for("k", kMax - 1), 1);
  box.block("early", kMin, kMax);  // until INT64_MIN + INT64_MAX = -1
  EXPECT_EQ(box.blocked_for("early", kMin), kMax);
  EXPECT_EQ(box.blocked_for("early", -2), 1);
  EXPECT_EQ(box.blocked_for("early", -1), 0);
  box.block("late", kMax - 1, kMax);  // until INT64_MAX, not past it
  EXPECT_EQ(box.blocked_for("late", kMax - 1), 1);
  EXPECT_EQ(box.blocked_for("late", kMax), 0);
}

TEST(ExtremeTimes, EndlessPenaltyStillDeniesAfterTheClockStepsBeforeTheEpoch) {
  ManualClock clock;
  ratelimit::MemoryLimiter<ratelimit::FixedWindow, ManualClock> limiter(ratelimit::FixedWindow{1, 10s}, {}, clock);
  ratelimit::LimiterLayer<decltype(limiter)> layer(limiter, "strict", {.penalty = std::chrono::nanoseconds::max()});
  auto check = [&] { return ratelimit::check_layers({{&layer, "ip"}}); };
  ASSERT_TRUE(check());
  ASSERT_EQ(check().layers[0].verdict, ratelimit::Verdict::limited);  // blocked until INT64_MAX ns
  clock.set(ManualClock::time_point(-5s));
  const auto d = check();
  ASSERT_FALSE(d);
  EXPECT_EQ(d.layers[0].verdict, ratelimit::Verdict::penalized);
  EXPECT_EQ(d.decision.retry_after, Decision::never);  // the clamped rest of the penalty
}

TEST(ExtremeTimes, PlanCacheEntryIsStaleAfterAJumpAcrossTheWholeRange) {
  ratelimit::detail::PlanCache cache(4, 60'000'000'000);
  cache.put("k", 1, kMin + 1);
  EXPECT_EQ(cache.get("k", kMin + 2), 1u);
  EXPECT_EQ(cache.get("k", kMax - 1), std::nullopt);  // (INT64_MAX - 1) - (INT64_MIN + 1) overflows int64
  cache.put("late", 2, kMax - 10);
  EXPECT_EQ(cache.get("late", kMax), 2u);  // 10 ns old: fresh, although stored + TTL is past INT64_MAX
  cache.put("back", 3, kMax - 1);
  EXPECT_EQ(cache.get("back", kMin), std::nullopt);  // the clock stepped back: not trusted
}

TEST(ExtremeTimes, TieredLimiterAsksAgainAfterTheClockJumpsFromNearMinToNearMax) {
  ManualClock clock;
  int calls = 0;
  ratelimit::TierOptions o;
  o.plans = {ratelimit::Plan{"free", 30, 1'000, 10}, ratelimit::Plan{"pro", 300, 50'000, 50}};
  ratelimit::TieredLimiter<ManualClock> tiers(
      o,
      [&](std::string_view) -> std::optional<std::string> {
        ++calls;
        return "pro";
      },
      clock);
  clock.set(ManualClock::time_point(std::chrono::nanoseconds(kMin + 1)));
  EXPECT_EQ(tiers.plan_for("k").plan.name, "pro");
  clock.set(ManualClock::time_point(std::chrono::nanoseconds(kMax - 1)));
  EXPECT_EQ(tiers.plan_for("k").plan.name, "pro");
  EXPECT_EQ(calls, 2);  // the entry from INT64_MIN + 1 is long expired
}
