// MemoryLimiter::set_policy (include/ratelimit/README.md "Changing a policy at run time"): usage carried in units,
// exactly as documented, per policy (ManualClock), and a race of checks against policy changes (never a mix).
#include <gtest/gtest.h>

#include <ratelimit/ratelimit.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;

// GCRA: used units ceil((TAT - t) / T_old) stay used; TAT = t + units * T_new.
TEST(SetPolicy, GcraCarriesUsedUnits) {
  ManualClock clock;
  MemoryLimiter<ratelimit::Gcra, ManualClock> l(ratelimit::Gcra{.limit = 10, .period = 10s, .burst = 5}, {}, clock);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(l.allow("k"));                 // T = 1 s: TAT = 3 s
  clock.advance(500ms);                                                  // TAT - t = 2.5 s: 3 units (rounded up)
  l.set_policy(ratelimit::Gcra{.limit = 10, .period = 5s, .burst = 4});  // T = 0.5 s, tau = 2 s
  const auto d = l.peek("k");                                            // TAT = t + 3 * 0.5 s = t + 1.5 s
  EXPECT_EQ(d.limit, 4);
  EXPECT_EQ(d.remaining, 1);  // floor((2 - 1.5) / 0.5)
  EXPECT_EQ(d.reset_after, 1500ms);
  EXPECT_EQ(l.policy().burst, 4);
  EXPECT_TRUE(l.allow("k"));
  EXPECT_FALSE(l.allow("k"));
  EXPECT_EQ(l.peek("fresh").remaining, 4);
}

// GCRA: the carried units are clamped to the new burst (TAT - t <= the new tolerance).
TEST(SetPolicy, GcraClampsToTheNewTolerance) {
  ManualClock clock;
  MemoryLimiter<ratelimit::Gcra, ManualClock> l(ratelimit::Gcra{.limit = 1, .period = 1s, .burst = 10}, {}, clock);
  ASSERT_TRUE(l.allow("k", 8));                                         // TAT = 8 s
  l.set_policy(ratelimit::Gcra{.limit = 1, .period = 2s, .burst = 3});  // T = 2 s, tau = 6 s
  const auto d = l.peek("k");
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 6s);  // min(8, 3) * 2 s
  EXPECT_EQ(d.retry_after, 2s);
}

// Token bucket decides as GCRA: the same carrying, in tokens.
TEST(SetPolicy, TokenBucketCarriesUsedTokens) {
  ManualClock clock;
  MemoryLimiter<ratelimit::TokenBucket, ManualClock> l(
      ratelimit::TokenBucket{.capacity = 10, .refill_tokens = 1, .refill_period = 1s}, {}, clock);
  ASSERT_TRUE(l.allow("k", 4));  // 4 tokens used, TAT = 4 s
  clock.advance(1500ms);         // 2.5 s of backlog: 3 tokens still used
  l.set_policy(ratelimit::TokenBucket{.capacity = 20, .refill_tokens = 4, .refill_period = 1s});  // T = 250 ms
  const auto d = l.peek("k");
  EXPECT_EQ(d.remaining, 17);
  EXPECT_EQ(d.reset_after, 750ms);
}

// Fixed window: the current window's count is kept and compared with the new limit; a lowered limit
// below it denies (remaining 0) until the new window ends; a refund gives back from the kept count.
TEST(SetPolicy, FixedWindowKeepsTheCount) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> l(ratelimit::FixedWindow{10, 60s}, {}, clock);
  clock.advance(10s);
  ASSERT_TRUE(l.allow("k", 7));
  clock.advance(5s);  // t = 15 s
  l.set_policy(ratelimit::FixedWindow{5, 20s});
  auto d = l.peek("k");
  EXPECT_EQ(d.limit, 5);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 5s);              // the new window [0, 20 s) ends
  EXPECT_EQ(l.refund("k", 3).remaining, 1);  // 7 - 3 = 4 of 5
  clock.advance(5s);
  EXPECT_EQ(l.peek("k").remaining, 5);
  l.set_policy(ratelimit::FixedWindow{100, 1h});  // raising a limit admits the difference at once
  ASSERT_TRUE(l.allow("k", 3));
  l.set_policy(ratelimit::FixedWindow{100, 2h});
  EXPECT_EQ(l.peek("k").remaining, 97);
}

// Sliding window counter: both windows' counts kept, weighted with the new window.
TEST(SetPolicy, SlidingWindowCounterKeepsBothCounts) {
  ManualClock clock;
  MemoryLimiter<ratelimit::SlidingWindowCounter, ManualClock> l(ratelimit::SlidingWindowCounter{10, 10s}, {}, clock);
  ASSERT_TRUE(l.allow("k", 6));                           // window 0
  clock.advance(12s);                                     // window 1, offset 2 s: prev = 6
  ASSERT_TRUE(l.allow("k", 2));                           // cur = 2
  l.set_policy(ratelimit::SlidingWindowCounter{20, 4s});  // t = 12 s: window 3, offset 0
  const auto d = l.peek("k");  // prev 6 weighted (4 - 0) / 4 = 6, cur 2: room 20 - 6 = 14, remaining 12
  EXPECT_EQ(d.remaining, 12);
  EXPECT_EQ(d.reset_after, 8s);  // cur > 0: 2W - r
}

// Sliding log: entries keep their times; the new window counts those inside it.
TEST(SetPolicy, SlidingWindowLogKeepsEntries) {
  ManualClock clock;
  MemoryLimiter<ratelimit::SlidingWindowLog, ManualClock> l(ratelimit::SlidingWindowLog{10, 10s}, {}, clock);
  ASSERT_TRUE(l.allow("k", 3));
  clock.advance(6s);
  ASSERT_TRUE(l.allow("k", 4));
  clock.advance(1s);                                 // t = 7 s
  l.set_policy(ratelimit::SlidingWindowLog{5, 5s});  // window (2 s, 7 s]: the 4 at 6 s
  EXPECT_EQ(l.peek("k").remaining, 1);
  l.set_policy(ratelimit::SlidingWindowLog{3, 10s});  // window (-3 s, 7 s]: 7 > 3, remaining 0
  const auto d = l.peek("k");
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, 9s);  // both entries must leave: 6 s + 10 s - 7 s
}

TEST(SetPolicy, BadPolicyChangesNothing) {
  ManualClock clock;
  MemoryLimiter<ratelimit::Gcra, ManualClock> l(ratelimit::Gcra{.limit = 10, .period = 10s, .burst = 5}, {}, clock);
  ASSERT_TRUE(l.allow("k"));
  EXPECT_THROW(l.set_policy(ratelimit::Gcra{.limit = 10, .period = 10s, .burst = 0}), std::invalid_argument);
  EXPECT_EQ(l.policy().burst, 5);
  EXPECT_EQ(l.peek("k").remaining, 4);
}

// The race below, made deterministic: a check reads its clock, a change at a later time finds the key
// full (its TAT passed) and keeps it, then the check runs at its earlier time under the new rules. It
// must see a full key (the change's time is the key's latest write), not the old backlog left at its
// time measured in the new rules (limit 50 with a 2 s backlog).
TEST(SetPolicy, GcraCheckFromBeforeTheChangeSeesNoOldBacklog) {
  ManualClock clock;
  const ratelimit::Gcra a{.limit = 1, .period = 1s, .burst = 5};     // T = 1 s, tau = 5 s
  const ratelimit::Gcra b{.limit = 100, .period = 1s, .burst = 50};  // T = 10 ms, tau = 500 ms
  MemoryLimiter<ratelimit::Gcra, ManualClock> l(a, {}, clock);
  ASSERT_TRUE(l.allow("k", 3));          // TAT = 3 s
  const auto before = clock.now() + 1s;  // the check's clock read: t = 1 s, backlog 2 s under a
  clock.advance(4s);                     // t = 4 s: the key is full
  l.set_policy(b);
  const auto d = l.allow("k", 1, before);
  EXPECT_EQ(d.limit, 50);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 49);
  EXPECT_EQ(d.reset_after, 10ms);
}

// 8 threads: 6 check while 2 switch between two GCRA policies. Every decision is wholly one policy's:
// its limit is one of the two bursts and its numbers fit that policy's bounds. It once found a check
// whose clock was read before a change evaluating the new rules on a key the change had left as it
// was (full at the change's time, not at the check's): the deterministic test above.
TEST(SetPolicy, RaceEightThreadsNeverAMix) {
  ManualClock clock;
  const ratelimit::Gcra a{.limit = 1, .period = 1s, .burst = 5};     // T = 1 s, tau = 5 s
  const ratelimit::Gcra b{.limit = 100, .period = 1s, .burst = 50};  // T = 10 ms, tau = 500 ms
  MemoryLimiter<ratelimit::Gcra, ManualClock> l(a, ratelimit::MemoryOptions{.shards = 4}, clock);
  // The switchers make a fixed number of changes and the checkers run until both are done, so the race
  // happens however the scheduler shares the cores (a loaded machine once starved the switchers).
  std::atomic<int> switching{2};
  std::atomic<int> mixed{0}, checks{0}, changes{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      const std::string keys[] = {"a", "b", "c", std::to_string(t)};
      for (int i = 0; (i < 20'000 || switching > 0) && !mixed; ++i) {
        const auto d = l.allow(keys[i % 4]);
        ++checks;
        const bool is_a = d.limit == 5 && d.remaining <= 5 && d.reset_after <= 5s;
        const bool is_b = d.limit == 50 && d.remaining <= 50 && d.reset_after <= 500ms;
        if (!is_a && !is_b) ++mixed;
        if (i % 64 == 0) clock.advance(1ms);
      }
    });
  }
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        l.set_policy((i + t) % 2 == 0 ? b : a);
        ++changes;
        std::this_thread::yield();
      }
      --switching;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mixed.load(), 0);
  EXPECT_EQ(changes.load(), 200);
  EXPECT_GE(checks.load(), 6 * 20'000);
}

// At the clock's edge (year 2262 on a nanosecond epoch clock) time stands still where time plus twice the
// horizon fits int64; a longer new window moves that edge earlier. The log's entries, written before at
// the old edge, must move with it: otherwise an entry lies after the effective time, `reset_after`
// exceeds the window (entry + W - t overflowed int64: UBSan) and a new entry is appended before it.
TEST(SetPolicyAtTheClockEdge, SlidingLogLongerWindowKeepsEntriesInRange) {
  ManualClock clock;
  clock.set(ManualClock::time_point(std::chrono::nanoseconds(std::numeric_limits<std::int64_t>::max() - 1)));
  MemoryLimiter<ratelimit::SlidingWindowLog, ManualClock> l(ratelimit::SlidingWindowLog{5, 1s}, {}, clock);
  ASSERT_TRUE(l.allow("k", 2));
  const auto window = std::chrono::nanoseconds(std::numeric_limits<std::int64_t>::max() / 8);
  l.set_policy(ratelimit::SlidingWindowLog{5, window});
  auto d = l.peek("k");
  EXPECT_EQ(d.remaining, 3);
  EXPECT_LE(d.reset_after, window);
  ASSERT_TRUE(l.allow("k", 3));
  d = l.allow("k");
  EXPECT_FALSE(d.allowed);
  EXPECT_LE(d.retry_after, window);
  EXPECT_EQ(l.refund("k", 5).remaining, 5);
}

// A reload that repeats the policy (a config push every few seconds, the example's SIGHUP with an unchanged
// plan file) changes nothing. Converting anyway rounded a GCRA backlog up to whole units at every call, so a
// key reloaded more often than once per emission interval never drained: its used unit stayed used.
TEST(SetPolicy, SamePolicyAgainKeepsTheStateAsItIs) {
  ManualClock clock;
  const ratelimit::Gcra policy{.limit = 1, .period = 2s, .burst = 5};  // T = 2 s
  MemoryLimiter<ratelimit::Gcra, ManualClock> l(policy, {}, clock);
  ASSERT_TRUE(l.allow("k"));  // TAT = 2 s
  for (int i = 0; i < 4; ++i) {
    clock.advance(500ms);
    l.set_policy(policy);
  }
  EXPECT_EQ(l.peek("k").reset_after, 0s);  // drained at 2 s, as without the reloads
  EXPECT_EQ(l.peek("k").remaining, 5);
  EXPECT_EQ(l.policy_generation(), 4u);
  // Other parameters with the same rules (T = 2 s, burst 5) convert nothing either; the policy is replaced.
  ASSERT_TRUE(l.allow("k"));
  clock.advance(500ms);
  l.set_policy(ratelimit::Gcra{.limit = 2, .period = 4s, .burst = 5});
  EXPECT_EQ(l.peek("k").reset_after, 1500ms);
  EXPECT_EQ(l.policy().period, 4s);
}
