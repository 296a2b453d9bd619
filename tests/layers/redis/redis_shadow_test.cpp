// Shadow mode on Redis (include/ratelimit/layers/README.md "Shadow mode"): the twin test per policy through the
// one-script layered check (lua/layered.lua with its shadow mask), and the mixed rules on one script.
#include <gtest/gtest.h>

#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "../shadow_twin.hpp"
#include "test_support.hpp"

using namespace std::chrono_literals;
using ratelimit::ManualClock;
using ratelimit::redis::ConnectionPool;
using ratelimit::redis::RedisLimiter;

namespace {

// 10,000 calls per policy take ~4 s on Redis (two scripts per call): the heavy run (ShadowTwinRedisFull)
// sets RATELIMIT_SHADOW_TWIN_CALLS=10000; ordinary runs take 2,000.
int twin_calls() {
  const char* v = std::getenv("RATELIMIT_SHADOW_TWIN_CALLS");
  return v != nullptr ? std::atoi(v) : 2'000;
}

template <class P>
void redis_twin(const P& policy, std::uint32_t seed) {
  ManualClock clock;
  const auto options = ratelimit_test::client_options(*ratelimit_test::shared_redis());
  auto pool = std::make_shared<ConnectionPool>(options.connection(), options.limiter());
  const std::string prefix = ratelimit_test::unique_prefix();
  auto make = [&](auto p, const std::string& tag) {
    return std::make_unique<RedisLimiter<decltype(p), ManualClock>>(p, pool, prefix + tag + ":", clock);
  };
  const auto counts = ratelimit_test::run_shadow_twin(policy, clock, make, twin_calls(), seed);
  std::printf("%s on Redis: %d calls, enforcing denials %d, shadow denials %d\n", P::kind.data(), counts.calls,
              counts.enforcing_denials, counts.shadow_denials);
  EXPECT_EQ(counts.shadow_denials, counts.enforcing_denials);
  EXPECT_GT(counts.enforcing_denials, counts.calls / 20) << "too few denials to compare";
  EXPECT_LT(counts.enforcing_denials, counts.calls * 19 / 20) << "too many denials to compare";
}

}  // namespace

TEST(ShadowTwinRedis, FixedWindow) {
  RATELIMIT_REQUIRE_REDIS();
  redis_twin(ratelimit::FixedWindow{5, 2s}, 11);
}
TEST(ShadowTwinRedis, SlidingWindowLog) {
  RATELIMIT_REQUIRE_REDIS();
  redis_twin(ratelimit::SlidingWindowLog{6, 3s}, 12);
}
TEST(ShadowTwinRedis, SlidingWindowCounter) {
  RATELIMIT_REQUIRE_REDIS();
  redis_twin(ratelimit::SlidingWindowCounter{7, 2s}, 13);
}
TEST(ShadowTwinRedis, TokenBucket) {
  RATELIMIT_REQUIRE_REDIS();
  redis_twin(ratelimit::TokenBucket{.capacity = 4, .refill_tokens = 2, .refill_period = 1s}, 14);
}
TEST(ShadowTwinRedis, Gcra) {
  RATELIMIT_REQUIRE_REDIS();
  redis_twin(ratelimit::Gcra{.limit = 3, .period = 1500ms, .burst = 5}, 15);
}

// One script, mixed: a shadow denial keeps the enforcing layer's consumption; an enforcing denial keeps
// nothing of the shadow layer.
TEST(ShadowModeRedis, MixedLayersOnOneScript) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  const auto options = ratelimit_test::client_options(*ratelimit_test::shared_redis());
  auto pool = std::make_shared<ConnectionPool>(options.connection(), options.limiter());
  RedisLimiter<ratelimit::FixedWindow, ManualClock> enforcing(ratelimit::FixedWindow{3, 60s}, pool, clock);
  RedisLimiter<ratelimit::FixedWindow, ManualClock> dry(ratelimit::FixedWindow{1, 60s}, pool, clock);
  ratelimit::LimiterLayer e_layer(enforcing, "e");
  ratelimit::LayerOptions o;
  o.shadow = true;
  ratelimit::LimiterLayer s_layer(dry, "s", o);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(ratelimit::check_layers({{&e_layer, "k"}, {&s_layer, "k"}})) << i;
  EXPECT_EQ(enforcing.peek("k").remaining, 0);
  EXPECT_EQ(dry.peek("k").remaining, 0);
  EXPECT_EQ(s_layer.stats().snapshot().shadow_denied, 2u);
  const auto d = ratelimit::check_layers({{&e_layer, "x"}, {&s_layer, "x"}, {&e_layer, "k"}});
  EXPECT_FALSE(d);
  EXPECT_EQ(d.layers[1].verdict, ratelimit::Verdict::rolled_back);
  EXPECT_EQ(dry.peek("x").remaining, 1);
  EXPECT_EQ(enforcing.peek("x").remaining, 3);
}

// A shadow layer on the same RedisLimiter and key as an enforcing layer changes nothing the client sees
// (include/ratelimit/layers/README.md "Shadow mode"): shadow first at limit 1, the first request passes and only the
// enforcing layer's unit is stored; the second is denied, as with the enforcing layer alone.
TEST(ShadowModeRedis, AShadowLayerSharingAnEnforcingKeyChangesNothing) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  RedisLimiter<ratelimit::FixedWindow, ManualClock> limiter(
      ratelimit::FixedWindow{2, 1min}, ratelimit_test::client_options(*ratelimit_test::shared_redis()), clock);
  ratelimit::LimiterLayer<decltype(limiter)> enforcing(limiter, "enforcing");
  ratelimit::LimiterLayer<decltype(limiter)> dry(limiter, "dry", ratelimit::LayerOptions{.shadow = true});
  const auto first = ratelimit::check_layers({{&dry, "k"}, {&enforcing, "k"}});
  EXPECT_TRUE(first);
  EXPECT_EQ(first.layers[0].verdict, ratelimit::Verdict::unchecked);
  EXPECT_EQ(limiter.peek("k").remaining, 1);
  EXPECT_TRUE(ratelimit::check_layers({{&dry, "k"}, {&enforcing, "k"}}));
  EXPECT_FALSE(ratelimit::check_layers({{&dry, "k"}, {&enforcing, "k"}}));
  EXPECT_EQ(limiter.peek("k").remaining, 0);
}
