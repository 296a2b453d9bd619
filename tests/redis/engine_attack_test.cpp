// Attacks on the Redis engine's promises (include/ratelimit/redis/README.md "Redis engine", "Failures"): each call
// ends by its own deadline whoever drives the connection, its completion runs exactly once, and nothing is counted
// twice. Real redis-server processes, with the socket-level FaultProxy (tests/support/fault_proxy.hpp) in front.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <string_view>
#include <utility>
#include <vector>

#include <ratelimit/redis.hpp>

#include "../support/fault_proxy.hpp"
#include "cluster_support.hpp"
#include "proxied_cluster.hpp"
#include "../support/sanitizers.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using ratelimit::CheckResult;
using ratelimit::FailurePolicy;
using ratelimit::ManualClock;
using ratelimit::Outcome;
using ratelimit::redis::RedisLimiter;
using ratelimit::redis::RedisOptions;
using ratelimit_test::Direction;
using ratelimit_test::FaultProxy;
using ratelimit_test::FaultSpec;
using Limiter = RedisLimiter<ratelimit::Gcra, ManualClock>;

const ratelimit::Gcra kBig{.limit = 1000, .period = 1s, .burst = 1'000'000};
constexpr auto kSlack = ratelimit_test::kSchedulingSlack;

long long ms(Steady::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

/// Waits (bounded) until the proxy has forwarded more than `before` bytes towards the server.
void await_bytes_to_server(const FaultProxy& proxy, std::int64_t before) {
  const auto until = Steady::now() + 3s;
  while (proxy.bytes(Direction::to_server) <= before && Steady::now() < until) std::this_thread::sleep_for(1ms);
}

/// An async check of "k" with a 50 ms deadline: when its callback came, and how many times.
struct ShortCall {
  std::shared_ptr<std::promise<Steady::duration>> done = std::make_shared<std::promise<Steady::duration>>();
  std::shared_ptr<std::atomic<int>> runs = std::make_shared<std::atomic<int>>(0);
  /// Its callback came by its deadline (`why`: what it would have waited for).
  void expect_by_deadline(const char* why) const {
    auto f = done->get_future();
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "no callback";
    const auto took = f.get();
    EXPECT_LE(took, 50ms + kSlack) << "the async call's 50 ms deadline ended after " << ms(took) << " ms: " << why;
  }
  /// No second callback came (given a little time to).
  void expect_once() const {
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(runs->load(), 1);
  }
};
ShortCall short_async_call(Limiter& l) {
  ShortCall c;
  const auto t0 = Steady::now();
  l.check_async("k", 1, 50ms, [done = c.done, runs = c.runs, t0](std::exception_ptr, CheckResult) {
    if (runs->fetch_add(1) == 0) done->set_value(Steady::now() - t0);
  });
  return c;
}

class EngineAttack : public testing::Test {
 protected:
  void SetUp() override {
    RATELIMIT_REQUIRE_REDIS();
    proxy_ = std::make_unique<FaultProxy>("127.0.0.1", ratelimit_test::shared_redis()->port());
    options_ = ratelimit_test::client_options(*ratelimit_test::shared_redis(), FailurePolicy::fail_open);
    options_.port = proxy_->port();
    options_.pool_size = 1;
  }
  void TearDown() override {
    if (proxy_) proxy_->clear();
  }

  ManualClock clock_;
  std::unique_ptr<FaultProxy> proxy_;
  RedisOptions options_;
};

// A sync caller that drives the shared connection blocks in its read until its own reply comes (or
// command_timeout). An async call queued behind it with a short deadline must still end by that deadline
// (PipelineOp::deadline), not when the sync caller's slow reply finally arrives.
TEST_F(EngineAttack, AsyncDeadlineEndsWhileSyncCallerDrivesSlowRead) {
  options_.command_timeout = 2000ms;
  Limiter l(kBig, options_, clock_);
  ASSERT_EQ(l.check("k").outcome, Outcome::decided) << "the healthy proxy did not forward";

  proxy_->set(Direction::to_client, FaultSpec::delay(1200ms));
  const std::int64_t before = proxy_->bytes(Direction::to_server);
  auto sync = std::async(std::launch::async, [&l] { return l.check("slow"); });
  await_bytes_to_server(*proxy_, before);  // the sync caller wrote and now waits in its read

  const ShortCall call = short_async_call(l);
  call.expect_by_deadline("it waited for the sync caller's slow reply");
  (void)sync.get();
  call.expect_once();
}

// The same with the I/O thread driving: it polls for an async call's slow reply until that call's deadline (2 s);
// an async call submitted meanwhile with a 50 ms deadline must still end by it.
TEST_F(EngineAttack, AsyncDeadlineEndsWhileIoThreadPollsForSlowReply) {
  options_.command_timeout = 2000ms;
  Limiter l(kBig, options_, clock_);
  ASSERT_EQ(l.check("k").outcome, Outcome::decided) << "the healthy proxy did not forward";

  proxy_->set(Direction::to_client, FaultSpec::delay(1200ms));
  const std::int64_t before = proxy_->bytes(Direction::to_server);
  std::promise<void> slow_done;
  l.check_async("slow", 1, 2000ms, [&slow_done](std::exception_ptr, CheckResult) { slow_done.set_value(); });
  await_bytes_to_server(*proxy_, before);  // written: the I/O thread now polls for its reply

  const ShortCall call = short_async_call(l);
  call.expect_by_deadline("it waited for another async call's slow reply");
  slow_done.get_future().wait();
  call.expect_once();
}

// The same while the sync caller waits for a connect that hangs (the server's handshake bytes held back): the
// async call queued meanwhile ends by its own deadline, not by the connect's or the sync caller's.
TEST_F(EngineAttack, AsyncDeadlineEndsWhileSyncCallerAwaitsConnect) {
  options_.command_timeout = 2000ms;
  options_.connect_timeout = 1500ms;
  options_.database = 1;  // a handshake round trip (SELECT) that the held bytes stall
  proxy_->set(Direction::to_client, FaultSpec::stall(0));
  Limiter l(kBig, options_, clock_);
  auto sync = std::async(std::launch::async, [&l] { return l.check("slow"); });
  await_bytes_to_server(*proxy_, 0);  // the connect is under way (AUTH sent)

  const ShortCall call = short_async_call(l);
  call.expect_by_deadline("it waited for the sync caller's connect");
  proxy_->clear();
  (void)sync.get();
  call.expect_once();
}

// Limiters sharing one pool each have a route of their own over it. An async call of a limiter destroyed while
// the call is in flight completes on the pool's I/O thread; when the server refuses FCALL (an ACL without it),
// that completion must not touch the destroyed limiter's route (AddressSanitizer: heap-use-after-free in
// Route::refuse_functions before the fix), and the call still ends exactly once, decided (EVALSHA after the refusal).
TEST_F(EngineAttack, AsyncCallOfDestroyedLimiterOnSharedPoolSurvivesFunctionRefusal) {
  ratelimit_test::RedisServer server(ratelimit_test::redis_server_binary());
  proxy_ = std::make_unique<FaultProxy>("127.0.0.1", server.port());
  RedisOptions o = ratelimit_test::client_options(server, FailurePolicy::fail_open);
  {
    auto admin = server.admin();
    const std::vector<std::string_view> acl{"ACL", "SETUSER",  "rl_nofcall", "reset", "on",   ">pw",
                                            "~*",  "+evalsha", "+eval",      "+get",  "+set", "+del"};
    ASSERT_EQ(ratelimit::redis::engine::text(*admin.command(acl)), "OK");
  }
  o.use_functions = true;
  o.user = "rl_nofcall";
  o.password = "pw";
  o.port = proxy_->port();
  o.pool_size = 1;
  auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(o.connection(), o.limiter());
  Limiter warm(kBig, pool, o.limiter(), clock_);
  ASSERT_EQ(warm.check("w").outcome, Outcome::decided);  // connected; this limiter's route is on EVALSHA now

  proxy_->set(Direction::to_client, FaultSpec::delay(200ms));
  auto done = std::make_shared<std::promise<CheckResult>>();
  auto runs = std::make_shared<std::atomic<int>>(0);
  {
    auto gone = std::make_unique<Limiter>(kBig, pool, o.limiter(), clock_);
    gone->check_async("k", 1, 3s, [done, runs](std::exception_ptr, CheckResult r) {
      if (runs->fetch_add(1) == 0) done->set_value(r);
    });
  }  // destroyed with its FCALL in flight
  auto f = done->get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "no callback";
  EXPECT_EQ(f.get().outcome, Outcome::decided);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(runs->load(), 1);
  proxy_->clear();
}

/// One async check through `o` (a cluster route whose only seed is blackholed, so that no slot map is
/// known yet) with its own deadline `timeout`, shorter than command_timeout: how long until its callback (which
/// must come exactly once, by that deadline).
Steady::duration async_before_discovery(const RedisOptions& o, std::chrono::milliseconds timeout) {
  ManualClock clock;
  Limiter l(kBig, o, clock);
  auto done = std::make_shared<std::promise<std::pair<CheckResult, Steady::duration>>>();
  auto runs = std::make_shared<std::atomic<int>>(0);
  const auto t0 = Steady::now();
  l.check_async("k", 1, timeout, [done, runs, t0](std::exception_ptr, CheckResult r) {
    if (runs->fetch_add(1) == 0) done->set_value({r, Steady::now() - t0});
  });
  auto f = done->get_future();
  EXPECT_EQ(f.wait_for(10s), std::future_status::ready) << "no callback";
  const auto [r, took] = f.get();
  EXPECT_EQ(r.outcome, Outcome::failure_policy);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(runs->load(), 1);
  return took;
}

/// `options_` for a cluster route whose one seed node is the proxy, blackholed: connects succeed, nothing
/// answers (so each question waits for command_timeout, 1 s).
RedisOptions blackholed_route(RedisOptions o, FaultProxy& proxy) {
  proxy.set_admission(ratelimit_test::Admission::blackhole);
  std::this_thread::sleep_for(30ms);  // the proxy's acceptor takes it up within a tick
  o.command_timeout = 1000ms;
  o.connect_timeout = 1000ms;
  o.cluster_nodes = {{"127.0.0.1", proxy.port()}};
  return o;
}

// Before the slot map is loaded, an async call waits on the router's worker while it asks the seed nodes; the
// call's own deadline still ends it (a dead seed must not hold it for command_timeout).
TEST_F(EngineAttack, ClusterAsyncCallBeforeTheMapEndsByItsDeadline) {
  const auto took = async_before_discovery(blackholed_route(options_, *proxy_), 50ms);
  EXPECT_LE(took, 50ms + kSlack) << "the async call's 50 ms deadline ended after " << ms(took)
                                 << " ms: it waited for the blackholed seed";
}

// Before the slot map is loaded, a sync check waits for the worker's load (which asks each seed in turn for up to
// connect_timeout + command_timeout) only until its own deadline: with two blackholed seeds it still ends by it.
TEST_F(EngineAttack, ClusterSyncCallBeforeTheMapEndsByItsDeadline) {
  FaultProxy second("127.0.0.1", ratelimit_test::shared_redis()->port());
  second.set_admission(ratelimit_test::Admission::blackhole);
  RedisOptions o = blackholed_route(options_, *proxy_);
  o.command_timeout = 400ms;
  o.cluster_nodes.push_back({"127.0.0.1", second.port()});
  Limiter l(kBig, o, clock_);
  const auto t0 = Steady::now();
  EXPECT_EQ(l.check("k").outcome, Outcome::failure_policy);
  const auto took = Steady::now() - t0;
  EXPECT_LE(took, o.command_timeout + kSlack)
      << "the sync check before the map took " << ms(took) << " ms (command_timeout 400 ms): it asked both seeds";
}

std::uint64_t latency_samples(const ratelimit::redis::RedisStats& s) {
  std::uint64_t n = 0;
  for (const std::uint64_t b : s.latency.buckets) n += b;
  return n;
}

// `RedisStats::latency` times backend calls (include/ratelimit/http/README.md "Metrics"). A check the denial cache
// answers never reaches Redis: sync or async, it adds no latency sample (else an outage answered locally would show
// as fast Redis calls).
TEST_F(EngineAttack, CachedDenialAddsNoLatencySampleSyncOrAsync) {
  options_.deny_cache.enabled = true;
  ratelimit::redis::RedisLimiter<ratelimit::FixedWindow, ManualClock> l(
      ratelimit::FixedWindow{.limit = 1, .window = 1h}, options_, clock_);
  ASSERT_TRUE(l.allow("k").allowed);
  ASSERT_FALSE(l.allow("k").allowed);  // Redis denies; the cache learns it
  const std::uint64_t samples = latency_samples(l.stats());
  ASSERT_FALSE(l.allow("k").allowed);
  ASSERT_EQ(l.stats().cached_denials, 1u);
  EXPECT_EQ(latency_samples(l.stats()), samples) << "a sync cached denial was timed as a backend call";

  // Shared with the completion: it may run after a failed wait returned (the limiter's end completes it).
  auto done = std::make_shared<std::promise<ratelimit::Decision>>();
  l.allow_async("k", 1, [done](std::exception_ptr, ratelimit::Decision d) { done->set_value(d); });
  auto f = done->get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_FALSE(f.get().allowed);
  ASSERT_EQ(l.stats().cached_denials, 2u);
  EXPECT_EQ(latency_samples(l.stats()), samples) << "an async cached denial was timed as a backend call";
}

/// A cluster of 3 masters, the first behind a proxy that it announces (so `CLUSTER SLOTS` names the proxy). One
/// cluster for the suite.
class EngineAttackCluster : public testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = ratelimit_test::start_proxied_cluster(proxy_, error_); }
  static void TearDownTestSuite() {
    delete cluster_;
    delete proxy_;
    cluster_ = nullptr;
    proxy_ = nullptr;
  }
  void SetUp() override {
    RATELIMIT_REQUIRE_REDIS();
    if (!ratelimit_test::find_redis_cli()) GTEST_SKIP() << "redis-cli not found";
    ASSERT_NE(cluster_, nullptr) << error_;
    proxy_->clear();
  }
  void TearDown() override {
    if (proxy_ != nullptr) proxy_->clear();
  }

  static ratelimit_test::RedisCluster* cluster_;
  static FaultProxy* proxy_;
  static std::string error_;
  ManualClock clock_;
};
ratelimit_test::RedisCluster* EngineAttackCluster::cluster_ = nullptr;
FaultProxy* EngineAttackCluster::proxy_ = nullptr;
std::string EngineAttackCluster::error_;

// A sync check sent to a stalled node fails at its deadline (command_timeout). The slot map reload that the
// failure asks for must not run on the caller's thread after that deadline: it may ask the stalled node too
// (the reload starts at a different node each time), holding the caller for another command_timeout.
TEST_F(EngineAttackCluster, SyncCheckOnStalledNodeEndsByItsDeadline) {
  auto o = ratelimit_test::cluster_client_options(*cluster_);
  o.on_error = FailurePolicy::fail_open;
  o.pool_size = 1;
  o.command_timeout = 300ms;
  o.connect_timeout = 300ms;
  o.cluster_refresh_interval = 1ms;
  o.breaker.failure_threshold = 0;  // every check goes to the node
  Limiter l(kBig, o, clock_);
  ASSERT_TRUE(l.cluster()->refresh());
  const std::string behind = "127.0.0.1:" + std::to_string(proxy_->port());
  std::string key;
  for (int i = 0; key.empty(); ++i) {
    const std::string k = "k" + std::to_string(i);
    if (l.cluster()->owner_of(ratelimit::redis::engine::detail::key_slot(l.redis_key(k))) == behind) key = k;
  }
  ASSERT_EQ(l.check(key).outcome, Outcome::decided) << "the healthy proxy did not forward";
  proxy_->set(Direction::to_client, FaultSpec::stall(0));
  for (int i = 0; i < 4; ++i) {  // the reload starts at each of the 3 nodes in turn
    const auto t0 = Steady::now();
    const CheckResult r = l.check(key);
    const auto took = Steady::now() - t0;
    EXPECT_EQ(r.outcome, Outcome::failure_policy);
    EXPECT_LE(took, o.command_timeout + kSlack) << "sync check " << i << " on the stalled node took " << ms(took)
                                                << " ms (command_timeout " << o.command_timeout.count() << " ms)";
  }
}

}  // namespace
