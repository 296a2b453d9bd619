// Exact decisions of every policy on Redis, worked by hand from include/ratelimit/README.md "Policy formulas" (client
// time, ManualClock), plus peek, cost 0, denials writing nothing, TTLs, reset, allow_many and server time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::ManualClock;
using ratelimit::redis::RedisLimiter;
using ratelimit_test::client_options;
using ratelimit_test::shared_redis;

using ratelimit_test::D;
constexpr auto never = Decision::never;

using ratelimit_test::at;

// The key's value and TTL, whatever its type (DUMP serialises any value).
std::string snapshot(ratelimit::redis::engine::Connection& admin, const std::string& key) {
  const auto value = admin.command({"DUMP", key});
  const auto ttl = admin.command({"PTTL", key});
  return std::string(value->type == REDIS_REPLY_STRING ? ratelimit::redis::engine::text(*value) : "(none)") + "/" +
         std::to_string(ttl->integer > 0 ? 1 : ttl->integer);
}

class RedisLimiterTest : public testing::Test {
 protected:
  void SetUp() override { RATELIMIT_REQUIRE_REDIS(); }
};

// Two-argument commands: written `{{"ECHO", "x"}}` C++20 would build one string_view from the two
// pointers (the iterator-pair constructor); single braces select the argument list.
TEST_F(RedisLimiterTest, ConnectionSendsEveryArgument) {
  auto admin = shared_redis()->admin();
  EXPECT_EQ(ratelimit::redis::engine::text(*admin.command({"ECHO", "hello"})), "hello");
  const std::string binary("a\0b{}", 5);
  const auto r = admin.command({"ECHO", binary});
  EXPECT_EQ(ratelimit::redis::engine::text(*r), binary);
  const auto err = admin.command({"NOSUCHCOMMAND", "x"});
  EXPECT_TRUE(ratelimit::redis::engine::is_error(*err, "ERR"));
  EXPECT_FALSE(admin.broken());
}

TEST_F(RedisLimiterTest, FixedWindow) {
  ManualClock clock;
  RedisLimiter l(ratelimit::FixedWindow{.limit = 3, .window = 10s}, client_options(*shared_redis()), clock);
  at(clock, 1s);  // window [0, 10s), 9 s left
  EXPECT_EQ(l.allow("k"), D(true, 3, 2, 0s, 9s));
  EXPECT_EQ(l.allow("k"), D(true, 3, 1, 0s, 9s));
  EXPECT_EQ(l.allow("k"), D(true, 3, 0, 0s, 9s));
  EXPECT_EQ(l.allow("k"), D(false, 3, 0, 9s, 9s));
  EXPECT_EQ(l.allow("k", 4), D(false, 3, 0, never, 9s));
  at(clock, 10s);  // next window
  EXPECT_EQ(l.allow("k"), D(true, 3, 2, 0s, 10s));
  EXPECT_EQ(l.allow("k", 0), D(true, 3, 2, 0s, 10s));
}

TEST_F(RedisLimiterTest, SlidingWindowLog) {
  ManualClock clock;
  const auto opts = client_options(*shared_redis());
  RedisLimiter l(ratelimit::SlidingWindowLog{.limit = 3, .window = 10s}, opts, clock);
  EXPECT_EQ(l.allow("k"), D(true, 3, 2, 0s, 10s));
  at(clock, 2s);
  EXPECT_EQ(l.allow("k", 2), D(true, 3, 0, 0s, 10s));
  at(clock, 5s);  // need 1: the entry at 0 leaves at 10 s; the newest (2 s) at 12 s
  EXPECT_EQ(l.allow("k"), D(false, 3, 0, 5s, 7s));
  at(clock, 10s);  // the entry at 0 is out of (0, 10]
  EXPECT_EQ(l.allow("k"), D(true, 3, 0, 0s, 10s));
  at(clock, 11s);  // entries 2 s (cost 2) and 10 s: need 1, the 2 s entry frees it at 12 s
  EXPECT_EQ(l.allow("k"), D(false, 3, 0, 1s, 9s));
  at(clock, 20s);  // two requests at one time are one member with cost 2
  EXPECT_EQ(l.allow("k"), D(true, 3, 2, 0s, 10s));
  EXPECT_EQ(l.allow("k"), D(true, 3, 1, 0s, 10s));
  auto admin = shared_redis()->admin();
  // The member is struct.pack("<dd", timestamp, cost).
  const auto members = admin.command({"EVAL",
                                      "local m = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES') "
                                      "local t, c = struct.unpack('<dd', m[1]) return {#m, t, c, tonumber(m[2])}",
                                      "1", l.redis_key("k")});
  ASSERT_EQ(members->elements, 4u);
  EXPECT_EQ(members->element[0]->integer, 2);  // one member and its score
  EXPECT_EQ(members->element[1]->integer, 20000000);
  EXPECT_EQ(members->element[2]->integer, 2);
  EXPECT_EQ(members->element[3]->integer, 20000000);
}

TEST_F(RedisLimiterTest, SlidingWindowCounter) {
  ManualClock clock;
  RedisLimiter l(ratelimit::SlidingWindowCounter{.limit = 10, .window = 10s}, client_options(*shared_redis()), clock);
  at(clock, 1s);
  EXPECT_EQ(l.allow("k", 10), D(true, 10, 0, 0s, 19s));
  at(clock, 15s);  // r = 5 s: prev 10 weighs 10 * 5/10 = 5, room 5
  EXPECT_EQ(l.allow("k"), D(true, 10, 4, 0s, 15s));
  // 5 more: 50 + 6*10 > 100. a = 10-1-5 = 4, r1 = 10 - 4*10/10 = 6 s, wait 6 - 5 = 1 s.
  EXPECT_EQ(l.allow("k", 5), D(false, 10, 4, 1s, 15s));
  EXPECT_EQ(l.allow("k", 11), D(false, 10, 4, never, 15s));
}

TEST_F(RedisLimiterTest, GcraAndClockSteppingBack) {
  ManualClock clock;
  RedisLimiter l(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 3}, client_options(*shared_redis()), clock);
  // T = 100 ms, tau = 300 ms.
  EXPECT_EQ(l.allow("k"), D(true, 3, 2, 0s, 100ms));
  EXPECT_EQ(l.allow("k"), D(true, 3, 1, 0s, 200ms));
  EXPECT_EQ(l.allow("k"), D(true, 3, 0, 0s, 300ms));
  EXPECT_EQ(l.allow("k"), D(false, 3, 0, 100ms, 300ms));
  EXPECT_EQ(l.allow("k", 4), D(false, 3, 0, never, 300ms));
  at(clock, 150ms);  // backlog 150 ms: one fits
  EXPECT_EQ(l.allow("k"), D(true, 3, 0, 0s, 250ms));
  at(clock, 50ms);  // before the latest write (150 ms): time stands still there
  EXPECT_EQ(l.peek("k"), D(false, 3, 0, 50ms, 250ms));
  EXPECT_EQ(l.allow("k"), D(false, 3, 0, 50ms, 250ms));
}

TEST_F(RedisLimiterTest, TokenBucket) {
  ManualClock clock;
  RedisLimiter l(ratelimit::TokenBucket{.capacity = 2, .refill_tokens = 1, .refill_period = 500ms},
                 client_options(*shared_redis()), clock);
  EXPECT_EQ(l.allow("k"), D(true, 2, 1, 0s, 500ms));
  EXPECT_EQ(l.allow("k"), D(true, 2, 0, 0s, 1s));
  EXPECT_EQ(l.allow("k"), D(false, 2, 0, 500ms, 1s));
  at(clock, 500ms);
  EXPECT_EQ(l.allow("k"), D(true, 2, 0, 0s, 1s));
}

TEST_F(RedisLimiterTest, PeekAndCostZeroWriteNothing) {
  ManualClock clock;
  const auto opts = client_options(*shared_redis());
  RedisLimiter l(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 3}, opts, clock);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(l.peek("k"), D(true, 3, 3, 0s, 0s));
  EXPECT_EQ(l.allow("k", 0), D(true, 3, 3, 0s, 0s));
  auto admin = shared_redis()->admin();
  EXPECT_EQ(ratelimit_test::scan_keys(admin, opts.key_prefix + "*").size(), 0u);
}

TEST_F(RedisLimiterTest, DenialsWriteNothing) {
  ManualClock clock;
  RedisLimiter l(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 1}, client_options(*shared_redis()), clock);
  auto admin = shared_redis()->admin();
  EXPECT_TRUE(l.allow("k").allowed);
  const std::string before = snapshot(admin, l.redis_key("k"));
  at(clock, 30ms);
  EXPECT_EQ(l.allow("k"), D(false, 1, 0, 70ms, 70ms));
  EXPECT_EQ(l.allow("k", 1), D(false, 1, 0, 70ms, 70ms));
  EXPECT_EQ(snapshot(admin, l.redis_key("k")), before);
  // TAT 100,000 us and latest write 0, as two little-endian doubles.
  const auto state =
      admin.command({"EVAL", "return {struct.unpack('<dd', redis.call('GET', KEYS[1]))}", "1", l.redis_key("k")});
  ASSERT_GE(state->elements, 2u);
  EXPECT_EQ(state->element[0]->integer, 100000);
  EXPECT_EQ(state->element[1]->integer, 0);
}

TEST_F(RedisLimiterTest, TtlIsResetAfterPlusOneSecond) {
  ManualClock clock;
  const auto opts = client_options(*shared_redis());
  auto admin = shared_redis()->admin();
  RedisLimiter gcra(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 3}, opts, clock);
  RedisLimiter swl(ratelimit::SlidingWindowLog{.limit = 3, .window = 2500ms}, opts, clock);
  RedisLimiter swc(ratelimit::SlidingWindowCounter{.limit = 3, .window = 2s}, opts, clock);
  const auto check = [&](const Decision& d, const std::string& key) {
    const long long want = std::chrono::ceil<std::chrono::milliseconds>(d.reset_after).count() + 1000;
    const long long ttl = ratelimit_test::pttl(admin, key);
    EXPECT_LE(ttl, want) << key;
    EXPECT_GE(ttl, want - 200) << key;  // only the time since the script ran has passed
  };
  at(clock, 700ms);
  check(gcra.allow("k", 3), gcra.redis_key("k"));  // reset 300 ms
  check(swl.allow("k"), swl.redis_key("k"));       // reset 2.5 s
  check(swc.allow("k"), swc.redis_key("k"));       // reset 2W - r = 3.3 s
  EXPECT_EQ(ratelimit_test::expect_all_keys_expire(admin, opts.key_prefix), 3u);
}

// The window policies set the TTL with the first write of a window (its end does not move) and keep it
// for that window's later writes; the next window's first write sets it again (include/ratelimit/redis/README.md "Redis
// backend").
TEST_F(RedisLimiterTest, WindowTtlIsSetOncePerWindow) {
  ManualClock clock;
  const auto opts = client_options(*shared_redis());
  auto admin = shared_redis()->admin();
  RedisLimiter fw(ratelimit::FixedWindow{.limit = 5, .window = 1min}, opts, clock);
  RedisLimiter swc(ratelimit::SlidingWindowCounter{.limit = 5, .window = 1min}, opts, clock);
  const auto ttl_near = [&](const std::string& key, long long want) {
    const long long ttl = ratelimit_test::pttl(admin, key);
    EXPECT_LE(ttl, want) << key;
    EXPECT_GE(ttl, want - 200) << key;
  };
  EXPECT_EQ(fw.allow("k").reset_after, 60s);
  EXPECT_EQ(swc.allow("k").reset_after, 120s);
  ttl_near(fw.redis_key("k"), 61000);
  ttl_near(swc.redis_key("k"), 121000);
  at(clock, 30s);  // same window: the stored deadline stands (only real time runs it down)
  EXPECT_EQ(fw.allow("k").reset_after, 30s);
  EXPECT_EQ(swc.allow("k").reset_after, 90s);
  ttl_near(fw.redis_key("k"), 61000);
  ttl_near(swc.redis_key("k"), 121000);
  at(clock, 61s);  // the next window: its first write sets the TTL again
  EXPECT_EQ(fw.allow("k").reset_after, 59s);
  EXPECT_EQ(swc.allow("k").reset_after, 119s);
  ttl_near(fw.redis_key("k"), 60000);
  ttl_near(swc.redis_key("k"), 120000);
}

TEST_F(RedisLimiterTest, ResetForgetsTheKey) {
  ManualClock clock;
  RedisLimiter l(ratelimit::FixedWindow{.limit = 1, .window = 1min}, client_options(*shared_redis()), clock);
  EXPECT_TRUE(l.allow("k").allowed);
  EXPECT_FALSE(l.allow("k").allowed);
  EXPECT_TRUE(l.reset("k"));
  EXPECT_EQ(l.allow("k"), D(true, 1, 0, 0s, 1min));
}

TEST_F(RedisLimiterTest, AllowManyDecidesInOrder) {
  ManualClock clock;
  RedisLimiter l(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 3}, client_options(*shared_redis()), clock);
  const ratelimit::redis::Request batch[] = {{"a", 1}, {"a", 1}, {"b", 2}, {"a", 2}, {"b", 0}};
  const auto d = l.allow_many(batch);
  ASSERT_EQ(d.size(), 5u);
  EXPECT_EQ(d[0], D(true, 3, 2, 0s, 100ms));
  EXPECT_EQ(d[1], D(true, 3, 1, 0s, 200ms));
  EXPECT_EQ(d[2], D(true, 3, 1, 0s, 200ms));
  EXPECT_EQ(d[3], D(false, 3, 1, 100ms, 200ms));  // backlog 200 + 200 > 300
  EXPECT_EQ(d[4], D(true, 3, 1, 0s, 200ms));
  EXPECT_TRUE(l.allow_many({}).empty());
}

TEST_F(RedisLimiterTest, ServerTimeSmoke) {
  auto opts = client_options(*shared_redis());
  opts.time_source = ratelimit::redis::TimeSource::server;
  RedisLimiter gcra(ratelimit::Gcra{.limit = 5, .period = 1s, .burst = 5}, opts);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(gcra.allow("k").allowed) << i;
  const Decision d = gcra.allow("k");
  EXPECT_FALSE(d.allowed);
  EXPECT_GT(d.retry_after, 0ms);
  EXPECT_LE(d.retry_after, 200ms);
  EXPECT_GT(d.reset_after, 800ms);
  EXPECT_LE(d.reset_after, 1s);

  RedisLimiter fw(ratelimit::FixedWindow{.limit = 2, .window = 1h}, opts);
  EXPECT_TRUE(fw.allow("k").allowed);
  EXPECT_TRUE(fw.allow("k").allowed);
  const Decision f = fw.allow("k");
  EXPECT_FALSE(f.allowed);
  EXPECT_GT(f.retry_after, 0s);
  EXPECT_LE(f.retry_after, 1h);
  EXPECT_EQ(f.retry_after, f.reset_after);
  auto admin = shared_redis()->admin();
  EXPECT_EQ(ratelimit_test::expect_all_keys_expire(admin, opts.key_prefix), 2u);
  EXPECT_EQ(gcra.stats().failures + fw.stats().failures, 0u);
}

// Threads share one limiter: more threads than pooled connections (they wait for one), exact limit.
TEST_F(RedisLimiterTest, ThreadsShareThePoolAndTheLimitExactly) {
  ManualClock clock;
  auto opts = client_options(*shared_redis());
  opts.pool_size = 2;
  RedisLimiter l(ratelimit::SlidingWindowLog{.limit = 300, .window = 1h}, opts, clock);
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) admitted += l.allow("shared") ? 1 : 0;
      const ratelimit::redis::Request batch[] = {{"shared", 1}, {"other", 1}};
      for (int i = 0; i < 10; ++i) admitted += l.allow_many(batch)[0].allowed ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 300);
  EXPECT_EQ(l.stats().failures, 0u);
  EXPECT_LE(l.stats().connects, 2u);
}

}  // namespace
