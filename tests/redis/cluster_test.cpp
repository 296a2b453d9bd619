// RedisLimiter on a real Redis Cluster (3 masters, 1 replica each, on loopback): slots agree with the
// server's CLUSTER KEYSLOT, keys spread over every master, allow_many across masters keeps its order,
// NOSCRIPT on nodes that never saw the script, option validation, and the differential traces.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <ratelimit/redis.hpp>

#include "cluster_support.hpp"
#include "differential_trace.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::ManualClock;
using ratelimit::redis::RedisLimiter;
using ratelimit_test::cluster_client_options;
using ratelimit_test::RedisCluster;
using ratelimit_test::shared_cluster;

using ratelimit_test::D;

class Cluster : public testing::Test {
 protected:
  void SetUp() override { RATELIMIT_REQUIRE_CLUSTER(); }
};

// No server needed: the check value of the cluster specification, and the hash-tag rule.
TEST(ClusterSlot, Crc16AndHashTags) {
  using ratelimit::redis::engine::detail::crc16_xmodem;
  using ratelimit::redis::engine::detail::key_slot;
  EXPECT_EQ(crc16_xmodem("123456789"), 0x31C3);
  EXPECT_EQ(crc16_xmodem(""), 0);
  EXPECT_EQ(key_slot("123456789"), 0x31C3 % 16384);
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
  EXPECT_EQ(key_slot("foo{}{bar}"), crc16_xmodem("foo{}{bar}") % 16384);  // empty tag: whole key
  EXPECT_EQ(key_slot("foo{{bar}}zap"), crc16_xmodem("{bar") % 16384);     // tag ends at the first '}'
  EXPECT_EQ(key_slot("foo{bar}{zap}"), crc16_xmodem("bar") % 16384);
  EXPECT_EQ(key_slot("{"), crc16_xmodem("{") % 16384);  // no closing brace
}

// The server is the reference: our slot of random byte keys equals CLUSTER KEYSLOT's.
TEST_F(Cluster, SlotsAgreeWithTheServer) {
  auto admin = RedisCluster::admin(shared_cluster()->any_live_port());
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> len(0, 12);
  std::uniform_int_distribution<int> byte(0, 255);
  ratelimit::redis::RedisOptions o;
  RedisLimiter limiter(ratelimit::Gcra{.limit = 5, .period = 1s, .burst = 5}, o);
  for (int i = 0; i < 500; ++i) {
    std::string key;
    for (int n = len(rng); n > 0; --n) key += static_cast<char>(i % 3 == 0 ? "{}a%"[byte(rng) % 4] : byte(rng));
    for (const std::string& k : {key, limiter.redis_key(key)}) {
      const auto r = admin.command({"CLUSTER", "KEYSLOT", k});
      ASSERT_EQ(r->type, REDIS_REPLY_INTEGER);
      ASSERT_EQ(ratelimit::redis::engine::detail::key_slot(k), r->integer) << "key of " << k.size() << " bytes";
    }
  }
}

// 3000 keys, limit 1 each: every key is admitted once, stored on the master owning its slot, and every
// master holds a fair share (each owns a third of the slots).
TEST_F(Cluster, KeysSpreadOverAllMasters) {
  RedisCluster& cluster = *shared_cluster();
  ManualClock clock;
  const auto opts = cluster_client_options(cluster);
  RedisLimiter l(ratelimit::SlidingWindowLog{.limit = 1, .window = 1h}, opts, clock);
  constexpr int kKeys = 3000;
  std::vector<ratelimit::redis::Request> batch;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back("user:" + std::to_string(i));
  for (const auto& k : keys) batch.push_back({k, 1});
  for (const Decision& d : l.allow_many(batch)) ASSERT_TRUE(d.allowed);
  for (int i = 0; i < 100; ++i) ASSERT_FALSE(l.allow(keys[static_cast<std::size_t>(i)]).allowed);

  const std::vector<int> masters = cluster.master_ports();
  ASSERT_EQ(masters.size(), 3u);
  std::size_t total = 0;
  for (const int port : masters) {
    auto admin = RedisCluster::admin(port);
    const auto here = ratelimit_test::scan_keys(admin, opts.key_prefix + "*");
    EXPECT_GT(here.size(), kKeys / 4) << "master " << port << " holds too few keys";
    for (const std::string& k : here) {
      ASSERT_EQ(l.cluster()->owner_of(ratelimit::redis::engine::detail::key_slot(k)),
                "127.0.0.1:" + std::to_string(port));
    }
    total += here.size();
  }
  EXPECT_EQ(total, static_cast<std::size_t>(kKeys));
  EXPECT_EQ(ratelimit_test::expect_all_cluster_keys_expire(cluster, opts.key_prefix), static_cast<std::size_t>(kKeys));
  const auto s = l.stats();
  EXPECT_EQ(s.failures, 0u);
  EXPECT_EQ(s.moved_redirections, 0u);  // the map was right from the start
  EXPECT_LE(s.connects, 3u * opts.pool_size);
}

// A batch interleaving keys of different masters: decisions in request order, worked by hand
// (GCRA 10/s burst 3: T = 100 ms, tau = 300 ms, all at t = 0).
TEST_F(Cluster, AllowManyAcrossMastersKeepsOrder) {
  ManualClock clock;
  RedisLimiter l(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 3}, cluster_client_options(*shared_cluster()),
                 clock);
  // Three keys on three different masters.
  std::map<std::string, std::string> by_owner;
  for (int i = 0; by_owner.size() < 3 && i < 1000; ++i) {
    std::string k = "k";  // not "k" + std::to_string(i): GCC 12 -O2 -Wrestrict false positive
    k += std::to_string(i);
    (void)l.peek(k);  // loads the map
    by_owner.emplace(l.cluster()->owner_of(ratelimit::redis::engine::detail::key_slot(l.redis_key(k))), k);
  }
  ASSERT_EQ(by_owner.size(), 3u);
  std::vector<std::string> k;
  for (const auto& [owner, key] : by_owner) k.push_back(key);
  const ratelimit::redis::Request batch[] = {{k[0], 1}, {k[1], 2}, {k[2], 3}, {k[0], 1}, {k[1], 2},
                                             {k[2], 0}, {k[0], 2}, {k[1], 1}, {k[2], 1}};
  const auto d = l.allow_many(batch);
  ASSERT_EQ(d.size(), 9u);
  EXPECT_EQ(d[0], D(true, 3, 2, 0s, 100ms));
  EXPECT_EQ(d[1], D(true, 3, 1, 0s, 200ms));
  EXPECT_EQ(d[2], D(true, 3, 0, 0s, 300ms));
  EXPECT_EQ(d[3], D(true, 3, 1, 0s, 200ms));
  EXPECT_EQ(d[4], D(false, 3, 1, 100ms, 200ms));  // backlog 200 + 200 > 300
  EXPECT_EQ(d[5], D(true, 3, 0, 0s, 300ms));      // cost 0 on a full bucket: allowed, nothing taken
  EXPECT_EQ(d[6], D(false, 3, 1, 100ms, 200ms));
  EXPECT_EQ(d[7], D(true, 3, 0, 0s, 300ms));
  EXPECT_EQ(d[8], D(false, 3, 0, 100ms, 300ms));
  EXPECT_EQ(l.stats().failures, 0u);
  EXPECT_TRUE(l.reset(k[0]));
  EXPECT_EQ(l.allow(k[0]), D(true, 3, 2, 0s, 100ms));
}

// SCRIPT FLUSH on every master: each master answers NOSCRIPT once and gets the script with EVAL.
TEST_F(Cluster, NoscriptOnEachMasterFallsBackToEval) {
  RedisCluster& cluster = *shared_cluster();
  ManualClock clock;
  RedisLimiter l(ratelimit::FixedWindow{.limit = 100, .window = 1h}, cluster_client_options(cluster), clock);
  std::vector<std::string> keys;
  std::vector<ratelimit::redis::Request> batch;
  for (int i = 0; i < 60; ++i)
    keys.push_back(
        std::string("n").append(std::to_string(i)));  // not "n" + string: GCC 12 -Wrestrict false positive at -O2
  for (const auto& k : keys) batch.push_back({k, 1});
  for (const Decision& d : l.allow_many(batch)) ASSERT_EQ(d, D(true, 100, 99, 0s, 1h));
  for (const int port : cluster.master_ports()) {
    auto admin = RedisCluster::admin(port);
    ASSERT_EQ(ratelimit::redis::engine::text(*admin.command({"SCRIPT", "FLUSH"})), "OK");
  }
  const auto before = l.stats().script_reloads;
  for (const Decision& d : l.allow_many(batch)) ASSERT_EQ(d, D(true, 100, 98, 0s, 1h));
  EXPECT_EQ(l.allow(keys[0]), D(true, 100, 97, 0s, 1h));
  const auto s = l.stats();
  EXPECT_EQ(s.failures, 0u);
  EXPECT_EQ(s.script_reloads - before, 60u);  // every request of that batch got NOSCRIPT, then EVAL
}

TEST(ClusterOptions, Validation) {
  auto expect_field = [](ratelimit::redis::RedisOptions o, const std::string& field) {
    try {
      RedisLimiter l(ratelimit::Gcra{.limit = 5, .period = 1s, .burst = 5}, o);
      ADD_FAILURE() << "accepted bad " << field;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(field + ":", 0), 0u) << e.what();
    }
  };
  ratelimit::redis::RedisOptions o;
  o.cluster_nodes = {{"127.0.0.1", 70000}};
  expect_field(o, "ConnectionOptions.cluster_nodes[0].port");
  o.cluster_nodes = {{"127.0.0.1", 7000}, {"", 7000}};
  expect_field(o, "ConnectionOptions.cluster_nodes[1].host");
  o.cluster_nodes = {{"127.0.0.1", 7000}};
  o.database = 1;
  expect_field(o, "ConnectionOptions.database");
  o.database = 0;
  o.cluster_max_redirects = 0;
  expect_field(o, "ConnectionOptions.cluster_max_redirects");
  o.cluster_max_redirects = 5;
  o.pool_size = 0;
  expect_field(o, "ConnectionOptions.pool_size");
  o.pool_size = 1;
  o.port = 0;  // ignored in cluster mode
  RedisLimiter ok(ratelimit::Gcra{.limit = 5, .period = 1s, .burst = 5}, o);
  EXPECT_NE(ok.cluster(), nullptr);
}

// Nothing listens: every check fails (no slot map) under the failure policy, nothing hangs or throws.
TEST(ClusterOptions, UnreachableSeedsFailPerPolicy) {
  ratelimit::redis::RedisOptions o;
  o.cluster_nodes = {{"127.0.0.1", ratelimit_test::free_port()}};
  o.on_error = ratelimit::FailurePolicy::fail_closed;
  o.failure_retry_after = 2s;
  RedisLimiter l(ratelimit::Gcra{.limit = 5, .period = 1s, .burst = 5}, o);
  EXPECT_EQ(l.allow("k"), D(false, 5, 0, 2s, 2s));
  const ratelimit::redis::Request batch[] = {{"a", 1}, {"b", 1}};
  for (const Decision& d : l.allow_many(batch)) EXPECT_EQ(d, D(false, 5, 0, 2s, 2s));
  EXPECT_EQ(l.stats().failures, 3u);
  EXPECT_EQ(l.stats().io_errors, 3u);
}

// The differential traces of the single-server tests, unchanged, against the cluster.
ratelimit_test::differential::TraceTarget cluster_target() {
  return {[] { return cluster_client_options(*shared_cluster()); },
          [](const std::string& prefix) {
            return ratelimit_test::expect_all_cluster_keys_expire(*shared_cluster(), prefix);
          }};
}
// One test (one cluster start under ctest) for the five policies' traces.
TEST_F(Cluster, DifferentialTraces) {
  using namespace ratelimit_test::differential;
  differential_fixed_window(cluster_target());
  differential_sliding_window_log(cluster_target());
  differential_sliding_window_counter(cluster_target());
  differential_token_bucket(cluster_target());
  differential_gcra(cluster_target());
}

}  // namespace
