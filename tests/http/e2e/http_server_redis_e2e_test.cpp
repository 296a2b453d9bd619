// End to end on Redis: the example server with --redis against a redis-server started here, the same
// hand-worked header values as in memory (client time: --manual-clock), and two server processes
// sharing one Redis enforcing one limit together.
#include <gtest/gtest.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <memory>
#include <string>

#include "redis_server.hpp"
#include "server_process.hpp"

namespace {

std::unique_ptr<ratelimit_test::RedisServer> start_redis() {
  const auto binary = ratelimit_test::find_redis_server();
  if (!binary) return nullptr;
  return std::make_unique<ratelimit_test::RedisServer>(*binary);
}

#define REQUIRE_REDIS(redis)                                                              \
  if (!(redis)) {                                                                         \
    if (std::getenv("CI") != nullptr) FAIL() << "CI is set but redis-server is missing";  \
    GTEST_SKIP() << "redis-server not found";                                             \
  }
}  // namespace

TEST(HttpServerRedisE2E, SearchHeadersMatchTheMemoryBackend) {
  const auto redis = start_redis();
  REQUIRE_REDIS(redis);
  ServerProcess server({"--manual-clock", "--redis", "127.0.0.1:" + std::to_string(redis->port())});
  httplib::Client c("127.0.0.1", server.port());
  auto r = c.Get("/search?q=x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(header(r, "RateLimit"),
            "\"ip\";r=999;t=60, \"free-minute\";r=29;t=60, \"free-day\";r=999;t=86400, \"free-burst\";r=9;t=2, "
            "\"search\";r=9;t=60");
  for (int i = 2; i <= 10; ++i) ASSERT_EQ(c.Get("/search")->status, 200) << i;
  r = c.Get("/search");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  // All layers share one pool: one script checks every layer and keeps nothing of the denied request, so
  // the answer is the memory backend's (http_server_e2e_test.cpp): every layer reported, search denies
  // too, and its 60 s wait binds.
  EXPECT_EQ(header(r, "RateLimit"),
            "\"ip\";r=990;t=60, \"free-minute\";r=20;t=60, \"free-day\";r=990;t=86400, \"free-burst\";r=0;t=2, "
            "\"search\";r=0;t=60");
  EXPECT_EQ(header(r, "Retry-After"), "60");
  EXPECT_EQ(nlohmann::json::parse(r->body).at("violated-policies"), nlohmann::json::array({"free-burst", "search"}));
  advance(c, 2'000);  // one token back; the search log is still full until 60 s
  r = c.Get("/search");
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(header(r, "Retry-After"), "58");
  EXPECT_EQ(nlohmann::json::parse(r->body).at("violated-policies"), nlohmann::json::array({"search"}));
  advance(c, 58'000);
  r = c.Get("/search");
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(header(r, "RateLimit"),
            "\"ip\";r=999;t=60, \"free-minute\";r=29;t=60, \"free-day\";r=989;t=86340, \"free-burst\";r=9;t=2, "
            "\"search\";r=9;t=60");
  EXPECT_EQ(server.stop(), 0);
}

TEST(HttpServerRedisE2E, TwoServerProcessesShareOneLimit) {
  const auto redis = start_redis();
  REQUIRE_REDIS(redis);
  const std::string address = "127.0.0.1:" + std::to_string(redis->port());
  ServerProcess a({"--manual-clock", "--redis", address});
  ServerProcess b({"--manual-clock", "--redis", address});
  httplib::Client ca("127.0.0.1", a.port());
  httplib::Client cb("127.0.0.1", b.port());
  const httplib::Headers key{{"X-API-Key", "demo-pro"}};
  // /export: 5 per minute per client, counted across both processes.
  const char* const expected[] = {"4", "3", "2", "1", "0"};
  for (int i = 0; i < 5; ++i) {
    const auto r = (i % 2 == 0 ? ca : cb).Get("/export", key);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << i;
    EXPECT_EQ(header(r, "X-RateLimit-Remaining"), expected[i]) << i;
  }
  for (auto* c : {&ca, &cb}) {
    const auto r = c->Get("/export", key);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 429);
    EXPECT_EQ(header(r, "Retry-After"), "60");
  }
  advance(ca, 60'000);  // each process has its own manual clock: move both
  advance(cb, 60'000);
  EXPECT_EQ(cb.Get("/export", key)->status, 200);
  EXPECT_EQ(a.stop(), 0);
  EXPECT_EQ(b.stop(), 0);
}

TEST(HttpServerRedisE2E, RedisDownFailsOpenWithAFreshKeysDecision) {
  const auto redis = start_redis();
  REQUIRE_REDIS(redis);
  const int port = redis->port();
  redis->stop();  // nobody listens there now
  ServerProcess server({"--manual-clock", "--redis", "127.0.0.1:" + std::to_string(port)});
  httplib::Client c("127.0.0.1", server.port());
  const auto r = c.Get("/search");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);  // fail_open: a fresh key's decision
  EXPECT_EQ(header(r, "X-RateLimit-Remaining"), "9");
  EXPECT_EQ(server.stop(), 0);
}

// --on-redis-error fallback with Redis down: limited, not unlimited. Two instances share the limits, so this
// one has half of each: /search 5 per minute (its 10), the free plan's burst 5 (its 10).
TEST(HttpServerRedisE2E, RedisDownWithFallbackStaysLimited) {
  const auto redis = start_redis();
  REQUIRE_REDIS(redis);
  const int port = redis->port();
  redis->stop();  // nobody listens there now
  ServerProcess server({"--manual-clock", "--redis", "127.0.0.1:" + std::to_string(port), "--on-redis-error",
                        "fallback", "--fallback-instances", "2"});
  httplib::Client c("127.0.0.1", server.port());
  for (int i = 1; i <= 5; ++i) {
    const auto r = c.Get("/search");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << i;
    if (i == 1) {
      EXPECT_EQ(header(r, "X-RateLimit-Remaining"), "4");  // the share's, not a fresh key's 9
    }
  }
  const auto r = c.Get("/search");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(server.stop(), 0);
}
