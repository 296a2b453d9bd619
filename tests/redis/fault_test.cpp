// Failure handling (include/ratelimit/README.md "Redis contract") under each on_error: SCRIPT FLUSH between calls,
// Redis restarted mid-run, a command slowed past the timeout (CLIENT PAUSE), Redis down at start, reconnect backoff.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::BackendError;
using ratelimit::BackendErrorCause;
using ratelimit::Decision;
using ratelimit::ManualClock;
using ratelimit::FailurePolicy;
using ratelimit::redis::RedisLimiter;

// GCRA 10/s, burst 3 (T = 100 ms), at client time 0.
const ratelimit::Gcra kPolicy{.limit = 10, .period = 1s, .burst = 3};
Decision D(bool allowed, std::int64_t remaining, std::chrono::nanoseconds retry, std::chrono::nanoseconds reset) {
  return Decision{allowed, 3, remaining, retry, reset};
}

class Fault : public testing::TestWithParam<FailurePolicy> {
 protected:
  void SetUp() override {
    RATELIMIT_REQUIRE_REDIS();
    server_ = std::make_unique<ratelimit_test::RedisServer>(ratelimit_test::redis_server_binary());
  }

  ratelimit::redis::RedisOptions options() const {
    auto o = ratelimit_test::client_options(*server_, GetParam());
    o.pool_size = 1;
    o.reconnect_backoff_min = 0ms;
    o.reconnect_backoff_max = 0ms;
    o.command_timeout = 300ms;
    o.failure_retry_after = 2s;
    return o;
  }

  // The call fails: raise throws `cause`; fail_open gives a fresh key's decision; fail_closed denies.
  template <class Call>
  void expect_failure(Call&& call, BackendErrorCause cause) {
    switch (GetParam()) {
      case FailurePolicy::raise:
        try {
          call();
          ADD_FAILURE() << "no BackendError";
        } catch (const BackendError& e) {
          EXPECT_EQ(e.cause(), cause) << e.what();
        }
        break;
      case FailurePolicy::fail_open:
        EXPECT_EQ(call(), D(true, 2, 0s, 100ms));
        break;
      case FailurePolicy::fail_closed:
        EXPECT_EQ(call(), D(false, 0, 2s, 2s));
        break;
      case FailurePolicy::fallback:  // not a parameter here (fallback_test.cpp)
        break;
    }
  }

  std::unique_ptr<ratelimit_test::RedisServer> server_;
  ManualClock clock_;
};

TEST_P(Fault, ScriptFlushBetweenCallsIsInvisible) {
  RedisLimiter l(kPolicy, options(), clock_);
  auto admin = server_->admin();
  EXPECT_EQ(l.allow("k"), D(true, 2, 0s, 100ms));  // a fresh server: one NOSCRIPT, answered by EVAL
  EXPECT_EQ(l.stats().script_reloads, 1u);
  admin.command({"SCRIPT", "FLUSH"});
  EXPECT_EQ(l.allow("k"), D(true, 1, 0s, 200ms));
  EXPECT_EQ(l.stats().script_reloads, 2u);
  admin.command({"SCRIPT", "FLUSH"});
  const ratelimit::redis::Request batch[] = {{"k", 1}, {"k", 1}, {"other", 0}};
  const auto d = l.allow_many(batch);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0], D(true, 0, 0s, 300ms));
  EXPECT_EQ(d[1], D(false, 0, 100ms, 300ms));
  EXPECT_EQ(d[2], D(true, 3, 0s, 0s));
  // One per NOSCRIPT: "k" and "other" in the first round; the second "k" follows once they are answered.
  EXPECT_EQ(l.stats().script_reloads, 4u);
  // EVAL cached the script again: EVALSHA goes on without reloads.
  EXPECT_EQ(l.peek("k"), D(false, 0, 100ms, 300ms));
  EXPECT_EQ(l.stats().script_reloads, 4u);
  EXPECT_EQ(l.stats().failures, 0u);
}

TEST_P(Fault, RedisRestartedMidRun) {
  RedisLimiter l(kPolicy, options(), clock_);
  EXPECT_EQ(l.allow("k"), D(true, 2, 0s, 100ms));
  server_->restart();  // no persistence: the state is gone, and so is the script cache
  expect_failure([&] { return l.allow("k"); }, BackendErrorCause::io);  // the pooled connection was cut
  EXPECT_EQ(l.stats().failures, 1u);
  EXPECT_EQ(l.stats().io_errors, 1u);
  EXPECT_EQ(l.allow("k"), D(true, 2, 0s, 100ms));  // reconnected; NOSCRIPT answered by EVAL
  EXPECT_EQ(l.stats().script_reloads, 2u);          // the first use, and after the restart
  EXPECT_EQ(l.stats().connects, 2u);
  EXPECT_EQ(l.stats().failures, 1u);
}

TEST_P(Fault, CommandSlowedPastTheTimeout) {
  RedisLimiter l(kPolicy, options(), clock_);
  EXPECT_EQ(l.allow("k"), D(true, 2, 0s, 100ms));
  auto admin = server_->admin();
  admin.command({"CLIENT", "PAUSE", "10000", "WRITE"});  // scripts wait; the admin client does not
  const auto start = std::chrono::steady_clock::now();
  expect_failure([&] { return l.allow("k"); }, BackendErrorCause::timeout);
  const auto took = std::chrono::steady_clock::now() - start;
  admin.command({"CLIENT", "UNPAUSE"});
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 3s) << "the call must be bounded by command_timeout";
  EXPECT_EQ(l.stats().timeouts, 1u);
  // The timed-out connection is dropped; the next call gets a fresh one. The paused EVALSHA may or may
  // not have run when its client went away, so one or two requests are in use.
  const Decision next = l.allow("k");
  EXPECT_TRUE(next.allowed);
  EXPECT_LE(next.remaining, 1);
  EXPECT_GE(l.stats().dropped_connections, 1u);
  EXPECT_EQ(l.stats().failures, 1u);
}

TEST_P(Fault, RedisDownAtStart) {
  const int port = ratelimit_test::free_port();
  ratelimit_test::RedisServer late(ratelimit_test::redis_server_binary(), port, /*start_now=*/false);
  auto o = options();
  o.port = port;
  // Without the circuit breaker: its four failures below would open it, and the first call after the
  // start would then be answered by the failure policy (include/ratelimit/redis/README.md "Circuit breaker";
  // BreakerServer tests).
  o.breaker.failure_threshold = 0;
  RedisLimiter l(kPolicy, o, clock_);  // constructing connects nothing
  expect_failure([&] { return l.allow("k"); }, BackendErrorCause::io);
  expect_failure([&] { return l.peek("k").allowed ? l.allow("k") : l.allow("k"); }, BackendErrorCause::io);
  if (GetParam() == FailurePolicy::raise) {
    EXPECT_THROW(l.reset("k"), BackendError);
  } else {
    EXPECT_FALSE(l.reset("k"));
  }
  EXPECT_EQ(l.stats().connects, 0u);
  late.start();
  EXPECT_EQ(l.allow("k"), D(true, 2, 0s, 100ms));
  EXPECT_EQ(l.stats().connects, 1u);
}

TEST_P(Fault, ReconnectBacksOffWithoutConnecting) {
  const int port = ratelimit_test::free_port();
  ratelimit_test::RedisServer late(ratelimit_test::redis_server_binary(), port, /*start_now=*/false);
  auto o = options();
  o.port = port;
  o.reconnect_backoff_min = 1h;  // the second call falls inside the backoff
  o.reconnect_backoff_max = 1h;
  RedisLimiter l(kPolicy, o, clock_);
  expect_failure([&] { return l.allow("k"); }, BackendErrorCause::io);
  late.start();
  expect_failure([&] { return l.allow("k"); }, BackendErrorCause::io);  // not even tried
  EXPECT_EQ(l.stats().connects, 0u);
  EXPECT_EQ(l.stats().failures, 2u);
}

TEST_P(Fault, PipelinedBatchWhenRedisIsDown) {
  const int port = ratelimit_test::free_port();
  auto o = options();
  o.port = port;
  RedisLimiter l(kPolicy, o, clock_);
  const ratelimit::redis::Request batch[] = {{"a", 1}, {"b", 1}};
  if (GetParam() == FailurePolicy::raise) {
    EXPECT_THROW(l.allow_many(batch), BackendError);
  } else {
    const auto d = l.allow_many(batch);
    ASSERT_EQ(d.size(), 2u);
    const Decision want = GetParam() == FailurePolicy::fail_open ? D(true, 2, 0s, 100ms) : D(false, 0, 2s, 2s);
    EXPECT_EQ(d[0], want);
    EXPECT_EQ(d[1], want);
  }
  EXPECT_EQ(l.stats().failures, 2u);
}

INSTANTIATE_TEST_SUITE_P(OnError, Fault, testing::Values(FailurePolicy::fail_open, FailurePolicy::fail_closed, FailurePolicy::raise),
                         [](const testing::TestParamInfo<FailurePolicy>& p) {
                           switch (p.param) {
                             case FailurePolicy::fail_open: return std::string("fail_open");
                             case FailurePolicy::fail_closed: return std::string("fail_closed");
                             case FailurePolicy::raise: return std::string("raise");
                             case FailurePolicy::fallback: return std::string("fallback");
                           }
                           return std::string("unknown");
                         });

}  // namespace
