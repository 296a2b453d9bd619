#include <gtest/gtest.h>

#include <ratelimit/ratelimit.hpp>

using namespace std::chrono_literals;

TEST(Smoke, GcraBurstFromIdle) {
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter limiter(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 3}, {}, clock);
  EXPECT_TRUE(limiter.allow("k"));
  EXPECT_TRUE(limiter.allow("k"));
  EXPECT_TRUE(limiter.allow("k"));
  const ratelimit::Decision d = limiter.allow("k");
  EXPECT_FALSE(d);
  EXPECT_EQ(d.retry_after, 100ms);
}
