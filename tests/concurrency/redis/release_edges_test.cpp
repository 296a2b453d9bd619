// RedisConcurrencyLimiter's releases where a blocking call cannot run, and acquires cut by their deadline
// (include/ratelimit/concurrency/README.md "Concurrency limits", Redis): the units come back at once, not at expiry.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <ratelimit/redis.hpp>

#include "redis_server.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::PermitResult;
using ratelimit::redis::RedisConcurrencyLimiter;
using ratelimit::redis::RedisConcurrencyOptions;

RedisConcurrencyOptions long_expiry() {
  RedisConcurrencyOptions o;
  o.permits = 4;
  o.expiry = 30s;
  return o;
}

// Polls `in_flight` until it is `want` or 2 s passed (the release is on its way to a real server).
std::int64_t settled_in_flight(RedisConcurrencyLimiter& limiter, const std::string& key, std::int64_t want) {
  const auto until = std::chrono::steady_clock::now() + 2s;
  std::int64_t n = limiter.in_flight(key);
  while (n != want && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(5ms);
    n = limiter.in_flight(key);
  }
  return n;
}

// A permit released inside an async completion (its I/O thread, where a blocking call throws) gives its units back.
TEST(RedisConcurrencyRelease, ReleaseOnAnAsyncCompletionGivesTheUnitsBack) {
  RATELIMIT_REQUIRE_REDIS();
  const auto redis = ratelimit_test::client_options(*ratelimit_test::shared_redis());
  RedisConcurrencyLimiter limiter(long_expiry(), redis);
  ratelimit::redis::RedisLimiter<ratelimit::FixedWindow> rate(ratelimit::FixedWindow{.limit = 10, .window = 1s}, redis);
  PermitResult r = limiter.try_acquire("k", 2);
  ASSERT_TRUE(r);
  ASSERT_EQ(limiter.in_flight("k"), 2);
  // Shared with the completion: it may run after a failed wait returned (the limiter's end completes it).
  auto done = std::make_shared<std::promise<void>>();
  auto finished = done->get_future();
  rate.allow_async("x", 1, [permit = std::move(r.permit), done](std::exception_ptr, ratelimit::Decision) mutable {
    permit.release();
    done->set_value();
  });
  ASSERT_EQ(finished.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(settled_in_flight(limiter, "k", 0), 0) << "the units stay in Redis until expiry";
  EXPECT_EQ(limiter.failed_releases(), 0u);
  EXPECT_EQ(limiter.held(), 0u);
}

// An acquire whose reply comes after its deadline (the server busy meanwhile) holds nothing once the server has
// run it: its units do not count until expiry.
TEST(RedisConcurrencyRelease, AcquireCutByItsDeadlineHoldsNothing) {
  RATELIMIT_REQUIRE_REDIS();
  auto redis = ratelimit_test::client_options(*ratelimit_test::shared_redis());
  redis.command_timeout = 100ms;
  RedisConcurrencyLimiter limiter(long_expiry(), redis);
  auto admin = ratelimit_test::shared_redis()->admin();
  ASSERT_TRUE(limiter.try_acquire("k", 1));  // connected, script loaded (and released)
  // A script on another connection keeps the server busy for 400 ms: the acquire waits in its socket, runs after
  // its deadline passed, and its reply is discarded.
  auto blocker = ratelimit_test::shared_redis()->admin();
  std::thread busy([&] {
    (void)blocker.command({"EVAL",
                           "local t = redis.call('TIME') local s = t[1] * 1e6 + t[2] "
                           "repeat t = redis.call('TIME') until t[1] * 1e6 + t[2] - s > 400000 return 1",
                           "0"});
  });
  std::this_thread::sleep_for(50ms);  // the script runs (waiting for the server)
  EXPECT_THROW((void)limiter.try_acquire("k", 2), ratelimit::BackendError);
  busy.join();
  EXPECT_EQ(settled_in_flight(limiter, "k", 0), 0) << "the given-up acquire's units count until expiry";
  EXPECT_EQ(limiter.held(), 0u);
  PermitResult r = limiter.try_acquire("k", 4);  // every permit is free
  EXPECT_TRUE(r) << ratelimit::to_string(r.status);
}

}  // namespace
