// acquire (client-side throttling): waits exactly retry_after with an injected waiter and clock, gives up at once
// when the next wait would pass max_wait, returns at once on `never`; max_wait 0 means one try.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <ratelimit/ratelimit.hpp>

namespace {

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;

/// A waiter that moves the limiter's ManualClock instead of sleeping, and records each delay.
struct ClockWaiter {
  ManualClock clock;
  std::vector<std::chrono::nanoseconds>* delays;
  void operator()(std::chrono::nanoseconds delay) {
    delays->push_back(delay);
    clock.advance(delay);
  }
};

class Acquire : public ::testing::Test {
 protected:
  ManualClock clock;
  // T = 100 ms, burst 2.
  MemoryLimiter<ratelimit::Gcra, ManualClock> limiter{
      ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 2}, {}, clock};
  std::vector<std::chrono::nanoseconds> delays;
  ClockWaiter waiter{clock, &delays};
};

TEST_F(Acquire, AdmittedAtOnceWithoutWaiting) {
  const Decision d = ratelimit::acquire(limiter, "k", 2, 1s, waiter, clock);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_TRUE(delays.empty());
  EXPECT_EQ(clock.now().time_since_epoch(), 0ns);
}

TEST_F(Acquire, WaitsExactlyRetryAfter) {
  ASSERT_TRUE(limiter.allow("k", 2));
  clock.advance(30ms);  // next token at 100 ms: retry_after 70 ms
  const Decision d = ratelimit::acquire(limiter, "k", 1, 1s, waiter, clock);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(delays, (std::vector<std::chrono::nanoseconds>{70ms}));
  EXPECT_EQ(clock.now().time_since_epoch(), 100ms);
  // Cost 2 from empty at 100 ms: TAT 300 ms, needs 200 ms.
  const Decision d2 = ratelimit::acquire(limiter, "k", 2, 200ms, waiter, clock);
  EXPECT_TRUE(d2.allowed);
  EXPECT_EQ(delays.back(), 200ms);
  EXPECT_EQ(clock.now().time_since_epoch(), 300ms);
}

/// The limiter without `reserve`: acquire checks and retries, as it does for window policies.
struct RetryingOnly {
  MemoryLimiter<ratelimit::Gcra, ManualClock>& inner;
  Decision allow(std::string_view key, std::int64_t cost = 1) { return inner.allow(key, cost); }
  Decision peek(std::string_view key) { return inner.peek(key); }
  void reset(std::string_view key) { inner.reset(key); }
};

// A limiter that cannot book (ratelimit::ReservingLimiter) is checked again after each wait. A reserving one keeps
// the slot it booked (ShapingAcquire.ABookedSlotCannotBeTakenByAnotherCaller).
TEST_F(Acquire, WaitsAgainWhenSomeoneElseTookTheQuota) {
  ASSERT_TRUE(limiter.allow("k", 2));
  RetryingOnly retrying{limiter};
  int stolen = 0;
  auto thief = [&](std::chrono::nanoseconds delay) {
    delays.push_back(delay);
    clock.advance(delay);
    if (stolen++ < 2) {
      EXPECT_TRUE(limiter.allow("k"));  // another caller is faster, twice
    }
  };
  const Decision d = ratelimit::acquire(retrying, "k", 1, 250ms, thief, clock);
  // Waits 100 ms (stolen), 100 ms (stolen); the third wait (100 ms) would pass 250 ms in total.
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 100ms);
  EXPECT_EQ(delays, (std::vector<std::chrono::nanoseconds>{100ms, 100ms}));
  EXPECT_EQ(clock.now().time_since_epoch(), 200ms);
}

TEST_F(Acquire, GivesUpAtOnceWhenTheWaitWouldPassMaxWait) {
  ASSERT_TRUE(limiter.allow("k", 2));
  const Decision d = ratelimit::acquire(limiter, "k", 1, 99ms, waiter, clock);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 100ms);
  EXPECT_TRUE(delays.empty());
  EXPECT_EQ(clock.now().time_since_epoch(), 0ns);
  // Exactly enough: one wait of 100 ms.
  EXPECT_TRUE(ratelimit::acquire(limiter, "k", 1, 100ms, waiter, clock).allowed);
  EXPECT_EQ(delays, (std::vector<std::chrono::nanoseconds>{100ms}));
}

TEST_F(Acquire, ReturnsAtOnceWhenTheRequestCanNeverPass) {
  const Decision d = ratelimit::acquire(limiter, "k", 3, 1h, waiter, clock);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Decision::never);
  EXPECT_TRUE(delays.empty());
  EXPECT_EQ(limiter.peek("k").remaining, 2);  // nothing consumed
}

TEST_F(Acquire, MaxWaitZeroTriesOnce) {
  EXPECT_TRUE(ratelimit::acquire(limiter, "k", 2, 0ns, waiter).allowed);
  const Decision d = ratelimit::acquire(limiter, "k", 1, 0ns, waiter, clock);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 100ms);
  EXPECT_TRUE(delays.empty());
}

/// Denies every request without naming a wait, as a limiter answering a backend failure might.
struct DeniesWithoutWait {
  int calls = 0;
  Decision allow(std::string_view, std::int64_t = 1) {
    ++calls;
    return Decision{.allowed = false, .limit = 1, .remaining = 0};
  }
  Decision peek(std::string_view) { return allow({}); }
  void reset(std::string_view) {}
};

TEST_F(Acquire, ReturnsAtOnceOnADenialWithoutAWait) {
  DeniesWithoutWait denier;  // it spun forever before (found by a new-user review)
  const Decision d = ratelimit::acquire(denier, "k", 1, 1h, waiter, clock);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(denier.calls, 1);
  EXPECT_TRUE(delays.empty());
}

TEST_F(Acquire, DefaultSleepWaiterReallyWaits) {
  // The only real sleep in the suite, 1 ms: the default waiter must work with a real clock.
  MemoryLimiter<ratelimit::Gcra> real({.limit = 1000, .period = 1s, .burst = 1});
  ASSERT_TRUE(real.allow("k"));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(ratelimit::acquire(real, "k", 1, 1s).allowed);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 500us);
}

}  // namespace

namespace {

/// A limiter whose every check takes 1 ms of a ManualClock and denies with retry_after = 1 ms.
struct SlowDenyingLimiter {
  ManualClock clock;
  int checks = 0;
  Decision allow(std::string_view, std::int64_t = 1) {
    ++checks;
    clock.advance(1ms);
    return Decision{.allowed = false, .limit = 1, .retry_after = 1ms};
  }
  Decision peek(std::string_view) { return Decision{.allowed = false, .limit = 1}; }
  void reset(std::string_view) {}
};

// max_wait bounds the whole call: time spent in checks and oversleeping counts, not only the delays asked for.
TEST(AcquireDeadline, MaxWaitIsTheTotalTimeIncludingChecksAndOversleep) {
  SlowDenyingLimiter limiter;
  const ManualClock clock = limiter.clock;
  const auto start = clock.now();
  // Each sleep overshoots by 0.5 ms, as real sleeps do.
  auto waiter = [&](std::chrono::nanoseconds delay) { limiter.clock.advance(delay + 500us); };
  const Decision d = ratelimit::acquire(limiter, "k", 1, 50ms, waiter, clock);
  EXPECT_FALSE(d.allowed);
  // The deadline, plus at most one oversleep and the one check after it.
  EXPECT_LE(clock.now() - start, 50ms + 500us + 1ms)
      << "acquire took " << (clock.now() - start).count() << " ns after " << limiter.checks << " checks";
  EXPECT_GE(clock.now() - start, 48ms) << "acquire gave up early";
}

TEST(AcquireDeadline, AdmitsWhenTheWaitFitsTheRestOfTheDeadline) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> limiter({.limit = 1, .window = 10ms}, {}, clock);
  ASSERT_TRUE(limiter.allow("k"));
  auto waiter = [&](std::chrono::nanoseconds delay) { clock.advance(delay); };
  EXPECT_TRUE(ratelimit::acquire(limiter, "k", 1, 10ms, waiter, clock).allowed);
  clock.advance(1ms);  // 9 ms to the next window
  EXPECT_FALSE(ratelimit::acquire(limiter, "k", 1, 8ms, waiter, clock).allowed);
}

// A negative max_wait is a caller's mistake, as for ConcurrencyLimiter::acquire: it throws naming the
// field instead of returning a denial that looks like a full limiter, and checks nothing.
TEST(AcquireDeadline, ANegativeMaxWaitThrowsNamingIt) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> limiter({.limit = 1, .window = 10ms}, {}, clock);
  auto waiter = [&](std::chrono::nanoseconds delay) { clock.advance(delay); };
  try {
    (void)ratelimit::acquire(limiter, "k", 1, -1ms, waiter, clock);
    FAIL() << "a negative max_wait was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("max_wait", 0), 0U) << e.what();
  }
  EXPECT_TRUE(limiter.allow("k").allowed);  // nothing was consumed
}

}  // namespace
