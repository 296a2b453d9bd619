// share_of: one process's share of a policy when n processes split it (include/ratelimit/redis/README.md "Fallback
// during outages").
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>

#include <ratelimit/ratelimit.hpp>

namespace {

using namespace std::chrono_literals;

TEST(FallbackShare, DividesTheRateAndTheBurst) {
  const auto g = ratelimit::share_of(ratelimit::Gcra{.limit = 100, .period = 1s, .burst = 20}, 4);
  EXPECT_EQ(g.limit, 100);
  EXPECT_EQ(g.period, 4s);
  EXPECT_EQ(g.burst, 5);
  const auto t = ratelimit::share_of(ratelimit::TokenBucket{.capacity = 3, .refill_tokens = 6, .refill_period = 1s}, 4);
  EXPECT_EQ(t.capacity, 1);  // never rounded to nothing
  EXPECT_EQ(t.refill_period, 4s);
  EXPECT_EQ(ratelimit::share_of(ratelimit::FixedWindow{.limit = 10, .window = 1min}, 3).limit, 3);
  EXPECT_THROW((void)ratelimit::share_of(ratelimit::FixedWindow{.limit = 10, .window = 1min}, 0),
               std::invalid_argument);
}

TEST(FallbackShare, GcraShareAdmitsAtMostItsBound) {
  // 100/s, burst 20, n = 4: over 2 s checked every 1 ms a share admits at most 5 + 2000 / 40.
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter<ratelimit::Gcra, ratelimit::ManualClock> share(
      ratelimit::share_of(ratelimit::Gcra{.limit = 100, .period = 1s, .burst = 20}, 4), {}, clock);
  int admitted = 0;
  for (int i = 0; i < 2000; ++i) {
    admitted += share.allow("k") ? 1 : 0;
    clock.advance(1ms);
  }
  EXPECT_LE(admitted, 5 + 50);
  EXPECT_GE(admitted, 50);
}

}  // namespace
