// The sliding window counter's refund on Redis (include/ratelimit/README.md "Refunds"): a refund that finds units only
// in the previous window gives them back and writes the key in the current window; the key then keeps a TTL that covers
// the next window once it counts units of this one again (the exact values are in the conformance tables,
// tests/support/conformance.hpp).
#include <gtest/gtest.h>

#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis.hpp>

#include <chrono>

#include "test_support.hpp"

using namespace std::chrono_literals;

namespace {

TEST(SlidingWindowCounterRefund, AStateWrittenByARefundGetsTheTtlOfItsNextCheck) {
  RATELIMIT_REQUIRE_REDIS();
  auto admin = ratelimit_test::shared_redis()->admin();
  ratelimit::ManualClock clock;
  ratelimit::redis::RedisLimiter<ratelimit::SlidingWindowCounter, ratelimit::ManualClock> limiter(
      ratelimit::SlidingWindowCounter{.limit = 4, .window = 10s},
      ratelimit_test::client_options(*ratelimit_test::shared_redis()), clock);
  const std::string key = limiter.redis_key("k");
  clock.advance(9s);  // window 0, 1 s before its end: TTL = the next window's end (11 s) + 1 s
  ASSERT_TRUE(limiter.allow("k", 2));
  EXPECT_LE(ratelimit_test::pttl(admin, key), 12'000);
  clock.advance(2s);  // t = 11 s, window 1: prev 2, cur 0
  const ratelimit::Decision refunded = limiter.refund("k", 1);
  EXPECT_EQ(refunded.remaining, 3);                     // prev 1 weighs 0.9: floor(4 - 0.9)
  EXPECT_LE(ratelimit_test::pttl(admin, key), 12'000);  // the refund keeps the TTL
  ASSERT_TRUE(limiter.allow("k"));                      // cur 1 must outlive window 2 (until 30 s): TTL 19 s + 1 s
  EXPECT_GT(ratelimit_test::pttl(admin, key), 19'000);
}

}  // namespace
