#pragma once

// Helpers shared by the Redis tests: unique key prefixes, limiter factories, admin queries.

#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <ratelimit/redis.hpp>

#include "redis_server.hpp"

namespace ratelimit_test {

/// A decision written out in the order of its fields (expected values in the tables).
inline ratelimit::Decision D(bool allowed, std::int64_t limit, std::int64_t remaining, std::chrono::nanoseconds retry,
                             std::chrono::nanoseconds reset) {
  return ratelimit::Decision{allowed, limit, remaining, retry, reset};
}

/// Sets `clock` to `t` after its epoch.
inline void at(ratelimit::ManualClock& clock, std::chrono::nanoseconds t) {
  clock.set(ratelimit::ManualClock::time_point(t));
}

/// A key prefix no other test (or process) uses: "rltest:<test name>:<pid>:<n>:".
inline std::string unique_prefix() {
  static std::atomic<int> counter{0};
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "global";
  for (char& c : name) {
    if (c == '{' || c == '}' || c == '/') c = '_';
  }
  return "rltest:" + name + ":" + std::to_string(::getpid()) + ":" + std::to_string(counter++) + ":";
}

/// Options for `server` with client time (the test's ManualClock), raising errors, a fresh prefix.
inline ratelimit::redis::RedisOptions client_options(
    const RedisServer& server, ratelimit::FailurePolicy on_error = ratelimit::FailurePolicy::raise) {
  ratelimit::redis::RedisOptions o;
  o.time_source = ratelimit::redis::TimeSource::client;
  o.on_error = on_error;
  o.key_prefix = unique_prefix();
  o.command_timeout = std::chrono::milliseconds(2000);
  o.connect_timeout = std::chrono::milliseconds(2000);
  return server.options(o);
}

/// `client_options(server)` for a named limiter (`LimiterOptions::name`: what `set_policy` and per-call
/// policies need).
inline ratelimit::redis::RedisOptions named_client_options(const RedisServer& server, std::string name) {
  auto o = client_options(server);
  o.name = std::move(name);
  return o;
}

/// Every key matching `pattern` (SCAN, so it also works on a busy server).
inline std::vector<std::string> scan_keys(ratelimit::redis::engine::Connection& admin, const std::string& pattern) {
  std::vector<std::string> keys;
  std::string cursor = "0";
  do {
    const auto r = admin.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) throw std::runtime_error("SCAN: bad reply");
    cursor = std::string(ratelimit::redis::engine::text(*r->element[0]));
    const redisReply* batch = r->element[1];
    for (std::size_t i = 0; i < batch->elements; ++i)
      keys.emplace_back(ratelimit::redis::engine::text(*batch->element[i]));
  } while (cursor != "0");
  return keys;
}

/// `calls + rejected_calls` of `command` in INFO commandstats (a NOSCRIPT EVALSHA is a rejected call).
inline std::int64_t command_count(ratelimit::redis::engine::Connection& admin, const std::string& command) {
  const auto r = admin.command({"INFO", "commandstats"});
  const std::string info(ratelimit::redis::engine::text(*r));
  const std::string tag = "cmdstat_" + command + ":";
  const auto at = info.find(tag);
  if (at == std::string::npos) return 0;
  const auto line = info.substr(at, info.find('\n', at) - at);
  auto field = [&line](const std::string& name) -> std::int64_t {
    const auto p = line.find(name + "=");
    return p == std::string::npos ? 0 : std::stoll(line.substr(p + name.size() + 1));
  };
  return field("calls") + field("rejected_calls");
}

/// PTTL of a key in milliseconds (-1 none, -2 absent).
inline long long pttl(ratelimit::redis::engine::Connection& admin, const std::string& key) {
  const auto r = admin.command({"PTTL", key});
  return r->type == REDIS_REPLY_INTEGER ? r->integer : -3;
}

/// Fails the test unless every key under `prefix` has a TTL; returns how many keys there were.
inline std::size_t expect_all_keys_expire(ratelimit::redis::engine::Connection& admin, const std::string& prefix) {
  const auto keys = scan_keys(admin, prefix + "*");
  for (const std::string& k : keys) EXPECT_GT(pttl(admin, k), 0) << "key without TTL: " << k;
  return keys.size();
}

// Every test that needs the server starts with this: without one it fails under CI (where the Redis
// tests must run) and skips elsewhere (the environment has already said why).
#define RATELIMIT_REQUIRE_REDIS()                                                                   \
  do {                                                                                              \
    if (::ratelimit_test::shared_redis() == nullptr) {                                              \
      if (std::getenv("CI") != nullptr) FAIL() << "CI is set but no redis-server could be started"; \
      GTEST_SKIP() << "no redis-server";                                                            \
    }                                                                                               \
  } while (0)

/// One random call on two twins (`a` decides, `b` must agree): a refund, a peek or an allow of cost 0..3 on one
/// of `keys`, each decision pair given to `expect(a_decision, b_decision, where)`; `where` starts with `prefix`.
template <class A, class B, class Expect>
void twin_random_call(A& a, B& b, std::mt19937_64& rng, std::span<const std::string> keys, const std::string& prefix,
                      Expect&& expect) {
  const std::string& k = keys[rng() % keys.size()];
  const std::int64_t cost = static_cast<std::int64_t>(rng() % 4);
  const std::string where = prefix + " key " + k;
  switch (rng() % 5) {
    case 0: expect(a.refund(k, cost), b.refund(k, cost), where + " refund"); break;
    case 1: expect(a.peek(k), b.peek(k), where + " peek"); break;
    default: expect(a.allow(k, cost), b.allow(k, cost), where + " allow"); break;
  }
}

/// A fixture with a redis-server of its own (`server_`), which a test may stop (SIGSTOP): it runs again when the
/// test ends, whatever the test did.
class OwnRedisServerTest : public testing::Test {
 protected:
  void SetUp() override {
    RATELIMIT_REQUIRE_REDIS();
    server_ = std::make_unique<RedisServer>(redis_server_binary());
  }
  void TearDown() override {
    if (server_ && server_->pid() > 0) ::kill(server_->pid(), SIGCONT);
  }
  std::unique_ptr<RedisServer> server_;
};

}  // namespace ratelimit_test
