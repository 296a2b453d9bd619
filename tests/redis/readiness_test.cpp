// The readiness call of a service's start-up (include/ratelimit/redis/README.md "Readiness at start-up"):
// RedisLimiter::wait_ready connects, logs in and runs the limiter's script once (so it is cached), retrying until Redis
// answers or the timeout passes, and then says why not: the server and the last failure.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Gcra;
using ratelimit::redis::RedisLimiter;
using ratelimit_test::shared_redis;

const Gcra kReadyPolicy{.limit = 5, .period = 1s, .burst = 5};

TEST(Readiness, LoadsTheScriptAndWritesNothing) {
  RATELIMIT_REQUIRE_REDIS();
  auto admin = shared_redis()->admin();
  auto o = shared_redis()->options();
  o.key_prefix = ratelimit_test::unique_prefix();
  RedisLimiter limiter(kReadyPolicy, o);
  ASSERT_EQ(ratelimit::redis::engine::text(*admin.command({"SCRIPT", "FLUSH"})), "OK");
  limiter.wait_ready(2s);
  const auto exists = admin.command({"SCRIPT", "EXISTS", limiter.script().sha1});
  ASSERT_EQ(exists->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(exists->elements, 1u);
  EXPECT_EQ(exists->element[0]->integer, 1);  // cached: the first check costs no EVAL
  EXPECT_EQ(admin.command({"KEYS", o.key_prefix + "*"})->elements, 0u);
  EXPECT_EQ(limiter.stats().failures, 0u);
}

TEST(Readiness, NothingListeningSaysWhyAfterTheTimeout) {
  const int port = ratelimit_test::free_port();
  ratelimit::redis::RedisOptions o;
  o.port = port;
  o.on_error = ratelimit::FailurePolicy::fail_open;  // readiness ignores the failure policy
  RedisLimiter limiter(kReadyPolicy, o);
  const auto started = std::chrono::steady_clock::now();
  testing::internal::CaptureStderr();
  try {
    limiter.wait_ready(300ms);
    ADD_FAILURE() << "ready with nothing listening";
  } catch (const ratelimit::BackendError& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.cause(), ratelimit::BackendErrorCause::io) << m;
    EXPECT_NE(m.find("not ready within 300 ms"), std::string::npos) << m;
    EXPECT_NE(m.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << m;
    EXPECT_NE(m.find("Connection refused"), std::string::npos) << m;
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");  // no failure report: the caller hears it
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 3s);
  EXPECT_EQ(limiter.stats().failures, 0u);  // readiness is no check
  EXPECT_THROW(limiter.wait_ready(0ms), std::invalid_argument);
}

TEST(Readiness, WaitsForAServerThatStartsLate) {
  RATELIMIT_REQUIRE_REDIS();
  ratelimit_test::RedisServer late(ratelimit_test::redis_server_binary(), 0, /*start_now=*/false);
  auto o = late.options();
  o.key_prefix = ratelimit_test::unique_prefix();
  o.on_backend_failure = ratelimit::redis::ignore_backend_failure;
  RedisLimiter limiter(kReadyPolicy, o);
  std::string outcome = "not run";
  std::thread waiter([&] {
    try {
      limiter.wait_ready(10s);
      outcome = "ready";
    } catch (const std::exception& e) {
      outcome = e.what();
    }
  });
  // The server starts from this thread: it dies with the thread that started it (PR_SET_PDEATHSIG).
  std::this_thread::sleep_for(300ms);  // the wait under test: a server coming up after the service
  late.start();
  waiter.join();
  EXPECT_EQ(outcome, "ready");
  EXPECT_TRUE(limiter.allow("k"));
}

}  // namespace
