// Which limiters share state on Redis (include/ratelimit/redis/README.md "Redis backend", key layout): without a name a
// limiter's identity is its policy kind and parameters, with `LimiterOptions::name` it is the name.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include <ratelimit/redis.hpp>

#include "cluster_support.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::FixedWindow;
using ratelimit::ManualClock;
using ratelimit::redis::RedisLimiter;
using ratelimit_test::client_options;
using ratelimit_test::shared_redis;

class KeyIdentityTest : public testing::Test {
 protected:
  void SetUp() override { RATELIMIT_REQUIRE_REDIS(); }
};

// The per-minute / per-day pair of one kind under one prefix: each keeps its own count.
TEST_F(KeyIdentityTest, SameKindDifferentParametersDoNotShare) {
  ManualClock clock;
  const auto o = client_options(*shared_redis());
  RedisLimiter<FixedWindow, ManualClock> per_minute(FixedWindow{.limit = 10, .window = 1min}, o, clock);
  RedisLimiter<FixedWindow, ManualClock> per_day(FixedWindow{.limit = 1000, .window = 24h}, o, clock);
  EXPECT_NE(per_minute.redis_key("alice"), per_day.redis_key("alice"));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(per_minute.allow("alice").allowed);
  EXPECT_EQ(per_day.peek("alice").remaining, 1000);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(per_day.allow("alice").allowed);
  const auto d = per_minute.peek("alice");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(per_day.peek("alice").remaining, 997);
}

// Processes with the same policy still share: separate pools (as separate processes), equal parameters
// (60 s and 1 min are one window), one count.
TEST_F(KeyIdentityTest, SamePolicySharesAcrossPools) {
  ManualClock clock;
  const auto o = client_options(*shared_redis());
  RedisLimiter<FixedWindow, ManualClock> a(FixedWindow{.limit = 5, .window = 60s}, o, clock);
  RedisLimiter<FixedWindow, ManualClock> b(FixedWindow{.limit = 5, .window = 1min}, o, clock);
  EXPECT_EQ(a.redis_key("k"), b.redis_key("k"));
  EXPECT_EQ(a.allow("k").remaining, 4);
  EXPECT_EQ(b.allow("k").remaining, 3);
  // Gcra identity is its rules: the same emission interval and tolerance is the same limit.
  RedisLimiter<ratelimit::Gcra, ManualClock> g1(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 3}, o, clock);
  RedisLimiter<ratelimit::Gcra, ManualClock> g2(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 4}, o, clock);
  EXPECT_NE(g1.redis_key("k"), g2.redis_key("k"));
}

// A name is the identity: limiters with one name share whatever their parameters (a parameter change
// under a name is a policy change of that limit); different names, or named and unnamed, do not.
TEST_F(KeyIdentityTest, NameIsTheIdentity) {
  ManualClock clock;
  auto o = client_options(*shared_redis());
  const auto unnamed = o;
  o.name = "login";
  RedisLimiter<FixedWindow, ManualClock> before(FixedWindow{.limit = 10, .window = 1min}, o, clock);
  RedisLimiter<FixedWindow, ManualClock> after(FixedWindow{.limit = 5, .window = 1min}, o, clock);
  EXPECT_EQ(before.redis_key("k"), after.redis_key("k"));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(before.allow("k").allowed);
  EXPECT_EQ(after.peek("k").remaining, 2);  // the 3 units used count against the new limit of 5
  RedisLimiter<FixedWindow, ManualClock> plain(FixedWindow{.limit = 10, .window = 1min}, unnamed, clock);
  EXPECT_EQ(plain.peek("k").remaining, 10);
  o.name = "signup";
  RedisLimiter<FixedWindow, ManualClock> other(FixedWindow{.limit = 10, .window = 1min}, o, clock);
  EXPECT_EQ(other.peek("k").remaining, 10);
  // A name that looks like parameters cannot meet an unnamed limiter's key.
  o.name = "10:60000000";
  RedisLimiter<FixedWindow, ManualClock> tricky(FixedWindow{.limit = 10, .window = 1min}, o, clock);
  EXPECT_NE(tricky.redis_key("k"), plain.redis_key("k"));
  EXPECT_EQ(tricky.peek("k").remaining, 10);
}

TEST_F(KeyIdentityTest, BadNamesAreRefused) {
  auto o = client_options(*shared_redis());
  for (const std::string& bad : {std::string("a{b"), std::string("a}b"), std::string(257, 'n')}) {
    o.name = bad;
    try {
      RedisLimiter<FixedWindow> l(FixedWindow{.limit = 1, .window = 1s}, o);
      ADD_FAILURE() << "accepted name " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("name"), std::string::npos) << e.what();
    }
  }
  auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(client_options(*shared_redis()).connection());
  ratelimit::redis::LimiterOptions lo;
  lo.name = "x}";
  EXPECT_THROW((RedisLimiter<FixedWindow>(FixedWindow{.limit = 1, .window = 1s}, pool, lo)), std::invalid_argument);
}

// Limiters sharing a pool get their own identity too, and a layered check over the per-minute /
// per-day pair is one script (two distinct Redis keys in one slot); before, it named one key twice.
TEST_F(KeyIdentityTest, SharedPoolAndJointCheck) {
  ManualClock clock;
  const auto o = client_options(*shared_redis());
  auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(o.connection(), o.limiter());
  RedisLimiter<FixedWindow, ManualClock> per_minute(FixedWindow{.limit = 2, .window = 1min}, pool, clock);
  RedisLimiter<FixedWindow, ManualClock> per_day(FixedWindow{.limit = 1000, .window = 24h}, pool, clock);
  EXPECT_EQ(ratelimit::redis::engine::detail::key_slot(per_minute.redis_key("alice")),
            ratelimit::redis::engine::detail::key_slot(per_day.redis_key("alice")));
  std::array<ratelimit::JointRequest, 2> requests{{{&per_minute, "alice", 1}, {&per_day, "alice", 1}}};
  std::array<ratelimit::CheckResult, 2> out{};
  ASSERT_TRUE(per_minute.check_jointly(requests, out));
  EXPECT_EQ(out[0].decision.remaining, 1);
  EXPECT_EQ(out[1].decision.remaining, 999);
  ASSERT_TRUE(per_minute.check_jointly(requests, out));
  ASSERT_TRUE(per_minute.check_jointly(requests, out));  // the minute denies: nothing consumed
  EXPECT_FALSE(out[0].decision.allowed);
  EXPECT_EQ(per_day.peek("alice").remaining, 998);
  ratelimit::redis::LimiterOptions lo;
  lo.key_prefix = o.key_prefix;
  lo.time_source = ratelimit::redis::TimeSource::client;
  lo.name = "daily";
  RedisLimiter<FixedWindow, ManualClock> named(FixedWindow{.limit = 1000, .window = 24h}, pool, lo, clock);
  EXPECT_EQ(named.peek("alice").remaining, 1000);
  EXPECT_EQ(named.options().name, "daily");
}

// The same on Redis Cluster: one slot per user key (the hash tag), one state per limiter.
TEST(KeyIdentityCluster, SameKindDifferentParametersDoNotShare) {
  RATELIMIT_REQUIRE_CLUSTER();
  ManualClock clock;
  const auto o = ratelimit_test::cluster_client_options(*ratelimit_test::shared_cluster());
  RedisLimiter<FixedWindow, ManualClock> per_minute(FixedWindow{.limit = 10, .window = 1min}, o, clock);
  RedisLimiter<FixedWindow, ManualClock> per_day(FixedWindow{.limit = 1000, .window = 24h}, o, clock);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(per_minute.allow("alice").allowed);
  EXPECT_EQ(per_day.peek("alice").remaining, 1000);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(per_day.allow("alice").allowed);
  EXPECT_FALSE(per_minute.peek("alice").allowed);
}

}  // namespace
