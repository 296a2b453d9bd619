// Limiters of one policy kind sharing a ClusterRouter, each with its own key prefix (a per-minute and a
// per-day window over the same user keys, as tier plans are): separate state, one slot per user key.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include <ratelimit/redis.hpp>

#include "cluster_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::ManualClock;
using ratelimit::redis::RedisLimiter;
using ratelimit_test::shared_cluster;

TEST(ClusterKeyPrefix, LimitersOfOneKindOnOneRouterKeepSeparateState) {
  RATELIMIT_REQUIRE_CLUSTER();
  ManualClock clock;
  const auto o = ratelimit_test::cluster_client_options(*shared_cluster());
  auto router = std::make_shared<ratelimit::redis::ClusterRouter>(o.connection(), o.limiter());
  using Window = RedisLimiter<ratelimit::FixedWindow, ManualClock>;
  Window minute(ratelimit::FixedWindow{.limit = 2, .window = 1min}, router, o.key_prefix + "minute:", clock);
  Window day(ratelimit::FixedWindow{.limit = 5, .window = 24h}, router, o.key_prefix + "day:", clock);
  EXPECT_EQ(minute.options().key_prefix, o.key_prefix + "minute:");
  EXPECT_NE(minute.redis_key("alice"), day.redis_key("alice"));

  EXPECT_TRUE(minute.allow("alice").allowed);
  EXPECT_TRUE(minute.allow("alice").allowed);
  EXPECT_FALSE(minute.allow("alice").allowed);
  EXPECT_EQ(day.peek("alice").remaining, 5);  // the minute's use is not the day's
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(day.allow("alice").allowed);
  EXPECT_EQ(day.peek("alice").remaining, 2);
  EXPECT_FALSE(minute.peek("alice").allowed);  // nor the day's use the minute's

  // One user key: one slot, so a joint check of both is one script.
  using ratelimit::redis::engine::detail::key_slot;
  EXPECT_EQ(key_slot(minute.redis_key("bob")), key_slot(day.redis_key("bob")));
  std::array<ratelimit::CheckResult, 2> out{};
  const std::array<ratelimit::JointRequest, 2> both{ratelimit::JointRequest{&minute, "bob", 1},
                                                    ratelimit::JointRequest{&day, "bob", 1}};
  ASSERT_TRUE(minute.check_jointly(both, out));
  EXPECT_EQ(out[0].decision.remaining, 1);
  EXPECT_EQ(out[1].decision.remaining, 4);
  EXPECT_EQ(minute.stats().failures + day.stats().failures, 0u);

  EXPECT_THROW(Window(ratelimit::FixedWindow{.limit = 1, .window = 1s}, router, "bad{", clock), std::invalid_argument);
}

}  // namespace
