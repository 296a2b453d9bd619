// The test's redis-server (test_redis.hpp), started through the header-only engine, and limiters on a pool of the
// user's: the one unit of the program besides ratelimit::redis_compiled's that compiles engine code.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <ratelimit/redis/engine/connection.hpp>
#include <ratelimit/redis/engine/pool.hpp>
#include <ratelimit/redis/engine/reply.hpp>

#include "redis/redis_server.hpp"
#include "separate_compilation/test_redis.hpp"

namespace {
std::unique_ptr<ratelimit_test::RedisServer> server;
}  // namespace

int separate_test::start_redis() {
  const auto binary = ratelimit_test::find_redis_server();
  if (!binary) return 0;
  server = std::make_unique<ratelimit_test::RedisServer>(*binary);
  return server->port();
}

void separate_test::stop_redis() { server.reset(); }

bool separate_test::pool_limiters_decide(int port) {
  ratelimit::redis::ConnectionOptions connection;
  connection.port = port;
  auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(connection);
  ratelimit::redis::LimiterOptions named;
  named.name = "pool-window";
  ratelimit::redis::RedisLimiter<ratelimit::FixedWindow> window(
      ratelimit::FixedWindow{.limit = 2, .window = std::chrono::hours(1)}, pool, named);
  ratelimit::redis::RedisLimiter<ratelimit::TokenBucket> bucket(
      ratelimit::TokenBucket{.capacity = 1, .refill_tokens = 1, .refill_period = std::chrono::hours(1)}, pool,
      std::string("pool-bucket:"));
  const bool ok = window.allow("k").allowed && window.allow("k").allowed && !window.allow("k").allowed &&
                  bucket.allow("k").allowed && !bucket.allow("k").allowed && window.joint_domain() != nullptr &&
                  window.joint_domain() == bucket.joint_domain();
  std::printf("limiters on the user's pool: %s\n", ok ? "ok" : "WRONG");
  return ok;
}
