// The circuit breaker against a real redis-server (include/ratelimit/redis/README.md "Circuit breaker"): a stalled
// server (SIGSTOP) or paused clients (CLIENT PAUSE) open it after a few timeouts; while open, checks are answered by
// the failure policy at once, without I/O; once the server is back, checks are on Redis again within 1 s. Each test has
// its own server (a stopped shared one would stall the other tests) and takes < 3 s.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using ratelimit::CheckResult;
using ratelimit::Outcome;
using ratelimit::redis::RedisLimiter;
using ratelimit_test::RedisServer;

class BreakerServer : public ratelimit_test::OwnRedisServerTest {
 protected:
  /// Default breaker (3 failures, 100 ms .. 500 ms), command timeout 100 ms, fail_open, own prefix.
  [[nodiscard]] ratelimit::redis::RedisOptions options() const {
    ratelimit::redis::RedisOptions o = server_->options();
    o.key_prefix = ratelimit_test::unique_prefix();
    o.command_timeout = 100ms;
    o.connect_timeout = 100ms;
    o.pool_size = 2;
    return o;
  }

  /// Calls `check` until the stall has opened the breaker (at most 2 s); returns false if it never did.
  template <class L>
  static bool until_open(L& l) {
    const auto deadline = Steady::now() + 2s;
    while (Steady::now() < deadline) {
      (void)l.check("k");
      if (l.stats().breaker_opens > 0) return true;
    }
    return false;
  }

  /// Checks for `span`: how many calls, and how many took longer than `slow` (probes waiting for their
  /// 100 ms command timeout; well above scheduling noise on a loaded machine).
  struct Window {
    int calls = 0;
    int slow = 0;
    int decided = 0;
  };
  template <class L>
  static Window measure(L& l, std::chrono::milliseconds span, std::chrono::milliseconds slow = 60ms) {
    Window w;
    const auto end = Steady::now() + span;
    while (Steady::now() < end) {
      const auto t0 = Steady::now();
      const CheckResult r = l.check("k");
      if (Steady::now() - t0 > slow) ++w.slow;
      if (r.outcome == Outcome::decided) ++w.decided;
      ++w.calls;
    }
    return w;
  }

  /// Time from now until a check is decided by Redis again (2 s at most).
  template <class L>
  static std::chrono::milliseconds back_on_redis(L& l) {
    const auto t0 = Steady::now();
    while (Steady::now() - t0 < 2s) {
      if (l.check("k").outcome == Outcome::decided) break;
      std::this_thread::sleep_for(1ms);
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - t0);
  }
};

TEST_F(BreakerServer, SigstopOpensItChecksAnswerAtOnceAndSigcontClosesItWithinOneSecond) {
  RedisLimiter l(ratelimit::Gcra{.limit = 1000000, .period = 1s, .burst = 1000}, options());
  ASSERT_EQ(l.check("k").outcome, Outcome::decided);
  ASSERT_EQ(::kill(server_->pid(), SIGSTOP), 0);
  ASSERT_TRUE(until_open(l)) << "the breaker never opened";
  const auto before = l.stats();
  const Window w = measure(l, 700ms);
  const auto during = l.stats();
  // Open: thousands of checks in 0.7 s, answered by fail_open; only the probes (one per open period,
  // 100..500 ms) waited for their command timeout.
  EXPECT_GT(w.calls, 1000) << "checks were not answered at once";
  EXPECT_EQ(w.decided, 0);
  EXPECT_LE(w.slow, 6) << "more slow calls than probes";
  EXPECT_GE(during.short_circuited - before.short_circuited, static_cast<std::uint64_t>(w.calls - w.slow));
  EXPECT_GE(during.breaker_probes, 1u);
  EXPECT_EQ(during.breaker_opens, 1u);
  // The first connection, one reconnect per failure until it opened, then one per probe.
  EXPECT_LE(during.connects, 3u + during.breaker_probes) << "reconnect storm while stalled";
  ASSERT_EQ(::kill(server_->pid(), SIGCONT), 0);
  const auto recovery = back_on_redis(l);
  EXPECT_LT(recovery, 1000ms);
  EXPECT_EQ(l.check("k").outcome, Outcome::decided);
  std::printf("SIGSTOP: %d checks in 700 ms while open (%d slow), back on Redis %lld ms after SIGCONT\n", w.calls,
              w.slow, static_cast<long long>(recovery.count()));
}

TEST_F(BreakerServer, ClientPauseOpensItAndItClosesWithinOneSecondOfThePauseEnd) {
  auto o = options();
  o.on_error = ratelimit::FailurePolicy::fail_closed;
  RedisLimiter l(ratelimit::FixedWindow{.limit = 1000000, .window = 1h}, o);
  ASSERT_TRUE(l.check("k").decision.allowed);
  auto admin = server_->admin();
  const auto paused_at = Steady::now();
  ASSERT_EQ(ratelimit::redis::engine::text(*admin.command({"CLIENT", "PAUSE", "900", "ALL"})), "OK");
  ASSERT_TRUE(until_open(l));
  const Window w = measure(l, 400ms);
  EXPECT_GT(w.calls, 500);
  EXPECT_EQ(w.decided, 0);
  EXPECT_LE(w.slow, 4);
  const CheckResult denied = l.check("k");  // fail_closed, said so
  EXPECT_EQ(denied.outcome, Outcome::failure_policy);
  EXPECT_FALSE(denied.decision.allowed);
  std::this_thread::sleep_until(paused_at + 900ms);
  const auto recovery = back_on_redis(l);
  EXPECT_LT(recovery, 1000ms);
  EXPECT_TRUE(l.check("k").decision.allowed);
  std::printf("CLIENT PAUSE: %d checks in 400 ms while open, back on Redis %lld ms after the pause\n", w.calls,
              static_cast<long long>(recovery.count()));
}

// Under raise, a short-circuited check throws BackendError with cause circuit_open.
TEST_F(BreakerServer, RaiseThrowsCircuitOpen) {
  auto o = options();
  o.on_error = ratelimit::FailurePolicy::raise;
  RedisLimiter l(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 10}, o);
  ASSERT_NO_THROW(l.allow("k"));
  ASSERT_EQ(::kill(server_->pid(), SIGSTOP), 0);
  for (int i = 0; i < 3; ++i) EXPECT_THROW(l.allow("k"), ratelimit::BackendError);
  try {
    l.allow("k");
    ADD_FAILURE() << "no BackendError";
  } catch (const ratelimit::BackendError& e) {
    EXPECT_EQ(e.cause(), ratelimit::BackendErrorCause::circuit_open) << e.what();
  }
  EXPECT_EQ(l.stats().short_circuited, 1u);
  ASSERT_EQ(::kill(server_->pid(), SIGCONT), 0);
}

// The breaker is the server's, not the limiter's: a stalled server does not open the breaker of another.
TEST_F(BreakerServer, OneStalledServerDoesNotOpenAnotherServersBreaker) {
  RedisServer healthy(ratelimit_test::redis_server_binary());
  auto bad_options = options();
  auto good_options = options();
  good_options.port = healthy.port();
  RedisLimiter bad(ratelimit::Gcra{.limit = 1000, .period = 1s, .burst = 1000}, bad_options);
  RedisLimiter good(ratelimit::Gcra{.limit = 1000, .period = 1s, .burst = 1000}, good_options);
  ASSERT_EQ(::kill(server_->pid(), SIGSTOP), 0);
  ASSERT_TRUE(until_open(bad));
  for (int i = 0; i < 50; ++i) EXPECT_EQ(good.check("k").outcome, Outcome::decided);
  EXPECT_EQ(good.stats().breaker_opens, 0u);
  ASSERT_EQ(::kill(server_->pid(), SIGCONT), 0);
}

}  // namespace
