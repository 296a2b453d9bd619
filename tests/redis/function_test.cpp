// Scripts as Redis Functions (include/ratelimit/redis/README.md "Redis Functions"): FCALL of one library loaded on
// first use, loaded again when the server lost it, and EVALSHA where the server refuses Functions (ACL without +fcall
// or +function, a server without the command), for single checks, batches, layered checks and async calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <ratelimit/layers.hpp>
#include <ratelimit/redis.hpp>

#include "cluster_support.hpp"
#include "test_support.hpp"

namespace {

using ratelimit::Decision;
using ratelimit::FixedWindow;
using ratelimit::ManualClock;
using ratelimit::redis::RedisLimiter;
using ratelimit_test::client_options;
using namespace std::chrono_literals;

// `calls` of `command` in INFO commandstats (0 when it never ran).
long long calls_of(ratelimit::redis::engine::Connection& admin, const std::string& command) {
  const std::string info(ratelimit::redis::engine::text(*admin.command({"INFO", "commandstats"})));
  const auto at = info.find("cmdstat_" + command + ":calls=");
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + command.size() + 15));
}

// Two checks with `o` (use_functions on) decide as usual, without a failure, and the route has gone back
// to EVALSHA.
void expect_checks_fall_back(const ratelimit::redis::RedisOptions& o) {
  ManualClock clock;
  RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 5, .window = 1h}, o, clock);
  EXPECT_EQ(l.allow("k").remaining, 4);
  EXPECT_EQ(l.allow("k").remaining, 3);
  EXPECT_EQ(l.stats().failures, 0u);
  EXPECT_FALSE(l.route()->functions_usable());
}

// True when the server holds this build's library.
bool library_loaded(ratelimit::redis::engine::Connection& admin) {
  const auto r =
      admin.command({"FUNCTION", "LIST", "LIBRARYNAME", std::string(ratelimit::redis::detail::kFunctionLibrary)});
  return r->type == REDIS_REPLY_ARRAY && r->elements == 1;
}

class FunctionScripts : public testing::Test {
 protected:
  void SetUp() override {
    RATELIMIT_REQUIRE_REDIS();
    server_ = std::make_unique<ratelimit_test::RedisServer>(ratelimit_test::redis_server_binary());
  }
  ratelimit::redis::RedisOptions options(ratelimit::FailurePolicy on_error = ratelimit::FailurePolicy::raise) {
    auto o = client_options(*server_, on_error);
    o.use_functions = true;
    return o;
  }
  // `options()` as the ACL user `user` (password "pw"), allowed the keys of its prefix and `commands`.
  ratelimit::redis::RedisOptions options_as(const std::string& user, const std::vector<std::string>& commands) {
    auto o = options();
    std::vector<std::string> acl{"ACL", "SETUSER", user, "reset", "on", ">pw", "~" + o.key_prefix + "*"};
    acl.insert(acl.end(), commands.begin(), commands.end());
    auto admin = server_->admin();
    const std::vector<std::string_view> args(acl.begin(), acl.end());
    EXPECT_EQ(ratelimit::redis::engine::text(*admin.command(args)), "OK");
    o.user = user;
    o.password = "pw";
    return o;
  }
  std::unique_ptr<ratelimit_test::RedisServer> server_;
};

TEST_F(FunctionScripts, ChecksGoAsFcallAndTheLibraryLoadsOnce) {
  auto admin = server_->admin();
  ManualClock clock;
  RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 5, .window = 1h}, options(), clock);
  EXPECT_FALSE(library_loaded(admin));
  EXPECT_EQ(l.allow("k").remaining, 4);
  EXPECT_TRUE(library_loaded(admin));
  EXPECT_EQ(l.allow("k").remaining, 3);
  EXPECT_EQ(l.peek("k").remaining, 3);
  EXPECT_EQ(l.refund("k", 1).remaining, 4);
  EXPECT_EQ(calls_of(admin, "fcall"), 5);  // the first one found no function (a failed call), then it ran
  EXPECT_EQ(calls_of(admin, "evalsha"), 0);
  EXPECT_EQ(calls_of(admin, "eval"), 0);
  EXPECT_EQ(l.stats().script_reloads, 1u);
  EXPECT_EQ(l.stats().failures, 0u);
}

TEST_F(FunctionScripts, AFlushedLibraryIsLoadedAgainAndBatchesKeepEachKeysOrder) {
  auto admin = server_->admin();
  ManualClock clock;
  RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 3, .window = 1h}, options(), clock);
  EXPECT_EQ(l.allow("a").remaining, 2);
  ASSERT_EQ(ratelimit::redis::engine::text(*admin.command({"FUNCTION", "FLUSH"})), "OK");
  // Repeated keys: one round per repetition, each answered before the next is sent.
  const std::vector<ratelimit::redis::Request> batch{{"a", 1}, {"b", 1}, {"a", 1}, {"a", 1}, {"b", 1}};
  const std::vector<Decision> d = l.allow_many(batch);
  ASSERT_EQ(d.size(), 5u);
  EXPECT_EQ(d[0].remaining, 1);
  EXPECT_EQ(d[1].remaining, 2);
  EXPECT_EQ(d[2].remaining, 0);
  EXPECT_FALSE(d[3].allowed);
  EXPECT_EQ(d[4].remaining, 1);
  EXPECT_TRUE(library_loaded(admin));
  EXPECT_EQ(l.stats().failures, 0u);
  EXPECT_EQ(calls_of(admin, "evalsha"), 0);
}

TEST_F(FunctionScripts, LayeredChecksAndAsyncCallsGoAsFcall) {
  auto admin = server_->admin();
  ManualClock clock;
  const auto o = options();
  // Outlive the pool, whose end completes the async calls a failed wait left.
  std::mutex m;
  std::condition_variable cv;
  int done = 0;
  std::vector<std::int64_t> remaining(3, -1);
  auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(o.connection(), o.limiter());
  RedisLimiter<FixedWindow, ManualClock> minute(FixedWindow{.limit = 2, .window = 1min}, pool, clock);
  RedisLimiter<ratelimit::Gcra, ManualClock> burst(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 5}, pool, clock);
  ratelimit::LimiterLayer<decltype(minute)> a(minute, "minute");
  ratelimit::LimiterLayer<decltype(burst)> b(burst, "burst");
  for (int i = 0; i < 3; ++i) {
    const std::array<ratelimit::LayerRequest, 2> req{ratelimit::LayerRequest{&a, "u", 1},
                                                     ratelimit::LayerRequest{&b, "u", 1}};
    EXPECT_EQ(ratelimit::check_layers(req).decision.allowed, i < 2) << i;
  }
  EXPECT_EQ(burst.peek("u").remaining, 3);  // the denied third check kept nothing
  ASSERT_EQ(ratelimit::redis::engine::text(*admin.command({"FUNCTION", "FLUSH"})), "OK");
  for (int i = 0; i < 3; ++i) {
    burst.allow_async("v", 1, 5s, [&, i](std::exception_ptr e, Decision d) {
      const std::lock_guard lock(m);
      if (!e) remaining[static_cast<std::size_t>(i)] = d.remaining;
      ++done;
      cv.notify_one();
    });
  }
  std::unique_lock lock(m);
  ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return done == 3; }));
  std::sort(remaining.begin(), remaining.end());
  EXPECT_EQ(remaining, (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_TRUE(library_loaded(admin));
  EXPECT_EQ(calls_of(admin, "evalsha"), 0);
  EXPECT_EQ(calls_of(admin, "eval"), 0);
}

// A user allowed the scripts' commands and EVALSHA/EVAL, but neither FCALL nor FUNCTION: checks work,
// as EVALSHA, from the first call on.
TEST_F(FunctionScripts, UserWithoutFcallFallsBackToEvalsha) {
  auto admin = server_->admin();
  const auto o = options_as("rl_nofcall", {"+evalsha", "+eval", "+get", "+set", "+del"});
  expect_checks_fall_back(o);
  EXPECT_EQ(calls_of(admin, "evalsha"), 2);  // the first met NOSCRIPT (then EVAL), the second ran
  EXPECT_FALSE(library_loaded(admin));
}

// FCALL allowed but not FUNCTION LOAD (the library is not there): the first check loads nothing and goes
// as EVALSHA; once an administrator loads the library, a new route calls it without loading anything.
TEST_F(FunctionScripts, UserWhoMayNotLoadFallsBackUntilTheLibraryIsThere) {
  auto admin = server_->admin();
  const auto o = options_as("rl_noload", {"+evalsha", "+eval", "+fcall", "+get", "+set", "+del"});
  ManualClock clock;
  {
    RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 5, .window = 1h}, o, clock);
    EXPECT_EQ(l.allow("k").remaining, 4);
    EXPECT_EQ(l.stats().failures, 0u);
    EXPECT_FALSE(l.route()->functions_usable());
    EXPECT_FALSE(library_loaded(admin));
  }
  const auto loaded = admin.command({"FUNCTION", "LOAD", ratelimit::redis::detail::function_library_code()});
  ASSERT_EQ(ratelimit::redis::engine::text(*loaded), ratelimit::redis::detail::kFunctionLibrary);
  admin.command({"CONFIG", "RESETSTAT"});
  RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 5, .window = 1h}, o, clock);
  EXPECT_EQ(l.allow("k").remaining, 3);
  EXPECT_TRUE(l.route()->functions_usable());
  EXPECT_EQ(calls_of(admin, "fcall"), 1);
  EXPECT_EQ(calls_of(admin, "evalsha"), 0);
}

// Redis Cluster: each master gets the library on its first FCALL (FUNCTION LOAD goes where the call went).
TEST(FunctionCluster, EveryMasterLoadsTheLibraryAndChecksGoAsFcall) {
  RATELIMIT_REQUIRE_CLUSTER();
  auto& cluster = *ratelimit_test::shared_cluster();
  auto o = ratelimit_test::cluster_client_options(cluster);
  o.use_functions = true;
  const std::vector<int> masters = cluster.master_ports();
  for (const int port : masters) {
    auto admin = ratelimit_test::RedisCluster::admin(port);
    (void)admin.command({"FUNCTION", "FLUSH"});
    (void)admin.command({"CONFIG", "RESETSTAT"});
  }
  ManualClock clock;
  RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 1, .window = 1h}, o, clock);
  std::vector<ratelimit::redis::Request> batch;
  std::vector<std::string> keys;
  for (int i = 0; i < 60; ++i) keys.push_back("user:" + std::to_string(i));
  for (const auto& k : keys) batch.push_back({k, 1});
  for (const Decision& d : l.allow_many(batch)) EXPECT_TRUE(d.allowed);
  for (const auto& k : keys) EXPECT_FALSE(l.allow(k).allowed) << k;
  EXPECT_EQ(l.stats().failures, 0u);
  for (const int port : masters) {
    auto admin = ratelimit_test::RedisCluster::admin(port);
    EXPECT_TRUE(library_loaded(admin)) << port;
    EXPECT_GT(calls_of(admin, "fcall"), 0) << port;
    EXPECT_EQ(calls_of(admin, "evalsha"), 0) << port;
  }
}

// A server without the FCALL command (Redis 6, or renamed away): EVALSHA.
TEST(FunctionFallback, ServerWithoutFcallFallsBackToEvalsha) {
  RATELIMIT_REQUIRE_REDIS();
  ratelimit_test::RedisServer server(ratelimit_test::redis_server_binary(), 0, true,
                                     {"--rename-command", "FCALL", "\"\""});
  auto o = client_options(server);
  o.use_functions = true;
  expect_checks_fall_back(o);
}

}  // namespace
