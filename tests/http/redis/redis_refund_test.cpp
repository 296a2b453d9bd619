// Refunds and layered checks on the Redis backend: the Lua refund mode must give exactly the decisions
// of the in-memory refund (differential, client time in whole microseconds), and layered checks over
// Redis layers (consume-then-refund) must leave no consumption of a denied request once they return.
#include <gtest/gtest.h>

#include <ratelimit/http.hpp>
#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis.hpp>

#include <array>
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::ManualClock;
using ratelimit::redis::RedisLimiter;

namespace {

// Equal decisions, except that a retry_after computed by a floor division (sliding window counter's
// floor(a * W / prev)) rounds at the backend's tick: 1 ns in memory, 1 us on Redis.
::testing::AssertionResult same(const Decision& redis, const Decision& memory) {
  const auto gap = redis.retry_after - memory.retry_after;
  if (redis.allowed == memory.allowed && redis.limit == memory.limit && redis.remaining == memory.remaining &&
      redis.reset_after == memory.reset_after && gap < 1us && gap > -1us) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "redis {" << redis.allowed << ", " << redis.limit << ", " << redis.remaining
                                       << ", " << redis.retry_after.count() << ", " << redis.reset_after.count()
                                       << "} memory {" << memory.allowed << ", " << memory.limit << ", "
                                       << memory.remaining << ", " << memory.retry_after.count() << ", "
                                       << memory.reset_after.count() << "}";
}

template <class Policy>
void differential(Policy policy, unsigned seed) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  ratelimit::MemoryLimiter<Policy, ManualClock> memory(policy, {}, clock);
  RedisLimiter<Policy, ManualClock> redis(policy, ratelimit_test::client_options(*ratelimit_test::shared_redis()), clock);
  std::mt19937_64 rng(seed);
  for (int step = 0; step < 1500; ++step) {
    clock.advance(std::chrono::microseconds(static_cast<std::int64_t>(rng() % 9) * 125'000));  // same-tick cases too
    std::string key = "k";  // not "k" + to_string(): GCC 12 -O2 -Wrestrict false positive
    key += std::to_string(rng() % 2);
    const auto n = static_cast<std::int64_t>(rng() % 5);
    switch (rng() % 3) {
      case 0:
        ASSERT_TRUE(same(redis.refund(key, n), memory.refund(key, n))) << "refund, step " << step;
        break;
      default:
        ASSERT_TRUE(same(redis.allow(key, n), memory.allow(key, n))) << "allow, step " << step;
    }
  }
}

}  // namespace

TEST(RedisRefund, FixedWindowMatchesMemory) { differential(ratelimit::FixedWindow{7, 2s}, 11); }
TEST(RedisRefund, SlidingWindowLogMatchesMemory) { differential(ratelimit::SlidingWindowLog{7, 2s}, 12); }
// A refund writes the state at its time (include/ratelimit/README.md "Refunds"), on Redis as in memory: when the clock
// steps back, time stands at the refund, not at the newest entry left. (A random differential with backward steps
// cannot work: memory reclaims full keys and forgets their write time: include/ratelimit/README.md "Forgotten state".)
TEST(RedisRefund, SlidingWindowLogRefundRecordsItsWriteTimeAsInMemory) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  const ratelimit::SlidingWindowLog policy{.limit = 2, .window = 1s};
  ratelimit::MemoryLimiter<ratelimit::SlidingWindowLog, ManualClock> memory(policy, {}, clock);
  RedisLimiter<ratelimit::SlidingWindowLog, ManualClock> redis(
      policy, ratelimit_test::client_options(*ratelimit_test::shared_redis()), clock);
  const std::string key = "w";
  clock.set(ManualClock::time_point(10s));
  auto both = [&](auto&& op) {
    const Decision r = op(redis), m = op(memory);
    EXPECT_TRUE(same(r, m));
    return r;
  };
  both([&](auto& l) { return l.allow(key); });
  clock.advance(500ms);
  both([&](auto& l) { return l.allow(key); });
  EXPECT_EQ(both([&](auto& l) { return l.refund(key, 1); }).reset_after, 500ms);
  clock.advance(-400ms);  // steps back: t = max(now, the refund's 10.5 s)
  EXPECT_EQ(both([&](auto& l) { return l.allow(key, 0); }).reset_after, 500ms);
  EXPECT_EQ(both([&](auto& l) { return l.refund(key, 0); }).reset_after, 500ms);  // n = 0 writes nothing
  EXPECT_EQ(both([&](auto& l) { return l.peek(key); }).reset_after, 500ms);
  const Decision d = both([&](auto& l) { return l.allow(key); });  // an entry at 10.5 s
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.reset_after, 1s);
  clock.set(ManualClock::time_point(11s));  // (10 s, 1) leaves
  EXPECT_EQ(both([&](auto& l) { return l.allow(key, 0); }).reset_after, 500ms);
  // Refunding everything leaves a full key: gone on both (its write time with it).
  EXPECT_EQ(both([&](auto& l) { return l.refund(key, 5); }).remaining, 2);
  clock.advance(-800ms);
  both([&](auto& l) { return l.allow(key, 0); });
}

TEST(RedisRefund, SlidingWindowCounterMatchesMemory) { differential(ratelimit::SlidingWindowCounter{7, 2s}, 13); }
TEST(RedisRefund, GcraMatchesMemory) { differential(ratelimit::Gcra{.limit = 5, .period = 2s, .burst = 4}, 14); }
TEST(RedisRefund, TokenBucketMatchesMemory) {
  // T = 2 s / 4 = 0.5 s: whole microseconds, as include/ratelimit/README.md "Guarantees" requires for the backends to
  // agree.
  differential(ratelimit::TokenBucket{.capacity = 6, .refill_tokens = 4, .refill_period = 2s}, 15);
}

TEST(RedisRefund, HandWorkedGcraAndKeysVanishWhenFull) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  const auto options = ratelimit_test::client_options(*ratelimit_test::shared_redis());
  RedisLimiter<ratelimit::Gcra, ManualClock> l(ratelimit::Gcra{.limit = 10, .period = 10s, .burst = 5}, options, clock);
  EXPECT_EQ(l.allow("k", 3).remaining, 2);  // T = 1 s, TAT = 3 s
  clock.advance(500ms);
  EXPECT_EQ(l.refund("k", 1), (Decision{.allowed = true, .limit = 5, .remaining = 3, .reset_after = 1500ms}));
  EXPECT_EQ(l.refund("k", 9), (Decision{.allowed = true, .limit = 5, .remaining = 5}));
  auto admin = ratelimit_test::shared_redis()->admin();
  EXPECT_TRUE(ratelimit_test::scan_keys(admin, options.key_prefix + "*").empty());
  EXPECT_THROW((void)l.refund("k", -1), std::invalid_argument);
}

// Three Redis layers (no multi-key locking: consume-then-refund). Threads race; once all have
// returned, every key's consumption equals the admitted requests that named it.
TEST(RedisLayered, DeniedRequestsLeaveNothingOnceChecksReturn) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  const auto options = ratelimit_test::client_options(*ratelimit_test::shared_redis());
  auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(options.connection(), options.limiter());
  RedisLimiter<ratelimit::FixedWindow, ManualClock> ip(ratelimit::FixedWindow{40, 1h}, pool, clock);
  RedisLimiter<ratelimit::Gcra, ManualClock> key(ratelimit::Gcra{.limit = 1, .period = 1h, .burst = 50}, pool, clock);
  RedisLimiter<ratelimit::SlidingWindowLog, ManualClock> ep(ratelimit::SlidingWindowLog{25, 1h}, pool, clock);
  ratelimit::LimiterLayer<decltype(ip)> ip_layer(ip, "ip");
  ratelimit::LimiterLayer<decltype(key)> key_layer(key, "apikey");
  ratelimit::LimiterLayer<decltype(ep)> ep_layer(ep, "endpoint");
  EXPECT_EQ(ip_layer.joint()->joint_domain(), pool.get());
  const std::array<std::string, 3> ips{"a", "b", "c"};
  const std::array<std::string, 2> keys{"x", "y"};
  const std::array<std::string, 4> eps{"/1", "/2", "/3", "/4"};
  std::array<std::atomic<std::int64_t>, 3> ip_ok{};
  std::array<std::atomic<std::int64_t>, 2> key_ok{};
  std::array<std::atomic<std::int64_t>, 4> ep_ok{};
  std::atomic<int> denied{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) + 100u);
      for (int i = 0; i < 150; ++i) {
        const std::size_t a = rng() % ips.size(), b = rng() % keys.size(), c = rng() % eps.size();
        if (ratelimit::check_layers({{&ip_layer, ips[a]}, {&key_layer, keys[b]}, {&ep_layer, eps[c]}})) {
          ++ip_ok[a];
          ++key_ok[b];
          ++ep_ok[c];
        } else {
          ++denied;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_GT(denied.load(), 0);
  for (std::size_t i = 0; i < ips.size(); ++i) EXPECT_EQ(40 - ip.peek(ips[i]).remaining, ip_ok[i].load());
  for (std::size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(50 - key.peek(keys[i]).remaining, key_ok[i].load());
  for (std::size_t i = 0; i < eps.size(); ++i) EXPECT_EQ(25 - ep.peek(eps[i]).remaining, ep_ok[i].load());
}

// Limiters of one policy kind on one pool: an own prefix keeps them apart, and so do different
// parameters (the policy is the identity; the per-minute and per-day limits of a tier).
TEST(RedisLayered, OwnKeyPrefixKeepsSameKindLimitersApart) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  const auto options = ratelimit_test::client_options(*ratelimit_test::shared_redis());
  auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(options.connection(), options.limiter());
  RedisLimiter<ratelimit::FixedWindow, ManualClock> minute(ratelimit::FixedWindow{30, 1min}, pool, options.key_prefix + "m:", clock);
  RedisLimiter<ratelimit::FixedWindow, ManualClock> day(ratelimit::FixedWindow{1000, 24h}, pool, options.key_prefix + "d:", clock);
  EXPECT_EQ(minute.allow("k").remaining, 29);
  EXPECT_EQ(day.allow("k").remaining, 999);
  EXPECT_NE(minute.redis_key("k"), day.redis_key("k"));
  RedisLimiter<ratelimit::FixedWindow, ManualClock> shared(ratelimit::FixedWindow{1000, 24h}, pool, clock);
  RedisLimiter<ratelimit::FixedWindow, ManualClock> shared_too(ratelimit::FixedWindow{30, 1min}, pool, clock);
  EXPECT_EQ(shared.allow("k").remaining, 999);
  EXPECT_EQ(shared_too.allow("k").remaining, 29);  // its own key under the pool's prefix, not the day's
  EXPECT_NE(shared.redis_key("k"), shared_too.redis_key("k"));
  EXPECT_EQ(shared.peek("k").remaining, 999);
  EXPECT_THROW((RedisLimiter<ratelimit::FixedWindow, ManualClock>(ratelimit::FixedWindow{1, 1s}, pool, "a{b", clock)),
               std::invalid_argument);
}
