// The circuit breaker's state machine (include/ratelimit/redis/README.md "Circuit breaker"), on a ManualClock: no
// Redis, no sleeps.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis/engine/circuit_breaker.hpp>

using namespace std::chrono_literals;
using ratelimit::ManualClock;
using ratelimit::redis::BreakerState;
using ratelimit::redis::CircuitBreakerOptions;
using Breaker = ratelimit::redis::engine::CircuitBreaker<ManualClock>;

namespace {

CircuitBreakerOptions exact(int threshold = 3) {
  CircuitBreakerOptions o;
  o.failure_threshold = threshold;
  o.open_min = 100ms;
  o.open_max = 400ms;
  o.jitter_percent = 0;
  return o;
}

void fail(Breaker& b, int n) {
  for (int i = 0; i < n; ++i) {
    auto t = b.admit();
    ASSERT_TRUE(t);
    t.failed();
  }
}

}  // namespace

TEST(BreakerStateMachine, OpensAfterConsecutiveFailuresAndRefusesUntilTheOpenPeriodEnds) {
  ManualClock clock;
  Breaker b(exact(), clock);
  fail(b, 2);
  EXPECT_EQ(b.state(), BreakerState::closed);
  {
    auto ok = b.admit();  // a success in between: the count starts again
    ok.succeeded();
  }
  fail(b, 2);
  EXPECT_EQ(b.state(), BreakerState::closed);
  fail(b, 1);
  EXPECT_EQ(b.state(), BreakerState::open);
  EXPECT_EQ(b.counters().opens, 1u);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(b.admit());
  EXPECT_EQ(b.counters().refused, 5u);
  clock.advance(99ms);
  EXPECT_FALSE(b.admit());
  clock.advance(1ms);
  auto probe = b.admit();
  ASSERT_TRUE(probe);
  EXPECT_TRUE(probe.probe());
  EXPECT_EQ(b.state(), BreakerState::half_open);
  EXPECT_FALSE(b.admit());  // one probe at a time
  probe.succeeded();
  EXPECT_EQ(b.state(), BreakerState::closed);
  EXPECT_TRUE(b.admit());
  EXPECT_EQ(b.counters().probes, 1u);
  EXPECT_EQ(b.counters().refused, 7u);
}

TEST(BreakerStateMachine, FailedProbesDoubleTheOpenPeriodUpToTheCapAndSuccessResetsIt) {
  ManualClock clock;
  Breaker b(exact(), clock);
  fail(b, 3);
  for (const auto period : {200ms, 400ms, 400ms}) {
    clock.advance(b.open_period());  // the current period ends: the next call probes
    auto probe = b.admit();
    ASSERT_TRUE(probe.probe());
    probe.failed();
    EXPECT_EQ(b.state(), BreakerState::open);
    EXPECT_EQ(b.open_period(), period);
    clock.advance(period - 1ms);
    EXPECT_FALSE(b.admit());
    clock.advance(-(period - 1ms));  // back to the failed probe's time
  }
  EXPECT_EQ(b.counters().opens, 1u);  // re-opening after a failed probe is not a new opening
  clock.advance(1h);
  auto probe = b.admit();
  probe.succeeded();
  EXPECT_EQ(b.open_period(), 100ms);
  fail(b, 3);
  EXPECT_EQ(b.state(), BreakerState::open);
  EXPECT_EQ(b.counters().opens, 2u);
  clock.advance(99ms);
  EXPECT_FALSE(b.admit());
}

TEST(BreakerStateMachine, AProbeWithoutVerdictLetsTheNextCallProbe) {
  ManualClock clock;
  Breaker b(exact(1), clock);
  fail(b, 1);
  clock.advance(100ms);
  {
    auto lapsed = b.admit();
    ASSERT_TRUE(lapsed.probe());
  }  // e.g. no pooled connection came free
  EXPECT_EQ(b.state(), BreakerState::open);
  auto probe = b.admit();
  ASSERT_TRUE(probe.probe());
  probe.succeeded();
  EXPECT_EQ(b.state(), BreakerState::closed);
}

TEST(BreakerStateMachine, LateFailuresOfCallsSentBeforeItOpenedDoNotExtendIt) {
  ManualClock clock;
  Breaker b(exact(2), clock);
  auto early1 = b.admit();
  auto early2 = b.admit();
  auto early3 = b.admit();
  early1.failed();
  early2.failed();
  EXPECT_EQ(b.state(), BreakerState::open);
  clock.advance(100ms);
  early3.failed();  // a straggler: the open period stays as it was
  auto probe = b.admit();
  EXPECT_TRUE(probe.probe());
}

TEST(BreakerStateMachine, ThresholdZeroNeverOpens) {
  ManualClock clock;
  Breaker b(exact(0), clock);
  fail(b, 100);
  EXPECT_EQ(b.state(), BreakerState::closed);
  EXPECT_EQ(b.counters().opens, 0u);
}

TEST(BreakerStateMachine, JitterShortensTheOpenPeriodWithinItsPercentage) {
  ManualClock clock;
  CircuitBreakerOptions o = exact(1);
  o.open_min = 1000ms;
  o.open_max = 1000ms;
  o.jitter_percent = 50;
  Breaker b(o, clock);
  bool varied = false;
  std::chrono::nanoseconds first{-1};
  for (int round = 0; round < 20; ++round) {
    fail(b, 1);
    // Find when it lets a probe through: never before 500 ms, always by 1000 ms.
    std::chrono::nanoseconds waited{0};
    for (;;) {
      auto t = b.admit();
      if (t) {
        t.failed();  // re-opens at once for the next round... after we measured
        break;
      }
      clock.advance(10ms);
      waited += 10ms;
      ASSERT_LE(waited, 1000ms);
    }
    EXPECT_GE(waited, 490ms);
    if (first.count() < 0) first = waited;
    if (waited != first) varied = true;
    // The failed probe opened it again: let that period pass and close it with a success.
    clock.advance(1000ms);
    auto probe = b.admit();
    ASSERT_TRUE(probe.probe());
    probe.succeeded();
  }
  EXPECT_TRUE(varied);
}

TEST(BreakerStateMachine, BadOptionsNameTheField) {
  auto message = [](CircuitBreakerOptions o) -> std::string {
    try {
      Breaker b(o);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no std::invalid_argument";
  };
  auto with = [](auto set) {
    CircuitBreakerOptions o;
    set(o);
    return o;
  };
  auto names = [&](auto set, const std::string& field) {
    EXPECT_EQ(message(with(set)).rfind("ConnectionOptions.breaker." + field + ":", 0), 0u) << field;
  };
  names([](auto& o) { o.failure_threshold = -1; }, "failure_threshold");
  names([](auto& o) { o.failure_threshold = 1001; }, "failure_threshold");
  names([](auto& o) { o.open_min = 0ms; }, "open_min");
  names([](auto& o) { o.open_max = 50ms; }, "open_max");
  names([](auto& o) { o.open_max = 25h; }, "open_max");
  names([](auto& o) { o.jitter_percent = 101; }, "jitter_percent");
  EXPECT_EQ(message(CircuitBreakerOptions{}), "no std::invalid_argument");
}

// Many threads racing admit / verdicts: exactly one probe per open period, counters consistent.
TEST(BreakerStateMachine, OneProbeAtATimeUnderThreads) {
  ManualClock clock;
  Breaker b(exact(1), clock);
  fail(b, 1);
  clock.advance(100ms);
  std::atomic<int> probes{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        auto ticket = b.admit();
        if (ticket.probe()) ++probes;  // held, never settled here: stays half-open until destroyed
        if (ticket.probe()) ticket.failed();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(probes.load(), 1);  // the failed probe re-opened it and the clock did not move
  EXPECT_EQ(b.counters().probes, 1u);
  EXPECT_EQ(b.counters().refused, 8u * 1000u - 1u);
}
