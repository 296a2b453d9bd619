// The in-memory fallback during outages (include/ratelimit/redis/README.md "Fallback during outages"): each limiter's
// share of the quota while Redis fails, probes with backoff instead of a Redis call per request, back on Redis within 1
// s of its recovery, counted in stats, and the failure hook told.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::CheckResult;
using ratelimit::FailurePolicy;
using ratelimit::ManualClock;
using ratelimit::Outcome;
using ratelimit::redis::LeasedLimiter;
using ratelimit::redis::LeaseOptions;
using ratelimit::redis::RedisLimiter;
using ratelimit::redis::RedisOptions;

RedisOptions fallback_options(int port, std::int64_t instances) {
  RedisOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.on_error = FailurePolicy::fallback;
  o.fallback.instances = instances;
  o.connect_timeout = 200ms;
  o.command_timeout = 200ms;
  // include/ratelimit/redis/README.md "Fallback during outages": keep it <= breaker.open_max
  o.reconnect_backoff_max = 200ms;
  o.key_prefix = ratelimit_test::unique_prefix();
  return o;
}

std::string fallback_invalid_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no exception";
}

TEST(FallbackOptions, InvalidValuesNameTheField) {
  const ratelimit::Gcra policy{.limit = 10, .period = 1s, .burst = 5};
  RedisOptions o = fallback_options(1, 0);
  EXPECT_NE(fallback_invalid_message([&] {
              RedisLimiter<ratelimit::Gcra> l(policy, o);
            }).find("LimiterOptions.fallback.instances"),
            std::string::npos);
  EXPECT_NE(fallback_invalid_message([&] {
              LeasedLimiter<ratelimit::Gcra> l(policy, o);
            }).find("LimiterOptions.fallback.instances"),
            std::string::npos);
  o.fallback.instances = 2;
  o.fallback.probe_max = 10ms;  // below probe_min
  EXPECT_NE(fallback_invalid_message([&] {
              RedisLimiter<ratelimit::Gcra> l(policy, o);
            }).find("LimiterOptions.fallback.probe_max"),
            std::string::npos);
  o.fallback.probe_max = 250ms;
  o.fallback.max_keys = 0;
  EXPECT_NE(fallback_invalid_message([&] {
              RedisLimiter<ratelimit::Gcra> l(policy, o);
            }).find("LimiterOptions.fallback.max_keys"),
            std::string::npos);
  // Without on_error = fallback the instance count is not needed.
  o.fallback = {};
  o.on_error = FailurePolicy::fail_open;
  EXPECT_NO_THROW(RedisLimiter<ratelimit::Gcra>(policy, o));
}

// Redis down (nothing listens): a limiter of 4 admits its share (rate / 4, burst / 4) over 2 s of manual time,
// Redis is probed with backoff (a few calls, not one per check), sync and async checks alike, the hook hears
// every failure, and stats say so.
TEST(FallbackManualClock, OutageAdmitsTheShareAndProbesWithBackoff) {
  RATELIMIT_REQUIRE_REDIS();  // for free_port's environment only
  ManualClock clock;
  RedisOptions o = fallback_options(ratelimit_test::free_port(), 4);
  o.time_source = ratelimit::redis::TimeSource::client;
  std::atomic<int> hooked{0};
  std::atomic<int> hooked_io{0};
  o.on_backend_failure = [&](const ratelimit::BackendError& e) {
    ++hooked;
    if (e.cause() == ratelimit::BackendErrorCause::io) ++hooked_io;
  };
  // 100/s, burst 20; the share: 25/s (T = 40 ms), burst 5.
  RedisLimiter<ratelimit::Gcra, ManualClock> limiter(ratelimit::Gcra{.limit = 100, .period = 1s, .burst = 20}, o,
                                                     clock);
  int admitted = 0;
  int checks = 0;
  for (int i = 0; i < 200; ++i) {  // one check every 10 ms for 2 s
    const CheckResult r = limiter.check("k");
    EXPECT_EQ(r.outcome, Outcome::failure_policy);
    admitted += r.decision.allowed ? 1 : 0;
    ++checks;
    clock.advance(10ms);
  }
  std::cout << "admitted " << admitted << " of " << checks << "; Redis calls " << limiter.stats().failures << "\n";
  EXPECT_LE(admitted, 5 + 2000 / 40);  // the share's bound: burst + d / T
  EXPECT_GE(admitted, 2000 / 40);
  // Async: answered by the fallback too, on the I/O thread.
  // Shared with the completion: it may run after a failed wait returned (the limiter's end completes it).
  auto done = std::make_shared<std::promise<CheckResult>>();
  limiter.check_async("k2", 1, [done](std::exception_ptr e, CheckResult r) {
    EXPECT_FALSE(e);
    done->set_value(r);
  });
  auto f = done->get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  const CheckResult async = f.get();
  EXPECT_EQ(async.outcome, Outcome::failure_policy);
  EXPECT_TRUE(async.decision.allowed);
  EXPECT_EQ(async.decision.limit, 5);  // the share's burst

  const auto s = limiter.stats();
  EXPECT_TRUE(s.fallback_active);
  EXPECT_EQ(s.fallback_checks, static_cast<std::uint64_t>(checks + 1));
  EXPECT_EQ(s.fallback_activations, 1u);
  EXPECT_EQ(s.calls, static_cast<std::uint64_t>(checks + 1));
  // Probes: the first failure, then one per probe period (50 ms doubling to 250 ms, less jitter) over 2 s.
  EXPECT_GE(s.failures, 5u);
  EXPECT_LE(s.failures, 20u);
  EXPECT_EQ(hooked.load(), static_cast<int>(s.failures));
  EXPECT_GE(hooked_io.load(), 1);
}

// Joint (layered) checks: Redis down, each layer with a fallback: all or nothing over the layers' shares in
// memory; a denial by one layer consumes nothing in the other.
TEST(FallbackLayered, JointCheckIsAllOrNothingInMemory) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  RedisOptions o = fallback_options(ratelimit_test::free_port(), 2);
  o.time_source = ratelimit::redis::TimeSource::client;
  auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(o.connection());
  RedisLimiter<ratelimit::FixedWindow, ManualClock> a(ratelimit::FixedWindow{10, 1min}, pool, o.limiter(), clock);
  RedisLimiter<ratelimit::FixedWindow, ManualClock> b(ratelimit::FixedWindow{4, 1min}, pool, o.limiter(), clock);
  ratelimit::LimiterLayer<decltype(a)> la(a, "a");
  ratelimit::LimiterLayer<decltype(b)> lb(b, "b");
  // Shares: a 5, b 2 per minute.
  EXPECT_TRUE(ratelimit::check_layers({{&la, "k"}, {&lb, "k"}}));
  EXPECT_TRUE(ratelimit::check_layers({{&la, "k"}, {&lb, "k"}}));
  const auto denied = ratelimit::check_layers({{&la, "k"}, {&lb, "k"}});
  EXPECT_FALSE(denied);
  EXPECT_EQ(denied.layers[0].decision.remaining, 3);  // a: 2 used, the third not consumed
  EXPECT_EQ(a.check("k", 3).decision.allowed, true);  // so 3 are left
  EXPECT_GE(a.stats().fallback_checks, 3u);
  EXPECT_TRUE(b.stats().fallback_active);
}

// An error reply (here WRONGTYPE: the key holds a list) is answered by the fallback, counted once, and opens
// nothing: the server is alive, so the next key goes to Redis. A hook that throws changes nothing.
TEST(FallbackServer, ErrorReplyIsAnsweredByTheFallbackWithoutOpeningTheGate) {
  RATELIMIT_REQUIRE_REDIS();
  RedisOptions o = fallback_options(ratelimit_test::shared_redis()->port(), 2);
  int hooked = 0;
  o.on_backend_failure = [&](const ratelimit::BackendError& e) {
    ++hooked;
    EXPECT_EQ(e.cause(), ratelimit::BackendErrorCause::reply);
    throw std::runtime_error("a hook that throws");
  };
  RedisLimiter<ratelimit::Gcra> limiter(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 4}, o);
  auto admin = ratelimit_test::shared_redis()->admin();
  (void)admin.command({"RPUSH", limiter.redis_key("bad"), "x"});
  const CheckResult r = limiter.check("bad");
  EXPECT_EQ(r.outcome, Outcome::failure_policy);
  EXPECT_TRUE(r.decision.allowed);
  EXPECT_EQ(r.decision.limit, 2);  // the share's burst
  EXPECT_EQ(hooked, 1);
  const auto s = limiter.stats();
  EXPECT_FALSE(s.fallback_active);
  EXPECT_EQ(s.fallback_checks, 1u);
  EXPECT_EQ(s.failures, 1u);
  EXPECT_EQ(s.reply_errors, 1u);
  EXPECT_EQ(limiter.check("good").outcome, Outcome::decided);
  EXPECT_EQ(limiter.stats().calls, 2u);
}

// A real redis-server killed (SIGKILL) and restarted on the same port: during the outage a RedisLimiter and a
// LeasedLimiter each admit at most their share (+ burst, + the lease held); within 1 s of the restart checks
// are decided by Redis again; the hook fired.
TEST(FallbackServer, KillAndRestartStaysLimitedAndReturnsWithinOneSecond) {
  RATELIMIT_REQUIRE_REDIS();
  ratelimit_test::RedisServer server(ratelimit_test::redis_server_binary());
  RedisOptions o = fallback_options(server.port(), 2);
  std::atomic<int> hooked{0};
  o.on_backend_failure = [&](const ratelimit::BackendError&) { ++hooked; };
  // 40/s, burst 10; the share: 20/s (T = 50 ms), burst 5.
  const ratelimit::Gcra policy{.limit = 40, .period = 1s, .burst = 10};
  RedisLimiter<ratelimit::Gcra> redis(policy, o);
  LeaseOptions lease;
  lease.lifetime = 50ms;  // tau - L = 200 ms: leasable
  lease.max_slice = 3;
  LeasedLimiter<ratelimit::Gcra> leased(policy, o, lease);
  ASSERT_EQ(redis.check("k").outcome, Outcome::decided);
  ASSERT_EQ(leased.check("k").outcome, Outcome::decided);

  server.kill_hard();
  const auto outage = 600ms;
  int redis_admitted = 0;
  int leased_admitted = 0;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < outage) {
    redis_admitted += redis.allow("hot") ? 1 : 0;
    leased_admitted += leased.allow("hot") ? 1 : 0;
    std::this_thread::sleep_for(2ms);
  }
  const std::int64_t bound = 5 + 600 / 50 + 1;  // burst + d / T (+1: the interval's ends)
  EXPECT_LE(redis_admitted, bound);
  EXPECT_GE(redis_admitted, 5);
  EXPECT_LE(leased_admitted, bound + 3);  // + the slice a lease may still hold
  EXPECT_GE(leased_admitted, 5);
  EXPECT_TRUE(redis.stats().fallback_active);
  EXPECT_TRUE(leased.stats().fallback_active);
  EXPECT_GE(hooked.load(), 2);
  EXPECT_LT(redis.stats().failures, 30u);  // probes, not one Redis call per check

  server.start();  // same port, empty (no persistence)
  const auto back = std::chrono::steady_clock::now();
  bool redis_back = false;
  bool leased_back = false;
  while (std::chrono::steady_clock::now() - back < 3s && !(redis_back && leased_back)) {
    if (!redis_back && redis.check("probe").outcome == Outcome::decided) {
      redis_back = true;
      const auto took = std::chrono::steady_clock::now() - back;
      std::cout << "RedisLimiter back on Redis after "
                << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                << " ms; admitted during the outage " << redis_admitted << " of a share bound of " << bound << "\n";
      EXPECT_LT(took, 1s) << "RedisLimiter";
    }
    if (!leased_back && leased.check("probe").outcome == Outcome::decided) {
      leased_back = true;
      const auto took = std::chrono::steady_clock::now() - back;
      std::cout << "LeasedLimiter back on Redis after "
                << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                << " ms; admitted during the outage " << leased_admitted << "\n";
      EXPECT_LT(took, 1s) << "LeasedLimiter";
    }
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(redis_back);
  EXPECT_TRUE(leased_back);
  EXPECT_FALSE(redis.stats().fallback_active);
  EXPECT_FALSE(leased.stats().fallback_active);
  // Once back, every check is Redis's again, async ones too.
  EXPECT_EQ(redis.check("after").outcome, Outcome::decided);
  // Shared with the completion: it may run after a failed wait returned (the limiter's end completes it).
  auto done = std::make_shared<std::promise<CheckResult>>();
  redis.check_async("after", 1, [done](std::exception_ptr, CheckResult r) { done->set_value(r); });
  auto f = done->get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(f.get().outcome, Outcome::decided);
}

}  // namespace
