// Bounded memory (include/ratelimit/README.md "Guarantees"): max_keys is a hard cap under a flood of distinct keys,
// full keys are reclaimed (by sweep, on touch, as new keys arrive), a hot key survives a flood (LRU), reset forgets.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <ratelimit/ratelimit.hpp>

#include "../support/sanitizers.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;

// Two million keys where that is quick (an optimized build), fewer under sanitizers or without -O.
#if defined(__OPTIMIZE__) && !defined(RATELIMIT_TEST_SANITIZED)
constexpr std::int64_t kFloodKeys = 2'000'000;
#else
constexpr std::int64_t kFloodKeys = 200'000;
#endif

std::string flood_key(std::int64_t i) {
  // Every fourth key is longer than the 16 inline bytes, so long keys are allocated and freed too.
  return i % 4 == 0 ? "a-rather-long-flood-key-" + std::to_string(i) : "k" + std::to_string(i);
}

TEST(Eviction, MaxKeysIsAHardBoundUnderAFloodOfDistinctKeys) {
  constexpr std::size_t kMaxKeys = 10'000;
  ManualClock clock;
  // A long window: no key is full again during the flood, so only eviction can make room.
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> limiter({.limit = 1'000, .window = 1h}, {.max_keys = kMaxKeys},
                                                             clock);
  std::size_t bytes_at_cap = 0, bytes_max = 0;
  for (std::int64_t i = 0; i < kFloodKeys; ++i) {
    clock.advance(1us);
    const ratelimit::Decision d = limiter.allow(flood_key(i));
    ASSERT_TRUE(d.allowed) << i;
    ASSERT_EQ(d.remaining, 999) << i;
    const std::size_t size = limiter.size();
    ASSERT_LE(size, kMaxKeys) << "after key " << i;
    if (i == static_cast<std::int64_t>(2 * kMaxKeys)) bytes_at_cap = limiter.table_bytes();
    if (i > static_cast<std::int64_t>(2 * kMaxKeys)) bytes_max = std::max(bytes_max, limiter.table_bytes());
  }
  EXPECT_EQ(limiter.size(), kMaxKeys);  // every shard is at its share of the cap
  EXPECT_EQ(limiter.evictions(), static_cast<std::size_t>(kFloodKeys) - kMaxKeys);
  EXPECT_LE(bytes_max, bytes_at_cap + kMaxKeys * 40) << "memory kept growing at the cap";
  // The newest key is still there with its usage.
  EXPECT_EQ(limiter.peek(flood_key(kFloodKeys - 1)).remaining, 999);
}

TEST(Eviction, TinyCapsHold) {
  for (std::size_t cap : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{17}, std::size_t{100}}) {
    ManualClock clock;
    MemoryLimiter<ratelimit::Gcra, ManualClock> limiter({.limit = 1, .period = 1h, .burst = 2}, {.max_keys = cap},
                                                        clock);
    for (int i = 0; i < 1000; ++i) {
      clock.advance(2ms);
      ASSERT_TRUE(limiter.allow(flood_key(i)).allowed);
      ASSERT_LE(limiter.size(), cap) << "cap " << cap << " key " << i;
      ASSERT_EQ(limiter.peek(flood_key(i)).remaining, 1) << "the key just inserted must be kept";
    }
  }
}

/// Sends one request to each of `n` keys at t = 0 and checks that sweep() reclaims none of them one tick
/// before their reset_after and all of them at it.
template <ratelimit::Policy P>
void expect_swept_exactly_at_reset_after(P policy, std::int64_t cost) {
  SCOPED_TRACE(P::kind);
  ManualClock clock;
  MemoryLimiter<P, ManualClock> limiter(policy, {}, clock);
  constexpr int n = 1000;
  std::chrono::nanoseconds reset{0};
  for (int i = 0; i < n; ++i) reset = limiter.allow(flood_key(i), cost).reset_after;
  ASSERT_GT(reset, 0ns);
  ASSERT_EQ(limiter.size(), static_cast<std::size_t>(n));
  const std::size_t bytes = limiter.table_bytes();
  EXPECT_EQ(limiter.sweep(), 0u);
  clock.advance(reset - 1ns);
  EXPECT_EQ(limiter.sweep(), 0u);
  EXPECT_EQ(limiter.size(), static_cast<std::size_t>(n));
  clock.advance(1ns);
  EXPECT_EQ(limiter.sweep(), static_cast<std::size_t>(n));
  EXPECT_EQ(limiter.size(), 0u);
  EXPECT_LT(limiter.table_bytes(), bytes / 4) << "sweeping should give memory back";
  EXPECT_EQ(limiter.evictions(), 0u);
  EXPECT_EQ(limiter.peek(flood_key(0)).remaining, limiter.peek(flood_key(0)).limit);
}

TEST(Eviction, SweepReclaimsFullKeysExactlyAtResetAfter) {
  expect_swept_exactly_at_reset_after(ratelimit::FixedWindow{.limit = 3, .window = 1ms}, 2);
  expect_swept_exactly_at_reset_after(ratelimit::SlidingWindowLog{.limit = 3, .window = 1ms}, 2);
  expect_swept_exactly_at_reset_after(ratelimit::SlidingWindowCounter{.limit = 3, .window = 1ms}, 2);  // 2W
  expect_swept_exactly_at_reset_after(ratelimit::Gcra{.limit = 3, .period = 1ms, .burst = 3}, 2);
  expect_swept_exactly_at_reset_after(ratelimit::TokenBucket{.capacity = 3, .refill_tokens = 3, .refill_period = 1ms},
                                      2);
}

TEST(Eviction, FullKeyIsReclaimedOnTouch) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> limiter({.limit = 2, .window = 1ms}, {}, clock);
  EXPECT_TRUE(limiter.allow("a"));
  EXPECT_TRUE(limiter.allow("b"));
  EXPECT_TRUE(limiter.allow("c"));
  EXPECT_EQ(limiter.size(), 3u);
  EXPECT_EQ(limiter.allow("a", 0).remaining, 1);  // not full yet: kept
  EXPECT_EQ(limiter.size(), 3u);
  clock.advance(1ms);  // next window: all full again
  EXPECT_EQ(limiter.peek("a").remaining, 2);
  EXPECT_EQ(limiter.allow("a", 0).remaining, 2);  // a cost-0 touch reclaims it
  EXPECT_EQ(limiter.size(), 2u);
  EXPECT_EQ(limiter.allow("b", 3).retry_after, ratelimit::Decision::never);  // so does a `never`
  EXPECT_EQ(limiter.size(), 1u);
  EXPECT_TRUE(limiter.allow("c"));  // an admitted request keeps it, with fresh state
  EXPECT_EQ(limiter.size(), 1u);
  EXPECT_EQ(limiter.peek("c").remaining, 1);
}

TEST(Eviction, NewKeysMakeRoomFromFullKeys) {
  ManualClock clock;
  constexpr std::size_t kMaxKeys = 4'000;
  MemoryLimiter<ratelimit::Gcra, ManualClock> limiter({.limit = 1, .period = 1ms, .burst = 1}, {.max_keys = kMaxKeys},
                                                      clock);
  for (int i = 0; i < 2'000; ++i) ASSERT_TRUE(limiter.allow("old" + std::to_string(i)));
  EXPECT_EQ(limiter.size(), 2'000u);
  EXPECT_EQ(limiter.evictions(), 0u);
  clock.advance(2ms);          // every old key is full again (and older for LRU)
  constexpr int kNew = 3'000;  // 5000 in all: at least 1000 old keys must go
  for (int i = 0; i < kNew; ++i) {
    ASSERT_TRUE(limiter.allow("new" + std::to_string(i)));
    ASSERT_LE(limiter.size(), kMaxKeys);
    clock.advance(1ns);
  }
  // The full old keys made room (reclaimed as new keys arrive, or evicted first); the new keys, all in
  // use, keep their usage: eviction is approximate, so allow a handful of losses.
  int lost = 0;
  for (int i = 0; i < kNew; ++i) lost += limiter.peek("new" + std::to_string(i)).remaining == 0 ? 0 : 1;
  EXPECT_LE(lost, kNew / 100);
  limiter.sweep();  // what is left of the old keys
  EXPECT_EQ(limiter.size(), static_cast<std::size_t>(kNew - lost));
}

TEST(Eviction, HotKeySurvivesAFlood) {
  ManualClock clock;
  constexpr std::size_t kMaxKeys = 1'000;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> limiter({.limit = 1'000'000, .window = 1h}, {.max_keys = kMaxKeys},
                                                             clock);
  std::int64_t hot_uses = 0;
  for (int i = 0; i < 100'000; ++i) {
    clock.advance(2ms);
    ASSERT_TRUE(limiter.allow(flood_key(i)));
    if (i % 10 == 0) {
      const ratelimit::Decision d = limiter.allow("hot");
      ++hot_uses;
      ASSERT_EQ(d.remaining, 1'000'000 - hot_uses) << "the hot key lost its usage at flood key " << i;
    }
  }
  EXPECT_GE(limiter.evictions(), 99'000u - kMaxKeys);
  EXPECT_LE(limiter.size(), kMaxKeys);
}

// A key touched just now is never the one evicted, whatever the clock reads: the example at both
// parities of the old millisecond stamp (an even one made the newest key look the oldest).
TEST(Eviction, TheMostRecentlyUsedKeyIsNotEvictedAtEitherStampParity) {
  for (const std::int64_t unit : {std::int64_t{100}, std::int64_t{101}}) {
    ManualClock clock;
    MemoryLimiter<ratelimit::FixedWindow, ManualClock> limiter({.limit = 1, .window = 1h}, {.max_keys = 2}, clock);
    ASSERT_TRUE(limiter.allow("old"));
    clock.set(ManualClock::time_point(std::chrono::nanoseconds(unit << 20)));
    ASSERT_TRUE(limiter.allow("hot"));
    ASSERT_TRUE(limiter.allow("new"));
    EXPECT_FALSE(limiter.peek("hot").allowed) << "hot was evicted at stamp " << unit;
    EXPECT_TRUE(limiter.peek("old").allowed) << "old was kept at stamp " << unit;
    EXPECT_FALSE(limiter.peek("new").allowed);
  }
}

// One hot key touched between every two new keys of a flood is never evicted: with a ManualClock that
// advances less than a stamp unit per round at each parity, and with the real clock (where many rounds
// share one millisecond, so time alone cannot order them).
template <class C>
void hot_key_between_every_two_new_keys(C clock, std::size_t max_keys, std::int64_t rounds,
                                        std::chrono::nanoseconds step) {
  MemoryLimiter<ratelimit::FixedWindow, C> limiter({.limit = 1'000'000'000, .window = 1h}, {.max_keys = max_keys},
                                                   clock);
  std::int64_t hot_uses = 0;
  for (std::int64_t i = 0; i < rounds; ++i) {
    if constexpr (std::is_same_v<C, ManualClock>) limiter.clock().advance(step);
    ASSERT_TRUE(limiter.allow(flood_key(i)));
    const ratelimit::Decision d = limiter.allow("hot");
    ++hot_uses;
    ASSERT_EQ(d.remaining, 1'000'000'000 - hot_uses) << "the hot key was evicted before flood key " << i;
  }
  EXPECT_GE(limiter.evictions(), static_cast<std::size_t>(rounds) - max_keys);
}

TEST(Eviction, HotKeyTouchedBetweenNewKeysSurvivesWithManualClock) {
  // Even start, then odd start; steps well under one ~1 ms unit and one of exactly a unit.
  for (const std::int64_t start : {std::int64_t{100} << 20, std::int64_t{101} << 20}) {
    for (const std::chrono::nanoseconds step :
         {std::chrono::nanoseconds(1us), std::chrono::nanoseconds(300us), std::chrono::nanoseconds(1 << 20)}) {
      ManualClock clock;
      clock.set(ManualClock::time_point(std::chrono::nanoseconds(start)));
      hot_key_between_every_two_new_keys(clock, 1'000, 100'000, step);
    }
  }
}

TEST(Eviction, HotKeyTouchedBetweenNewKeysSurvivesWithRealClock) {
  hot_key_between_every_two_new_keys(std::chrono::steady_clock{}, 1'000, kFloodKeys, 0ns);
  hot_key_between_every_two_new_keys(std::chrono::steady_clock{}, 100'000, kFloodKeys, 0ns);
}

// The store's touch sequence wraps around by halving every stamp: across the wrap the order holds.
TEST(Eviction, LruOrderHoldsAcrossTheWrapOfTheTouchSequence) {
  struct State {
    int used = 0;
  };
  ratelimit::detail::ShardedStore<State> store(2, 1);
  auto touch = [&](std::string_view key) {
    store.update(
        key, store.hash(key),
        [](State& s, bool) {
          return std::pair{++s.used, true};
        },
        [](const State&) { return false; });
  };
  auto present = [&](std::string_view key) {
    return store.read(key, store.hash(key), [](const State& s) { return s.used > 0; });
  };
  touch("old");
  store.skip_touches(UINT32_MAX - 3);  // the sequence is at 2^32 - 3
  touch("hot");
  touch("hot");  // at 2^32 - 1
  touch("new");  // wraps: stamps halved, then new is the latest
  EXPECT_TRUE(present("hot"));
  EXPECT_FALSE(present("old"));
  touch("hot");
  touch("newer");  // new is now the least recent
  EXPECT_TRUE(present("hot"));
  EXPECT_FALSE(present("new"));
  EXPECT_TRUE(present("newer"));
}

TEST(Eviction, ResetForgetsAKey) {
  ManualClock clock;
  MemoryLimiter<ratelimit::SlidingWindowLog, ManualClock> limiter({.limit = 2, .window = 1s}, {}, clock);
  limiter.reset("absent");  // no-op
  EXPECT_TRUE(limiter.allow("a", 2));
  EXPECT_TRUE(limiter.allow("b", 1));
  EXPECT_FALSE(limiter.allow("a"));
  EXPECT_EQ(limiter.size(), 2u);
  limiter.reset("a");
  EXPECT_EQ(limiter.size(), 1u);
  const ratelimit::Decision d = limiter.peek("a");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 2);
  EXPECT_EQ(d.reset_after, 0ns);
  EXPECT_TRUE(limiter.allow("a", 2));
  EXPECT_EQ(limiter.peek("b").remaining, 1);  // other keys untouched
}

}  // namespace
