// ManualClock: starts at its epoch, copies share one time, set and advance (both ways).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include <ratelimit/ratelimit.hpp>

namespace {

using namespace std::chrono_literals;
using ratelimit::ManualClock;

TEST(ManualClock, StartsAtItsEpoch) {
  ManualClock clock;
  EXPECT_EQ(clock.now().time_since_epoch(), 0ns);
  static_assert(std::is_same_v<ManualClock::duration, std::chrono::nanoseconds>);
  static_assert(ratelimit::Clock<ManualClock>);
}

TEST(ManualClock, SetAndAdvanceBothWays) {
  ManualClock clock;
  clock.advance(1500ms);
  EXPECT_EQ(clock.now().time_since_epoch(), 1500ms);
  clock.advance(-2s);
  EXPECT_EQ(clock.now().time_since_epoch(), -500ms);
  clock.set(ManualClock::time_point(42ns));
  EXPECT_EQ(clock.now().time_since_epoch(), 42ns);
  clock.advance(1ns);
  EXPECT_EQ(clock.now().time_since_epoch(), 43ns);
  EXPECT_EQ(ratelimit::detail::now_ns(clock), 43);
}

TEST(ManualClock, CopiesShareOneTime) {
  ManualClock a;
  ManualClock b = a;
  ManualClock c;
  c = b;
  a.advance(5s);
  EXPECT_EQ(b.now().time_since_epoch(), 5s);
  EXPECT_EQ(c.now().time_since_epoch(), 5s);
  c.set(ManualClock::time_point(7s));
  EXPECT_EQ(a.now().time_since_epoch(), 7s);
  ManualClock independent;
  EXPECT_EQ(independent.now().time_since_epoch(), 0ns);
}

TEST(ManualClock, TheLimiterSeesTheTestsCopy) {
  ManualClock clock;
  ratelimit::MemoryLimiter<ratelimit::FixedWindow, ManualClock> limiter({.limit = 1, .window = 1s}, {}, clock);
  EXPECT_TRUE(limiter.allow("k"));
  EXPECT_FALSE(limiter.allow("k"));
  clock.advance(1s);
  EXPECT_TRUE(limiter.allow("k"));
  EXPECT_EQ(limiter.clock().now().time_since_epoch(), 1s);
}

TEST(ManualClock, ConcurrentAdvancesAddUp) {
  ManualClock clock;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([clock]() mutable {
      for (int n = 0; n < 10'000; ++n) clock.advance(1ns);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(clock.now().time_since_epoch(), 40'000ns);
}

}  // namespace
