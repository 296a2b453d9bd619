// The test's redis-server (test_redis.hpp), started through the header-only engine: the one unit of the program
// besides ratelimit::redis_compiled's that compiles engine code.
#include <memory>

#include <ratelimit/redis/engine/connection.hpp>
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
