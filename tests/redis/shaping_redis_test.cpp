// Shaping on Redis (include/ratelimit/README.md "Shaping"): a Shaper over a RedisLimiter decides exactly as one over a
// MemoryLimiter (one reserve script per request), on random arrivals in whole microseconds, and acquire books its
// slot there too. Until RedisLimiter offers reserve (ratelimit::ReservingLimiter), the tests skip.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>

#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis.hpp>
#include <ratelimit/shaper.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Gcra;
using ratelimit::ManualClock;
using ratelimit::ShapingRule;
using ratelimit::redis::RedisLimiter;
using InMemory = ratelimit::MemoryLimiter<Gcra, ManualClock>;

template <class Redis>
void shaper_twin(const ShapingRule& rule, unsigned seed) {
  if constexpr (ratelimit::ReservingLimiter<Redis>) {
    ManualClock clock;
    InMemory memory(rule.gcra(), {}, clock);
    Redis redis(rule.gcra(), ratelimit_test::client_options(*ratelimit_test::shared_redis()), clock);
    ratelimit::Shaper<InMemory> in_memory(memory, rule);
    ratelimit::Shaper<Redis> on_redis(redis, rule);
    ASSERT_EQ(on_redis.max_delay(), in_memory.max_delay());
    std::mt19937_64 rng(seed);
    int delayed = 0;
    for (int i = 0; i < 600; ++i) {
      // Whole microseconds (Redis's tick); runs of arrivals at one instant fill the burst.
      if (rng() % 3 != 0) clock.advance(std::chrono::microseconds(static_cast<std::int64_t>(rng() % 90'000)));
      const std::string key = rng() % 4 == 0 ? "b" : "a";
      const ratelimit::Shaped r = on_redis.shape(key);
      const ratelimit::Shaped m = in_memory.shape(key);
      ASSERT_EQ(static_cast<int>(r.outcome), static_cast<int>(m.outcome)) << "request " << i << " (" << key << ")";
      ASSERT_EQ(r.delay, m.delay) << "request " << i;
      ASSERT_EQ(r.retry_after, m.retry_after) << "request " << i;
      delayed += r.outcome == ratelimit::ShapeOutcome::delayed ? 1 : 0;
    }
    EXPECT_GT(delayed, 20);
  } else {
    GTEST_SKIP() << "RedisLimiter has no reserve yet";
  }
}

// Rates whose emission interval is whole microseconds: T = ceil(period / limit) is the same in both backends' ticks.
TEST(ShapingRedis, ShaperDecidesAsInMemory) {
  RATELIMIT_REQUIRE_REDIS();
  shaper_twin<RedisLimiter<Gcra, ManualClock>>(ShapingRule{.limit = 10, .period = 1s, .burst = 5, .delay = 2}, 1);
  shaper_twin<RedisLimiter<Gcra, ManualClock>>(ShapingRule{.limit = 8, .period = 1s, .burst = 12, .delay = 0}, 2);
}

template <class Redis>
void acquire_books() {
  if constexpr (ratelimit::ReservingLimiter<Redis>) {
    ManualClock clock;
    Redis redis(Gcra{.limit = 10, .period = 1s, .burst = 1},
                ratelimit_test::client_options(*ratelimit_test::shared_redis()), clock);
    ASSERT_TRUE(redis.allow("k"));
    std::chrono::nanoseconds waited{0};
    auto wait = [&](std::chrono::nanoseconds d) {
      waited = d;
      EXPECT_FALSE(redis.allow("k")) << "another caller took the booked slot";
      clock.advance(d);
    };
    EXPECT_TRUE(ratelimit::acquire(redis, "k", 1, 1s, wait, clock).allowed);
    EXPECT_EQ(waited, 100ms);
    const ratelimit::Decision refused = ratelimit::acquire(redis, "k", 1, 99ms, wait, clock);
    EXPECT_FALSE(refused.allowed);
    EXPECT_EQ(refused.retry_after, 100ms);
  } else {
    GTEST_SKIP() << "RedisLimiter has no reserve yet";
  }
}

TEST(ShapingRedis, AcquireBooksItsSlot) {
  RATELIMIT_REQUIRE_REDIS();
  acquire_books<RedisLimiter<Gcra, ManualClock>>();
}

}  // namespace
