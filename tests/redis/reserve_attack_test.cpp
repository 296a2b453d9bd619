// Reservations under attack on Redis (include/ratelimit/README.md "Reservations"): a cancel never takes the key below
// the TAT its booking started from, as in memory: units a refund or a reset gave back are not given twice.
#include <gtest/gtest.h>

#include <chrono>

#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis.hpp>

#include "redis_server.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::ManualClock;
using ratelimit::Reservation;

// T = 100 ms, B = 2, tau = 200 ms.
constexpr ratelimit::Gcra kPolicy{.limit = 10, .period = 1s, .burst = 2};

class ReserveAttackRedis : public testing::Test {
 protected:
  void SetUp() override {
    RATELIMIT_REQUIRE_REDIS();
    ratelimit_test::at(clock_, 1000s);
  }
  ManualClock clock_;
  ratelimit::redis::RedisLimiter<ratelimit::Gcra, ManualClock> redis_{
      kPolicy, ratelimit_test::client_options(*ratelimit_test::shared_redis()), clock_};
  ratelimit::MemoryLimiter<ratelimit::Gcra, ManualClock> memory_{kPolicy, {}, clock_};
};

TEST_F(ReserveAttackRedis, CancelAfterRefundGivesNothingTwiceAndBackendsAgree) {
  auto run = [&](auto& limiter) {
    EXPECT_TRUE(limiter.allow("k", 1));       // TAT 100 ms
    Reservation r = limiter.reserve("k", 2);  // booked TAT 300 ms, acts at 100 ms
    EXPECT_EQ(r.delay(), 100ms);
    (void)limiter.refund("k", 2);  // TAT 100 ms again
    r.cancel();                    // nothing of it is left to give
    EXPECT_TRUE(limiter.allow("k", 1));
    return limiter.peek("k");
  };
  const ratelimit::Decision on_redis = run(redis_);
  const ratelimit::Decision in_memory = run(memory_);
  EXPECT_FALSE(on_redis.allowed) << "the cancel gave back the first request's unit too";
  EXPECT_EQ(on_redis, in_memory);
}

TEST_F(ReserveAttackRedis, CancelAfterResetAndReuseGivesNothingBack) {
  ASSERT_TRUE(redis_.reserve("k", 2).ok());
  Reservation later = redis_.reserve("k", 1);  // booked TAT 300 ms, acts at 100 ms
  ASSERT_EQ(later.delay(), 100ms);
  ASSERT_TRUE(redis_.reset("k"));
  ASSERT_TRUE(redis_.allow("k", 2));
  later.cancel();
  EXPECT_FALSE(redis_.allow("k")) << "the cancel gave back a unit of the requests admitted after the reset";
}

}  // namespace
