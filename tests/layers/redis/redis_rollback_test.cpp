// The layer-by-layer rollback of a layered check over Redis and memory (include/ratelimit/layers/README.md "Layered
// limits, all or nothing"): a rollback may deny wrongly but never admits extra, so a Redis layer whose outcome was its
// failure policy's answer (it consumed nothing) is not refunded once Redis answers again.
#include <gtest/gtest.h>

#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis.hpp>

#include <chrono>

#include "test_support.hpp"

using namespace std::chrono_literals;
using ratelimit::LayeredDecision;
using ratelimit::LimiterLayer;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;
using ratelimit::Verdict;
using ratelimit::redis::RedisLimiter;

namespace {

// Default options (fail_open), a Redis key exhausted, its connection killed, a memory layer denying:
// the Redis layer admits by its failure policy, the memory layer denies, and the rollback must leave the
// exhausted Redis key alone (a refund there would let one request too many through).
TEST(RedisLayeredRollback, AFailOpenRedisLayerIsNotRefunded) {
  RATELIMIT_REQUIRE_REDIS();
  ratelimit_test::RedisServer server(ratelimit_test::redis_server_binary());  // its own: the test kills every client
  auto admin = server.admin();
  ManualClock clock;
  ratelimit::redis::RedisOptions options;
  options.key_prefix = ratelimit_test::unique_prefix();
  options.time_source = ratelimit::redis::TimeSource::client;
  RedisLimiter<ratelimit::FixedWindow, ManualClock> redis(ratelimit::FixedWindow{1, 1min}, server.options(options),
                                                          clock);
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> memory(ratelimit::FixedWindow{1, 1min}, {}, clock);
  LimiterLayer<decltype(redis)> redis_layer(redis, "redis");
  LimiterLayer<decltype(memory)> memory_layer(memory, "memory");
  ASSERT_TRUE(redis.allow("k"));
  ASSERT_TRUE(memory.allow("k"));
  ASSERT_EQ(redis.peek("k").remaining, 0);

  (void)admin.command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  const LayeredDecision d = ratelimit::check_layers({{&redis_layer, "k"}, {&memory_layer, "k"}});
  EXPECT_FALSE(d);
  ASSERT_TRUE(d.layers[0].backend_failed) << "the killed connection must fail the Redis layer's check";
  EXPECT_EQ(d.layers[0].verdict, Verdict::rolled_back);  // the request did not pass; nothing was given back
  EXPECT_FALSE(d.layers[0].consumed());
  EXPECT_EQ(d.layers[1].verdict, Verdict::limited);
  EXPECT_EQ(redis.peek("k").remaining, 0) << "the rollback refunded a layer that consumed nothing";
  EXPECT_FALSE(redis.allow("k"));
}

}  // namespace
