// Socket-level faults (tests/support/fault_proxy.hpp) on the Redis Cluster and Redis Sentinel routes: one
// cluster node, the Sentinel master, or the sentinel itself behind a proxy that stalls, resets or blackholes.
// The engine's promises hold there as on one server (include/ratelimit/redis/README.md "Redis engine", "Circuit
// breaker", "Redis Cluster", "Redis Sentinel"): every call ends by its deadline, every callback runs exactly once, and
// only the faulty server's breaker opens: calls to a healthy node, or to a healthy master while its sentinel is gone,
// are decided as before. The servers announce the proxy's address (`cluster-announce-port`; the sentinel monitors the
// master at the proxy), so the routes find the proxy as they would the server.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ratelimit/redis.hpp>

#include "../support/fault_proxy.hpp"
#include "cluster_support.hpp"
#include "proxied_cluster.hpp"
#include "sentinel_support.hpp"
#include "test_support.hpp"

// Named inside the anonymous namespace: a unity build puts several test files in one unit.
namespace {
namespace fault_proxy_routes {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using ratelimit::CheckResult;
using ratelimit::FailurePolicy;
using ratelimit::ManualClock;
using ratelimit::Outcome;
using ratelimit::redis::RedisLimiter;
using ratelimit::redis::RedisOptions;
using ratelimit_test::Admission;
using ratelimit_test::Direction;
using ratelimit_test::FaultProxy;
using ratelimit_test::FaultSpec;
using Limiter = RedisLimiter<ratelimit::Gcra, ManualClock>;

const ratelimit::Gcra kBig{.limit = 1000, .period = 1s, .burst = 1'000'000};
constexpr auto kCommandTimeout = 100ms;
constexpr auto kConnectTimeout = 200ms;
// Scheduling on a loaded 2-core machine (sanitizers included).
constexpr auto kSlack = 150ms;
// How long a test waits for a call before it calls it hung.
constexpr auto kHung = 3s;

long long ms(Steady::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

/// `o` with fail_open, one connection per server and short timeouts.
RedisOptions tight(RedisOptions o) {
  o.on_error = FailurePolicy::fail_open;
  o.pool_size = 1;
  o.command_timeout = kCommandTimeout;
  o.connect_timeout = kConnectTimeout;
  return o;
}

/// What a run of checks saw.
struct Tally {
  int decided = 0;
  int failed = 0;
};

/// `n` checks of `key` (sync, or async with `kCommandTimeout`), each ending by its deadline and each
/// callback running exactly once; `proxy` is cleared when one hangs, so that it ends.
Tally checks(Limiter& l, const std::string& key, bool async, int n, FaultProxy& proxy) {
  Tally t;
  std::vector<std::shared_ptr<std::atomic<int>>> runs;
  for (int i = 0; i < n; ++i) {
    auto count = std::make_shared<std::atomic<int>>(0);
    runs.push_back(count);
    auto done = std::make_shared<std::promise<CheckResult>>();
    auto f = done->get_future();
    const auto t0 = Steady::now();
    std::future<void> sync;
    if (async) {
      l.check_async(key, 1, kCommandTimeout, [count, done](std::exception_ptr, CheckResult r) {
        if (count->fetch_add(1) == 0) done->set_value(r);
      });
    } else {
      sync = std::async(std::launch::async, [&l, &key, count, done] {
        count->fetch_add(1);
        done->set_value(l.check(key));
      });
    }
    if (f.wait_for(kHung) != std::future_status::ready) {
      ADD_FAILURE() << (async ? "async" : "sync") << " check " << i << " held for more than " << ms(kHung) << " ms";
      proxy.clear();
      proxy.drop_connections();
      f.wait();
    }
    const auto took = Steady::now() - t0;
    EXPECT_LE(took, kCommandTimeout + kSlack)
        << (async ? "async" : "sync") << " check " << i << " of " << key << " took " << ms(took) << " ms";
    const CheckResult r = f.get();
    ++(r.outcome == Outcome::decided ? t.decided : t.failed);
  }
  std::this_thread::sleep_for(20ms);  // room for a second callback, which must not come
  for (std::size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i]->load(), 1) << "callbacks of check " << i;
  return t;
}

/// Checks decided again within 2 s of the fault being lifted.
void expect_recovers(Limiter& l, const std::string& key, FaultProxy& proxy) {
  proxy.clear();
  const auto until = Steady::now() + 2s;
  bool decided = false;
  while (!decided && Steady::now() < until) {
    decided = l.check(key).outcome == Outcome::decided;
    if (!decided) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(decided) << "checks of " << key << " not back on Redis 2 s after the fault was lifted";
}

/// A cluster of 3 masters (no replicas), the first behind a proxy: it announces the proxy's port, so
/// `CLUSTER SLOTS` names the proxy and the router goes through it. One cluster per suite.
class FaultProxyCluster : public testing::Test {
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
    if (!ratelimit_test::find_redis_cli()) {
      if (std::getenv("CI") != nullptr) FAIL() << "CI needs redis-cli";
      GTEST_SKIP() << "redis-cli not found";
    }
    ASSERT_NE(cluster_, nullptr) << error_;
    proxy_->clear();
    auto o = ratelimit_test::cluster_client_options(*cluster_);
    o.cluster_refresh_interval = 100ms;
    limiter_ = std::make_unique<Limiter>(kBig, tight(o), clock_);
    ASSERT_TRUE(limiter_->cluster()->refresh());
    // A key on the node behind the proxy, and one on another node.
    const std::string behind = "127.0.0.1:" + std::to_string(proxy_->port());
    for (int i = 0; faulty_key_.empty() || healthy_key_.empty(); ++i) {
      const std::string k = "k" + std::to_string(i);
      const bool proxied = owner(k) == behind;
      (proxied ? faulty_key_ : healthy_key_) = k;
    }
  }

  [[nodiscard]] std::string owner(const std::string& key) const {
    return limiter_->cluster()->owner_of(ratelimit::redis::engine::detail::key_slot(limiter_->redis_key(key)));
  }

  /// `fault` on the node behind the proxy (set by the caller): checks of its key end by their deadlines and
  /// open its breaker; checks of a key on a healthy node meanwhile are all decided; then checks recover.
  void expect_node_fault(bool async) {
    ASSERT_EQ(checks(*limiter_, faulty_key_, async, 1, *proxy_).decided, 0) << "decided through the fault";
    const Tally faulty = checks(*limiter_, faulty_key_, async, 4, *proxy_);
    EXPECT_EQ(faulty.decided, 0);
    EXPECT_GE(limiter_->stats().breaker_opens, 1u) << "the node's fault did not open its breaker";
    const Tally healthy = checks(*limiter_, healthy_key_, async, 5, *proxy_);
    EXPECT_EQ(healthy.decided, 5) << "a healthy node's checks failed with another node's fault";
    expect_recovers(*limiter_, faulty_key_, *proxy_);
  }
  void warm(bool async) {
    ASSERT_EQ(checks(*limiter_, faulty_key_, async, 1, *proxy_).decided, 1) << "the healthy proxy did not forward";
    ASSERT_EQ(checks(*limiter_, healthy_key_, async, 1, *proxy_).decided, 1);
  }

  static ratelimit_test::RedisCluster* cluster_;
  static FaultProxy* proxy_;
  static std::string error_;
  ManualClock clock_;
  std::unique_ptr<Limiter> limiter_;
  std::string faulty_key_;
  std::string healthy_key_;
};
ratelimit_test::RedisCluster* FaultProxyCluster::cluster_ = nullptr;
FaultProxy* FaultProxyCluster::proxy_ = nullptr;
std::string FaultProxyCluster::error_;

TEST_F(FaultProxyCluster, StalledNodeSync) {
  warm(false);
  proxy_->set(Direction::to_client, FaultSpec::stall(3));
  expect_node_fault(false);
}
TEST_F(FaultProxyCluster, StalledNodeAsync) {
  warm(true);
  proxy_->set(Direction::to_client, FaultSpec::stall(3));
  expect_node_fault(true);
}
TEST_F(FaultProxyCluster, ResetNodeSync) {
  warm(false);
  proxy_->set(Direction::to_client, FaultSpec::reset(3));
  expect_node_fault(false);
}
TEST_F(FaultProxyCluster, ResetNodeAsync) {
  warm(true);
  proxy_->set(Direction::to_client, FaultSpec::reset(3));
  expect_node_fault(true);
}
// A node that accepts connections and never answers, from the first call on.
TEST_F(FaultProxyCluster, BlackholedNodeSync) {
  proxy_->set_admission(Admission::blackhole);
  std::this_thread::sleep_for(30ms);  // the proxy's acceptor takes it up within a tick
  expect_node_fault(false);
}
TEST_F(FaultProxyCluster, BlackholedNodeAsync) {
  proxy_->set_admission(Admission::blackhole);
  std::this_thread::sleep_for(30ms);
  expect_node_fault(true);
}

/// A master and a sentinel; a proxy in front of one of them (`sentinel_behind_proxy`: the sentinel,
/// else the master, which the sentinel then monitors at the proxy's address and so names to the route).
class FaultProxySentinel : public testing::Test {
 protected:
  void start(bool sentinel_behind_proxy) {
    RATELIMIT_REQUIRE_REDIS();
    const std::string& binary = ratelimit_test::redis_server_binary();
    master_ = std::make_unique<ratelimit_test::RedisServer>(binary);
    if (!sentinel_behind_proxy) proxy_ = std::make_unique<FaultProxy>("127.0.0.1", master_->port());
    // A long down-after: the sentinel does not act on the faults of these few seconds.
    sentinel_ = std::make_unique<ratelimit_test::SentinelProcess>(
        binary, sentinel_behind_proxy ? master_->port() : proxy_->port(), "mymaster", 1, 30s);
    if (sentinel_behind_proxy) proxy_ = std::make_unique<FaultProxy>("127.0.0.1", sentinel_->port());
    auto o = ratelimit_test::client_options(*master_);
    o.sentinel.check_interval = 200ms;
    o = ratelimit_test::sentinel_options({sentinel_behind_proxy ? proxy_->port() : sentinel_->port()}, "mymaster", o);
    limiter_ = std::make_unique<Limiter>(kBig, tight(o), clock_);
  }

  ManualClock clock_;
  std::unique_ptr<ratelimit_test::RedisServer> master_;
  std::unique_ptr<ratelimit_test::SentinelProcess> sentinel_;
  std::unique_ptr<FaultProxy> proxy_;
  std::unique_ptr<Limiter> limiter_;
};

/// `fault` between the route and the master, found through the sentinel: checks end by their deadlines,
/// open the master's breaker, and recover once it is lifted.
void expect_master_fault(Limiter& l, FaultProxy& proxy, FaultSpec fault, bool async) {
  ASSERT_EQ(checks(l, "k", async, 1, proxy).decided, 1) << "the healthy proxy did not forward";
  proxy.set(Direction::to_client, fault);
  EXPECT_EQ(checks(l, "k", async, 5, proxy).decided, 0);
  EXPECT_GE(l.stats().breaker_opens, 1u) << "the master's fault did not open its breaker";
  expect_recovers(l, "k", proxy);
}
// The master's replies stalled mid-reply, or reset mid-reply.
TEST_F(FaultProxySentinel, StalledMasterSync) {
  start(false);
  expect_master_fault(*limiter_, *proxy_, FaultSpec::stall(3), false);
}
TEST_F(FaultProxySentinel, StalledMasterAsync) {
  start(false);
  expect_master_fault(*limiter_, *proxy_, FaultSpec::stall(3), true);
}
TEST_F(FaultProxySentinel, ResetMasterSync) {
  start(false);
  expect_master_fault(*limiter_, *proxy_, FaultSpec::reset(3), false);
}
TEST_F(FaultProxySentinel, ResetMasterAsync) {
  start(false);
  expect_master_fault(*limiter_, *proxy_, FaultSpec::reset(3), true);
}

/// The sentinel blackholed (its connections accepted, never answered) and reset once the master is known:
/// the periodic checks fail, the master is healthy, so every check is decided and no breaker opens.
void expect_master_serves_without_its_sentinel(Limiter& l, FaultProxy& proxy, bool async) {
  ASSERT_EQ(checks(l, "k", async, 1, proxy).decided, 1);
  proxy.set_admission(Admission::blackhole);
  proxy.drop_connections();
  const auto until = Steady::now() + 800ms;  // several periodic checks (every 200 ms)
  Tally t;
  while (Steady::now() < until) {
    const Tally one = checks(l, "k", async, 1, proxy);
    t.decided += one.decided;
    t.failed += one.failed;
  }
  EXPECT_EQ(t.failed, 0) << t.decided << " decided";
  EXPECT_EQ(l.stats().breaker_opens, 0u) << "the sentinel's fault opened the master's breaker";
  EXPECT_GE(l.stats().master_discoveries, 3u) << "no periodic check met the blackholed sentinel";
}
TEST_F(FaultProxySentinel, BlackholedSentinelSync) {
  start(true);
  expect_master_serves_without_its_sentinel(*limiter_, *proxy_, false);
}
TEST_F(FaultProxySentinel, BlackholedSentinelAsync) {
  start(true);
  expect_master_serves_without_its_sentinel(*limiter_, *proxy_, true);
}

/// The sentinel blackholed before any master is known: the first calls, made at once from several threads,
/// each end by their own deadline with the failure policy's answer (none waits for another's discovery of
/// the sentinels), and checks are decided within 2 s of the sentinel's return.
TEST_F(FaultProxySentinel, BlackholedSentinelBeforeDiscoveryEndsEachCallByItsDeadline) {
  start(true);
  proxy_->set_admission(Admission::blackhole);
  constexpr int kThreads = 4;
  std::vector<std::future<std::pair<CheckResult, Steady::duration>>> calls;
  for (int i = 0; i < kThreads; ++i) {
    calls.push_back(std::async(std::launch::async, [this] {
      const auto t0 = Steady::now();
      const CheckResult r = limiter_->check("k");
      return std::pair{r, Steady::now() - t0};
    }));
  }
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (calls[i].wait_for(kHung) != std::future_status::ready) {
      ADD_FAILURE() << "sync check " << i << " held for more than " << ms(kHung) << " ms";
      proxy_->clear();
      proxy_->drop_connections();
    }
    const auto [r, took] = calls[i].get();
    EXPECT_EQ(r.outcome, Outcome::failure_policy) << "check " << i;
    EXPECT_TRUE(r.decision.allowed) << "check " << i << ": fail_open admits";
    EXPECT_LE(took, kCommandTimeout + kSlack) << "sync check " << i << " took " << ms(took) << " ms";
  }
  expect_recovers(*limiter_, "k", *proxy_);
}

}  // namespace fault_proxy_routes
}  // namespace
