// The Redis options split into ConnectionOptions (connections, pool, cluster) and LimiterOptions (keys,
// time, failures); RedisOptions holds both (include/ratelimit/redis/README.md "Redis backend", options).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <ratelimit/redis.hpp>

using namespace std::chrono_literals;
using ratelimit::redis::ConnectionOptions;
using ratelimit::redis::LimiterOptions;
using ratelimit::redis::RedisLimiter;
using ratelimit::redis::RedisOptions;

static_assert(std::is_base_of_v<ConnectionOptions, RedisOptions>);
static_assert(std::is_base_of_v<LimiterOptions, RedisOptions>);

namespace {

RedisOptions refused() {
  RedisOptions o;
  o.port = 1;  // nothing listens there
  o.connect_timeout = 100ms;
  o.key_prefix = "old:";
  o.time_source = ratelimit::redis::TimeSource::client;
  o.on_error = ratelimit::FailurePolicy::fail_closed;
  return o;
}

}  // namespace

// A whole RedisOptions would drop its limiter fields: pools and routers refuse it at compile time.
static_assert(!std::is_constructible_v<ratelimit::redis::ConnectionPool, const RedisOptions&>);
static_assert(!std::is_constructible_v<ratelimit::redis::ClusterRouter, const RedisOptions&>);
static_assert(
    std::is_constructible_v<ratelimit::redis::ConnectionPool, const ConnectionOptions&, const LimiterOptions&>);

TEST(RedisOptionsSplit, PoolAndRouterKeepTheLimiterHalfAsDefaults) {
  const RedisOptions o = refused();
  auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(o.connection(), o.limiter());
  EXPECT_EQ(pool->limiter_defaults().key_prefix, "old:");
  RedisLimiter l(ratelimit::Gcra{.limit = 1, .period = 1s, .burst = 1}, pool);
  EXPECT_EQ(l.options().key_prefix, "old:");
  EXPECT_EQ(l.options().on_error, ratelimit::FailurePolicy::fail_closed);
  EXPECT_EQ(l.check("k").outcome, ratelimit::Outcome::failure_policy);

  RedisOptions c = refused();
  c.cluster_nodes = {{"127.0.0.1", 1}};
  auto router = std::make_shared<ratelimit::redis::ClusterRouter>(c.connection(), c.limiter());
  EXPECT_EQ(router->limiter_defaults().time_source, ratelimit::redis::TimeSource::client);
}

TEST(RedisOptionsSplit, TwoHalvesMakeTheSameLimiterAsOne) {
  const RedisOptions whole = refused();
  RedisLimiter one(ratelimit::Gcra{.limit = 1, .period = 1s, .burst = 1}, whole);
  RedisLimiter two(ratelimit::Gcra{.limit = 1, .period = 1s, .burst = 1}, whole.connection(), whole.limiter());
  EXPECT_EQ(one.redis_key("k"), two.redis_key("k"));
  EXPECT_EQ(two.options().port, 1);
  EXPECT_EQ(two.options().key_prefix, "old:");
  // A pool of connection options alone gives its limiters the LimiterOptions defaults.
  auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(whole.connection());
  RedisLimiter plain(ratelimit::Gcra{.limit = 1, .period = 1s, .burst = 1}, pool);
  EXPECT_EQ(plain.options().key_prefix, LimiterOptions{}.key_prefix);
}

TEST(RedisOptionsSplit, BadValuesNameTheirHalf) {
  auto message = [](auto make) -> std::string {
    try {
      make();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no std::invalid_argument";
  };
  const ratelimit::Gcra g{.limit = 1, .period = 1s, .burst = 1};
  ConnectionOptions c;
  c.pool_size = 0;
  EXPECT_EQ(message([&] { ratelimit::redis::ConnectionPool p(c); }).rfind("ConnectionOptions.pool_size:", 0), 0u);
  c.pool_size = 1;
  LimiterOptions l;
  l.name = std::string(257, 'n');
  EXPECT_EQ(message([&] { RedisLimiter r(g, c, l); }).rfind("LimiterOptions.name:", 0), 0u);
  l.name.clear();
  l.failure_retry_after = 0ms;
  EXPECT_EQ(message([&] { RedisLimiter r(g, c, l); }).rfind("LimiterOptions.failure_retry_after:", 0), 0u);
}
