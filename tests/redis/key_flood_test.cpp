// Key flood on Redis: every key written gets a TTL, so after a flood of distinct keys and the TTL (reset_after
// + 1 s), the server holds no key of ours: a flood cannot grow Redis without bound.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;

long long dbsize(ratelimit::redis::engine::Connection& admin) {
  const auto r = admin.command({"DBSIZE"});
  return r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
}

TEST(RedisKeyFlood, EveryKeyExpiresAfterTheFlood) {
  RATELIMIT_REQUIRE_REDIS();
  ratelimit_test::RedisServer server(ratelimit_test::redis_server_binary());  // its own: DBSIZE is exact
  auto o = server.options();
  o.on_error = ratelimit::FailurePolicy::raise;
  o.command_timeout = 5000ms;
  // A 10 ms window: reset_after <= 10 ms, so every key's TTL is at most 1.01 s.
  ratelimit::redis::RedisLimiter limiter(ratelimit::FixedWindow{.limit = 5, .window = 10ms}, o);
  constexpr int kKeys = 50'000, kBatch = 1'000;
  std::vector<std::string> keys(kBatch);
  std::vector<ratelimit::redis::Request> batch(kBatch);
  for (int first = 0; first < kKeys; first += kBatch) {
    for (int i = 0; i < kBatch; ++i) {
      keys[static_cast<std::size_t>(i)] = "flood:" + std::to_string(first + i);
      batch[static_cast<std::size_t>(i)] = {keys[static_cast<std::size_t>(i)], 1};
    }
    for (const auto& d : limiter.allow_many(batch)) ASSERT_TRUE(d.allowed);
  }
  const auto flooded = std::chrono::steady_clock::now();
  auto admin = server.admin();
  const long long held = dbsize(admin);
  EXPECT_GT(held, 0);
  EXPECT_LE(held, kKeys);
  // Every key still there has a TTL of at most 1.01 s.
  for (const auto& k : ratelimit_test::scan_keys(admin, "*")) {
    const long long ttl = ratelimit_test::pttl(admin, k);
    ASSERT_TRUE(ttl == -2 || (ttl >= 0 && ttl <= 1010)) << k << " has PTTL " << ttl;
  }
  // Redis expires keys actively (sampling) and on access; give it the TTL plus a few seconds.
  long long left = held;
  while (left > 0 && std::chrono::steady_clock::now() - flooded < 10s) {
    std::this_thread::sleep_for(100ms);
    left = dbsize(admin);
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - flooded);
  EXPECT_EQ(left, 0) << "keys left " << took.count() << " ms after the flood";
  std::printf("redis key flood: %d keys, %lld held after the flood, 0 left after %lld ms\n", kKeys, held,
              static_cast<long long>(took.count()));
}

}  // namespace
