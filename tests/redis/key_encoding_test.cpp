// Key layout: injective encoding of any bytes, a non-empty hash tag that is exactly the encoded key, and
// one cluster slot for every Redis key of one user key.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using ratelimit::redis::detail::decode_key;
using ratelimit::redis::detail::encode_key;
using ratelimit::redis::detail::redis_key;
using namespace std::chrono_literals;

// CRC16-CCITT (XMODEM), the function of Redis Cluster's key slots (cluster spec, "Keys distribution model").
std::uint16_t crc16(std::string_view bytes) {
  std::uint16_t crc = 0;
  for (const char ch : bytes) {
    crc = static_cast<std::uint16_t>(crc ^ (static_cast<std::uint16_t>(static_cast<unsigned char>(ch)) << 8));
    for (int i = 0; i < 8; ++i) {
      crc = (crc & 0x8000) != 0 ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021) : static_cast<std::uint16_t>(crc << 1);
    }
  }
  return crc;
}

// The part of a key Redis hashes: between the first '{' and the first '}' after it, if non-empty.
std::string_view hashed_part(std::string_view key) {
  const auto open = key.find('{');
  if (open == std::string_view::npos) return key;
  const auto close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

int key_slot(std::string_view key) { return crc16(hashed_part(key)) % 16384; }

std::string random_key(std::mt19937_64& rng) {
  static constexpr char alphabet[] = {'{', '}', '\0', ':', '%', '7', 'D', '2', '5', 'a', '\xff', '\x80', '\x7b'};
  std::uniform_int_distribution<int> len(0, 7);
  std::uniform_int_distribution<std::size_t> pick(0, sizeof alphabet - 1);
  std::string k;
  for (int n = len(rng); n > 0; --n) k += alphabet[pick(rng)];
  return k;
}

TEST(KeyEncoding, Crc16MatchesTheClusterSpecVector) {
  EXPECT_EQ(crc16("123456789"), 0x31C3);  // the check value given in the Redis cluster specification
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
  EXPECT_EQ(hashed_part("foo{}{bar}"), "foo{}{bar}");  // an empty tag hashes the whole key
}

TEST(KeyEncoding, HandPickedKeys) {
  EXPECT_EQ(encode_key(""), "%");
  EXPECT_EQ(encode_key("a}b"), "a%7Db");
  EXPECT_EQ(encode_key("%7D"), "%257D");
  EXPECT_EQ(encode_key("{x}"), "{x%7D");
  EXPECT_EQ(redis_key("p:", "gcra", "user:1", ":state"), "p:gcra{user:1}:state");
  EXPECT_EQ(redis_key("p:", "gcra", "", ":state"), "p:gcra{%}:state");
  EXPECT_FALSE(decode_key("%7"));
  EXPECT_FALSE(decode_key("a}"));
  EXPECT_FALSE(decode_key(""));
}

TEST(KeyEncoding, RandomKeysNeverCollideAndRoundTrip) {
  std::mt19937_64 rng(20240517);
  std::map<std::string, std::string> seen;  // Redis key -> user key
  for (int i = 0; i < 200000; ++i) {
    const std::string k = random_key(rng);
    const std::string enc = encode_key(k);
    ASSERT_FALSE(enc.empty());
    ASSERT_EQ(enc.find('}'), std::string::npos);
    ASSERT_EQ(decode_key(enc), k);
    const std::string rk = redis_key("rl:", "sliding_window_log", k, ":log");
    ASSERT_EQ(hashed_part(rk), enc) << "the hash tag must be exactly the encoded key";
    const auto [it, inserted] = seen.emplace(rk, k);
    ASSERT_TRUE(inserted || it->second == k) << "collision between two user keys";
  }
  EXPECT_GT(seen.size(), 50000u);
}

TEST(KeyEncoding, EveryPolicyKeyOfOneUserKeySharesOneSlot) {
  std::mt19937_64 rng(7);
  ratelimit::redis::RedisOptions o;
  o.key_prefix = "svc:";
  ratelimit::redis::RedisLimiter fw(ratelimit::FixedWindow{.limit = 5, .window = 1s}, o);
  ratelimit::redis::RedisLimiter swl(ratelimit::SlidingWindowLog{.limit = 5, .window = 1s}, o);
  ratelimit::redis::RedisLimiter swc(ratelimit::SlidingWindowCounter{.limit = 5, .window = 1s}, o);
  ratelimit::redis::RedisLimiter tb(ratelimit::TokenBucket{.capacity = 5, .refill_tokens = 5, .refill_period = 1s}, o);
  ratelimit::redis::RedisLimiter gcra(ratelimit::Gcra{.limit = 5, .period = 1s, .burst = 5}, o);
  for (int i = 0; i < 5000; ++i) {
    const std::string k = random_key(rng);
    const std::vector<std::string> keys{fw.redis_key(k), swl.redis_key(k), swc.redis_key(k), tb.redis_key(k),
                                        gcra.redis_key(k)};
    for (const auto& rk : keys) {
      ASSERT_EQ(key_slot(rk), crc16(encode_key(k)) % 16384);
      ASSERT_EQ(rk.rfind("svc:", 0), 0u);
    }
  }
}

// End to end: 300 distinct awkward keys, limit 1 each: if two shared state, one would be denied.
TEST(KeyEncoding, DistinctKeysHaveIndependentStateOnRedis) {
  RATELIMIT_REQUIRE_REDIS();
  std::mt19937_64 rng(99);
  std::map<std::string, int> keys;
  while (keys.size() < 300) keys.emplace(random_key(rng), 0);
  ratelimit::ManualClock clock;
  const auto opts = ratelimit_test::client_options(*ratelimit_test::shared_redis());
  ratelimit::redis::RedisLimiter limiter(ratelimit::SlidingWindowLog{.limit = 1, .window = 1h}, opts, clock);
  for (const auto& [k, _] : keys) ASSERT_TRUE(limiter.allow(k).allowed) << "key collided";
  for (const auto& [k, _] : keys) ASSERT_FALSE(limiter.allow(k).allowed);
  auto admin = ratelimit_test::shared_redis()->admin();
  EXPECT_EQ(ratelimit_test::expect_all_keys_expire(admin, opts.key_prefix), keys.size());
}

}  // namespace
