// Jitter (include/ratelimit/README.md "Shaping"): extra waits stay in [0, max], a seed repeats the sequence, and
// acquire adds them without passing max_wait; a negative bound is refused by name.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <ratelimit/fair_acquirer.hpp>
#include <ratelimit/ratelimit.hpp>

namespace {

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::FixedWindow;
using ratelimit::Jitter;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;

TEST(ShapingJitter, DrawsStayWithinTheBoundAndSpread) {
  Jitter jitter(10ms, 42);
  std::set<std::int64_t> seen;
  for (int i = 0; i < 10'000; ++i) {
    const std::chrono::nanoseconds d = jitter.draw();
    ASSERT_GE(d, 0ns);
    ASSERT_LE(d, 10ms);
    seen.insert(d.count() / 1'000'000);  // which millisecond
  }
  EXPECT_EQ(seen.size(), 10U) << "10,000 draws should hit every millisecond of [0, 10 ms)";
  Jitter tiny(1ns, 7);
  std::set<std::int64_t> both;
  for (int i = 0; i < 100; ++i) both.insert(tiny.draw().count());
  EXPECT_EQ(both, (std::set<std::int64_t>{0, 1})) << "both ends of [0, max] are drawn";
}

TEST(ShapingJitter, ASeedRepeatsTheSequenceAndNoneDrawsZero) {
  Jitter a(1s, 1234);
  Jitter b(1s, 1234);
  Jitter c(1s, 1235);
  int same_as_other_seed = 0;
  for (int i = 0; i < 100; ++i) {
    const auto x = a.draw();
    EXPECT_EQ(x, b.draw());
    same_as_other_seed += x == c.draw() ? 1 : 0;
  }
  EXPECT_LT(same_as_other_seed, 5);
  Jitter none;
  EXPECT_EQ(none.max(), 0ns);
  EXPECT_EQ(none.draw(), 0ns);
  Jitter from_entropy(5ms);
  EXPECT_LE(from_entropy.draw(), 5ms);
}

TEST(ShapingJitter, ANegativeBoundThrowsNamingIt) {
  try {
    Jitter jitter(-1ns, 1);
    FAIL() << "a negative jitter was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("jitter", 0), 0U) << e.what();
  }
  EXPECT_THROW(Jitter(-1ms), std::invalid_argument);
}

// Retrying limiters (a window): each wait is retry_after plus a draw, cut so the call ends within max_wait.
TEST(ShapingJitter, AcquireAddsJitterWithinMaxWait) {
  ManualClock clock;
  MemoryLimiter<FixedWindow, ManualClock> limiter({.limit = 1, .window = 100ms}, {}, clock);
  std::vector<std::chrono::nanoseconds> waits;
  auto wait = [&](std::chrono::nanoseconds d) {
    waits.push_back(d);
    clock.advance(d);
  };
  Jitter jitter(30ms, 9);
  for (int i = 0; i < 50; ++i) {
    clock.set(ManualClock::time_point(std::chrono::seconds(i)));
    ASSERT_TRUE(limiter.allow("k"));  // full until the next window, 100 ms on
    const auto start = clock.now();
    const Decision d = ratelimit::acquire(limiter, "k", 1, 120ms, jitter, wait, clock);
    EXPECT_TRUE(d.allowed);
    ASSERT_FALSE(waits.empty());
    EXPECT_GE(waits.back(), 100ms);
    EXPECT_LE(waits.back(), 120ms) << "jitter passed max_wait";
    EXPECT_LE(clock.now() - start, 120ms);
  }
  std::set<std::chrono::nanoseconds> distinct(waits.begin(), waits.end());
  EXPECT_GT(distinct.size(), 10U) << "the waits were not spread";
  // max_wait exactly the retry_after: no room for jitter.
  clock.set(ManualClock::time_point(100s));
  ASSERT_TRUE(limiter.allow("k"));
  EXPECT_TRUE(ratelimit::acquire(limiter, "k", 1, 100ms, jitter, wait, clock).allowed);
  EXPECT_EQ(waits.back(), 100ms);
}

TEST(ShapingJitter, FairAcquirerAddsJitterWithinMaxWait) {
  ManualClock clock;
  MemoryLimiter<FixedWindow, ManualClock> limiter({.limit = 1, .window = 100ms}, {}, clock);
  ratelimit::FairAcquirer<MemoryLimiter<FixedWindow, ManualClock>, ManualClock> fair(limiter, clock);
  Jitter jitter(50ms, 3);
  ASSERT_TRUE(limiter.allow("k"));
  std::chrono::nanoseconds waited{0};
  const Decision d = fair.acquire("k", 1, 1s, jitter, [&](std::chrono::nanoseconds w) {
    waited = w;
    clock.advance(w);
  });
  EXPECT_TRUE(d.allowed);
  EXPECT_GE(waited, 100ms);
  EXPECT_LE(waited, 150ms);
}

}  // namespace
