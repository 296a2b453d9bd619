// Settling after the response (include/ratelimit/README.md "Settling after the response") on MemoryLimiter of all
// five policies: over and under the charge, worked by hand; the debt bound; the numbers a settle returns;
// bad input; integer edges (INT64_MAX costs and debts).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <ratelimit/ratelimit.hpp>

#include "../support/invalid_message.hpp"

namespace {
namespace settle_test {  // named: the unity build joins this file with others

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;

template <class P>
MemoryLimiter<P, ManualClock> make(P policy, ManualClock clock) {
  return MemoryLimiter<P, ManualClock>(policy, {}, clock);
}

// A cost-1 request of `key` waits exactly `wait`: `peek` says so, one tick earlier it is denied, then admitted.
template <class L>
void expect_exact_wait(L& limiter, ManualClock& clock, std::chrono::nanoseconds wait) {
  EXPECT_EQ(limiter.peek("k").retry_after, wait);
  clock.advance(wait - 1ns);
  EXPECT_FALSE(limiter.allow("k"));
  clock.advance(1ns);
  EXPECT_TRUE(limiter.allow("k"));
}

TEST(SettleGcra, FiveUnitsOwedDelayTheNextRequestByFiveEmissionIntervals) {
  ManualClock clock;
  const ratelimit::Gcra policy{.limit = 10, .period = 1s, .burst = 2};  // T = 100 ms
  auto plain = make(policy, clock);
  auto settled = make(policy, clock);
  for (auto* l : {&plain, &settled}) {
    ASSERT_TRUE(l->allow("k"));
    ASSERT_TRUE(l->allow("k"));
  }
  const Decision after = settled.settle("k", 1, 6);
  EXPECT_EQ(after.remaining, 0);
  EXPECT_FALSE(after.allowed);          // the cost-0 view of a key in debt
  EXPECT_EQ(after.retry_after, 500ms);  // the debt is paid when the backlog is back to tau
  EXPECT_EQ(after.reset_after, 700ms);
  EXPECT_EQ(plain.peek("k").retry_after, 100ms);
  expect_exact_wait(settled, clock, 600ms);  // 5 T later
}

TEST(SettleGcra, BelowTheChargeGivesBackAsRefund) {
  ManualClock clock;
  auto limiter = make(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 4}, clock);
  ASSERT_TRUE(limiter.allow("k", 4));
  const Decision d = limiter.settle("k", 4, 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 3);
  EXPECT_EQ(d.reset_after, 100ms);
  EXPECT_EQ(limiter.settle("k", 4, 0).remaining, 4);  // never past full
  EXPECT_EQ(limiter.size(), 0u);                      // and a full key is reclaimed
  EXPECT_EQ(limiter.settle("absent", 3, 0).remaining, 4);
  EXPECT_EQ(limiter.size(), 0u);  // giving back to an absent key inserts nothing
  EXPECT_EQ(limiter.settle("absent", 3, 3).remaining, 4);
  EXPECT_EQ(limiter.size(), 0u);
}

TEST(SettleGcra, MaxDebtClampsWithoutRefusing) {
  ManualClock clock;
  auto limiter = make(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 2}, clock);
  const Decision d = limiter.settle("k", 0, 100, 3);  // backlog min(100 T, tau + 3 T) = 5 T
  EXPECT_EQ(d.reset_after, 500ms);
  EXPECT_EQ(d.retry_after, 300ms);
  EXPECT_EQ(limiter.settle("k", 0, 1, 3).reset_after, 500ms);  // at the bound: stays
  EXPECT_EQ(limiter.settle("k", 0, 1, 0).reset_after, 500ms);  // a smaller bound never lowers a debt
  EXPECT_EQ(make(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 2}, clock).settle("j", 0, 9, 0).reset_after,
            200ms);  // max_debt 0: never past the burst
}

TEST(SettleTokenBucket, DebitsAndGivesBackAsGcra) {
  ManualClock clock;
  auto limiter =
      make(ratelimit::TokenBucket{.capacity = 5, .refill_tokens = 10, .refill_period = 1s}, clock);  // T = 100 ms
  ASSERT_TRUE(limiter.allow("k", 2));
  EXPECT_EQ(limiter.settle("k", 2, 8).reset_after, 800ms);  // 3 tokens owed beyond the capacity
  EXPECT_EQ(limiter.peek("k").retry_after, 400ms);          // 800 + 100 - 500
  EXPECT_EQ(limiter.settle("k", 8, 2).reset_after, 200ms);
}

TEST(SettleFixedWindow, DebitsPastTheLimitInTheCurrentWindow) {
  ManualClock clock;
  auto limiter = make(ratelimit::FixedWindow{.limit = 5, .window = 1s}, clock);
  clock.advance(200ms);
  ASSERT_TRUE(limiter.allow("k", 2));
  const Decision d = limiter.settle("k", 2, 9);  // count 9
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 800ms);  // the debt leaves with the window
  const Decision next = limiter.peek("k");
  EXPECT_FALSE(next.allowed);
  EXPECT_EQ(next.retry_after, 800ms);
  EXPECT_EQ(limiter.refund("k", 3).remaining, 0);  // 6 left: still over
  EXPECT_EQ(limiter.refund("k", 2).remaining, 1);  // exactly 9 were counted
  clock.advance(800ms);
  EXPECT_EQ(limiter.peek("k").remaining, 5);  // a new window owes nothing
}

TEST(SettleFixedWindow, MaxDebtAndGiveBack) {
  ManualClock clock;
  auto limiter = make(ratelimit::FixedWindow{.limit = 5, .window = 1s}, clock);
  ASSERT_TRUE(limiter.allow("k", 2));
  EXPECT_EQ(limiter.settle("k", 2, 100, 3).remaining, 0);  // count min(100, 5 + 3) = 8
  EXPECT_EQ(limiter.refund("k", 3).remaining, 0);
  EXPECT_EQ(limiter.refund("k", 1).remaining, 1);
  EXPECT_EQ(limiter.settle("k", 4, 1).remaining, 4);  // under the charge: 3 given back
}

TEST(SettleSlidingWindowLog, TheDebtIsAnEntryThatLeavesTheWindow) {
  ManualClock clock;
  auto limiter = make(ratelimit::SlidingWindowLog{.limit = 5, .window = 1s}, clock);
  ASSERT_TRUE(limiter.allow("k", 2));  // at 0
  clock.advance(100ms);
  const Decision d = limiter.settle("k", 2, 9);  // (100 ms, 7): 9 in the window
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 1s);
  // A cost-1 request needs 5 units to leave: the entry at 0 (2), then the debt (7) at 1.1 s.
  expect_exact_wait(limiter, clock, 1s);
}

TEST(SettleSlidingWindowLog, ALogAtItsEntryBoundMergesTheDebtIntoTheNewestEntry) {
  ManualClock clock;
  auto limiter = make(ratelimit::SlidingWindowLog{.limit = 3, .window = 1s}, clock);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(limiter.allow("k"));
    clock.advance(100ms);
  }
  // Three entries (0, 100, 200 ms): debts at new times go into the newest entry, which moves to their time.
  for (int i = 0; i < 50; ++i) {
    (void)limiter.settle("k", 0, 1);
    clock.advance(1ms);
  }
  EXPECT_EQ(limiter.table_bytes(), limiter.recount_table_bytes());
  // The entries at 0 and 100 ms leave at 1 s and 1.1 s; the merged one (1 + 50 units) at 349 ms + 1 s.
  clock.set(ManualClock::time_point(1100ms));
  EXPECT_EQ(limiter.peek("k").retry_after, 1349ms - 1100ms);
  EXPECT_EQ(limiter.settle("k", 51, 0).remaining, 3);  // and exactly 51 units were in it
}

TEST(SettleSlidingWindowLog, UnderTheChargeGivesBackNewestFirst) {
  ManualClock clock;
  auto limiter = make(ratelimit::SlidingWindowLog{.limit = 5, .window = 1s}, clock);
  ASSERT_TRUE(limiter.allow("k", 4));
  EXPECT_EQ(limiter.settle("k", 4, 1).remaining, 4);
  EXPECT_EQ(limiter.settle("k", 0, 100, 2).remaining, 0);  // live count min(101, 5 + 2) = 7
  EXPECT_EQ(limiter.refund("k", 2).remaining, 0);
  EXPECT_EQ(limiter.refund("k", 1).remaining, 1);
}

TEST(SettleSlidingWindowCounter, DebitsTheCurrentWindowAndWeighsItNext) {
  ManualClock clock;
  auto limiter = make(ratelimit::SlidingWindowCounter{.limit = 10, .window = 1s}, clock);
  ASSERT_TRUE(limiter.allow("k", 4));
  const Decision d = limiter.settle("k", 4, 14);  // current 14
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 2s);
  clock.advance(1s);
  // prev 14 weighs (W - r) / W: a cost-1 request passes once 14 (W - r) / W + 1 <= 10, r >= W - 9 W / 14.
  const std::chrono::nanoseconds wait(1'000'000'000 - 9'000'000'000 / 14);
  expect_exact_wait(limiter, clock, wait);
}

TEST(SettleSlidingWindowCounter, MaxDebtAndGiveBack) {
  ManualClock clock;
  auto limiter = make(ratelimit::SlidingWindowCounter{.limit = 10, .window = 1s}, clock);
  ASSERT_TRUE(limiter.allow("k", 4));
  EXPECT_EQ(limiter.settle("k", 4, 100, 1).remaining, 0);  // current min(100, 11) = 11
  EXPECT_EQ(limiter.refund("k", 1).remaining, 0);
  EXPECT_EQ(limiter.refund("k", 1).remaining, 1);
  EXPECT_EQ(limiter.settle("k", 5, 0).remaining, 6);
}

TEST(SettleValidation, BadInputNamesTheField) {
  ManualClock clock;
  auto limiter = make(ratelimit::FixedWindow{.limit = 5, .window = 1s}, clock);
  EXPECT_EQ(ratelimit_test::invalid_message([&] { (void)limiter.settle("k", -1, 1); }),
            "charged: must be >= 0, got -1");
  EXPECT_EQ(ratelimit_test::invalid_message([&] { (void)limiter.settle("k", 1, -2); }), "actual: must be >= 0, got -2");
  EXPECT_EQ(ratelimit_test::invalid_message([&] { (void)limiter.settle("k", 1, 2, -3); }),
            "max_debt: must be >= 0, got -3");
  EXPECT_EQ(ratelimit_test::invalid_message([&] { (void)limiter.settle(std::string(600, 'k'), 1, 2); }).rfind("key", 0),
            0u);
  EXPECT_EQ(limiter.size(), 0u);
}

// INT64_MAX charges, debts and bounds: exact or clamped, never overflowing (the sanitizer builds check the
// arithmetic), and `remaining` stays in [0, limit].
template <class P>
void settle_at_the_edges(P policy) {
  ManualClock clock;
  clock.set(ManualClock::time_point(1h));
  auto limiter = make(policy, clock);
  const std::int64_t limit = limiter.peek("k").limit;
  for (int i = 0; i < 3; ++i) {
    const Decision d = limiter.settle("k", 0, INT64_MAX);
    EXPECT_EQ(d.remaining, 0);
    EXPECT_GT(d.reset_after, 0ns);
    clock.advance(1ns);
  }
  EXPECT_FALSE(limiter.allow("k"));
  EXPECT_EQ(limiter.settle("k", INT64_MAX, INT64_MAX).remaining, 0);
  EXPECT_EQ(limiter.settle("k", 1, INT64_MAX, INT64_MAX).remaining, 0);
  const Decision back = limiter.settle("k", INT64_MAX, 0, INT64_MAX);  // INT64_MAX given back: full
  EXPECT_EQ(back.remaining, limit);
  EXPECT_EQ(limiter.settle("j", INT64_MAX, 0).remaining, limit);
  clock.set(ManualClock::time_point::max());
  const Decision end = limiter.settle("e", 0, INT64_MAX);
  EXPECT_EQ(end.remaining, 0);
  EXPECT_GE(limiter.peek("e").retry_after, 0ns);
}

TEST(SettleEdges, Int64MaxOnEveryPolicy) {
  settle_at_the_edges(ratelimit::FixedWindow{.limit = 3, .window = 1s});
  settle_at_the_edges(ratelimit::SlidingWindowLog{.limit = 3, .window = 1s});
  settle_at_the_edges(ratelimit::SlidingWindowCounter{.limit = 3, .window = 1s});
  settle_at_the_edges(ratelimit::Gcra{.limit = 3, .period = 1s, .burst = 3});
  settle_at_the_edges(ratelimit::TokenBucket{.capacity = 3, .refill_tokens = 3, .refill_period = 1s});
  settle_at_the_edges(ratelimit::Gcra{.limit = 1, .period = 1ns, .burst = 1});
}

TEST(SettleEdges, ACounterOwingInt64MaxWeighsItInTheNextWindow) {
  ManualClock clock;
  auto limiter = make(ratelimit::SlidingWindowCounter{.limit = 3, .window = 1s}, clock);
  (void)limiter.settle("k", 0, INT64_MAX);
  clock.advance(1s + 500ms);  // previous = INT64_MAX, half of it still weighs: the 128-bit path
  const Decision d = limiter.peek("k");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_GT(d.retry_after, 0ns);
  EXPECT_LE(d.retry_after, 500ms);
}

TEST(SettleOverridable, SettlesUnderTheKeysPolicy) {
  ManualClock clock;
  ratelimit::OverridableMemoryLimiter<ratelimit::Gcra, ManualClock> limiter(
      ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 2}, {}, clock);
  EXPECT_EQ(limiter.settle("k", 0, 5).reset_after, 500ms);
  const auto wide = limiter.prepare(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 10});
  EXPECT_EQ(limiter.settle("w", 0, 5, 0, *wide).remaining, 5);
  EXPECT_EQ(limiter.settle("w", 5, 0, 0, *wide).remaining, 10);
}

}  // namespace settle_test
}  // namespace
