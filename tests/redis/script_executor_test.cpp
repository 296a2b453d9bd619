// How scripts reach Redis (include/ratelimit/redis/README.md "Redis backend", failures): EVALSHA, and one EVAL per
// NOSCRIPT, counted once per NOSCRIPT answered; batches keep each key's order while the script cache is flushed under
// them; a locked-down server (no SCRIPT command or no script|load permission) still works.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::FixedWindow;
using ratelimit::ManualClock;
using ratelimit::redis::RedisLimiter;
using ratelimit_test::client_options;
using ratelimit_test::shared_redis;

class ScriptExecutorTest : public testing::Test {
 protected:
  void SetUp() override { RATELIMIT_REQUIRE_REDIS(); }
};

// One reload per NOSCRIPT answered, on a single server as on a cluster.
TEST_F(ScriptExecutorTest, ReloadsCountEveryNoscript) {
  ManualClock clock;
  RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 100, .window = 1h}, client_options(*shared_redis()),
                                           clock);
  std::vector<std::string> keys;
  for (int i = 0; i < 10; ++i) keys.push_back(std::string("k").append(std::to_string(i)));
  std::vector<ratelimit::redis::Request> batch;
  for (const auto& k : keys) batch.push_back({k, 1});
  for (const Decision& d : l.allow_many(batch)) ASSERT_TRUE(d.allowed);
  auto admin = shared_redis()->admin();
  ASSERT_EQ(ratelimit::redis::engine::text(*admin.command({"SCRIPT", "FLUSH"})), "OK");
  const auto before = l.stats().script_reloads;
  for (const Decision& d : l.allow_many(batch)) ASSERT_EQ(d.remaining, 98);
  EXPECT_EQ(l.stats().script_reloads - before, 10u);
  ASSERT_EQ(ratelimit::redis::engine::text(*admin.command({"SCRIPT", "FLUSH"})), "OK");
  EXPECT_EQ(l.allow(keys[0]).remaining, 97);
  EXPECT_EQ(l.stats().script_reloads - before, 11u);
  EXPECT_EQ(l.stats().failures, 0u);
}

// Pairs [k cost 3, k cost 1] on FixedWindow{3, 1h}: in order, the 3 is admitted and the 1 denied. While
// another connection flushes the script cache and a second limiter keeps re-caching it, no pair may
// come out reversed (a NOSCRIPT'd first request re-sent after the second already ran).
TEST_F(ScriptExecutorTest, BatchKeepsEachKeysOrderUnderScriptFlush) {
  ManualClock clock;
  const auto o = client_options(*shared_redis());
  RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 3, .window = 1h}, o, clock);
  RedisLimiter<FixedWindow, ManualClock> recacher(FixedWindow{.limit = 1'000'000'000, .window = 1h}, o, clock);
  std::atomic<bool> stop{false};
  std::thread flusher([&] {
    auto admin = shared_redis()->admin();
    while (!stop.load()) {
      (void)admin.command({"SCRIPT", "FLUSH"});
      std::this_thread::sleep_for(2ms);
    }
  });
  std::thread caching([&] {
    while (!stop.load()) (void)recacher.allow("other");
  });
  constexpr int kPairs = 2000;  // 4,000 requests per batch
  int reversed = 0;
  int rounds = 0;
  const auto deadline = std::chrono::steady_clock::now() + 4s;
  for (int round = 0; round < 40 && std::chrono::steady_clock::now() < deadline; ++round, ++rounds) {
    std::vector<std::string> keys;
    keys.reserve(kPairs);
    for (int i = 0; i < kPairs; ++i) keys.push_back("r" + std::to_string(round) + ":" + std::to_string(i));
    std::vector<ratelimit::redis::Request> batch;
    for (const auto& k : keys) {
      batch.push_back({k, 3});
      batch.push_back({k, 1});
    }
    const auto out = l.allow_many(batch);
    for (std::size_t i = 0; i < out.size(); i += 2) {
      if (!out[i].allowed || out[i + 1].allowed) ++reversed;
    }
  }
  stop = true;
  flusher.join();
  caching.join();
  EXPECT_EQ(reversed, 0) << "of " << rounds * kPairs << " pairs";
  EXPECT_EQ(l.stats().failures, 0u);
  EXPECT_GT(l.stats().script_reloads, 0u) << "the flushes never hit a batch: the test proves nothing";
}

// A user allowed EVALSHA and EVAL (and the scripts' commands) but not SCRIPT: every check works, a
// NOSCRIPT is answered by EVAL and counted.
TEST_F(ScriptExecutorTest, UserWithoutScriptLoadFallsBackToEval) {
  auto admin = shared_redis()->admin();
  auto o = client_options(*shared_redis());
  const std::string user = "rl_noload_" + std::to_string(::getpid());
  const std::string key_pattern = "~" + o.key_prefix + "*";
  const auto setuser =
      admin.command({"ACL", "SETUSER", user, "reset", "on", ">secret", key_pattern, "+evalsha", "+eval", "+pexpire",
                     "+del", "+get", "+set", "+zrange", "+zadd", "+zrem", "+zremrangebyscore", "+time", "+ping"});
  ASSERT_EQ(ratelimit::redis::engine::text(*setuser), "OK");
  o.user = user;
  o.password = "secret";
  {
    ManualClock clock;
    RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 5, .window = 1h}, o, clock);
    ASSERT_EQ(ratelimit::redis::engine::text(*admin.command({"SCRIPT", "FLUSH"})), "OK");
    EXPECT_EQ(l.allow("k").remaining, 4);
    EXPECT_EQ(l.allow("k").remaining, 3);
    std::vector<ratelimit::redis::Request> batch{{"a", 1}, {"b", 1}};
    ASSERT_EQ(ratelimit::redis::engine::text(*admin.command({"SCRIPT", "FLUSH"})), "OK");
    for (const Decision& d : l.allow_many(batch)) EXPECT_EQ(d.remaining, 4);
    EXPECT_EQ(l.stats().failures, 0u);
    EXPECT_EQ(l.stats().script_reloads, 3u);
  }
  (void)admin.command({"ACL", "DELUSER", user});
}

// `rename-command SCRIPT ""` (managed Redis services do this): checks work without SCRIPT LOAD.
TEST_F(ScriptExecutorTest, RenamedScriptCommandFallsBackToEval) {
  ratelimit_test::RedisServer server(ratelimit_test::redis_server_binary(), 0, true,
                                     {"--rename-command", "SCRIPT", "\"\""});
  ManualClock clock;
  RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 5, .window = 1h}, client_options(server), clock);
  EXPECT_EQ(l.allow("k").remaining, 4);
  EXPECT_EQ(l.allow("k").remaining, 3);
  EXPECT_EQ(l.stats().failures, 0u);
  EXPECT_EQ(l.stats().script_reloads, 1u);
}

}  // namespace
