#pragma once

// Helpers of the Redis Cluster tests: one cluster per test process (started on first use, stopped at
// exit), skip or fail without redis-cli as the standalone tests do without redis-server.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <ratelimit/redis.hpp>

#include "redis_cluster.hpp"
#include "test_support.hpp"

namespace ratelimit_test {

/// Why the shared cluster could not start (empty when it did, or was not tried).
inline std::string& cluster_error() {
  static std::string error;
  return error;
}

/// The process's cluster: 3 masters, 1 replica each; null (and `cluster_error()` says why) when it cannot
/// be started. Not thread-safe: call it from the test's main thread.
inline RedisCluster* shared_cluster() {
  static std::unique_ptr<RedisCluster> cluster;
  static bool tried = false;
  if (!tried) {
    tried = true;
    const auto cli = find_redis_cli();
    if (shared_redis() == nullptr) {
      cluster_error() = "no redis-server";
    } else if (!cli) {
      cluster_error() = "redis-cli not found on PATH (or $RATELIMIT_REDIS_CLI)";
    } else {
      try {
        cluster = std::make_unique<RedisCluster>(redis_server_binary(), *cli);
      } catch (const std::exception& e) {
        cluster_error() = e.what();
      }
    }
  }
  return cluster.get();
}

/// Options for `cluster` with client time (ManualClock), raising errors, a fresh prefix.
inline ratelimit::redis::RedisOptions cluster_client_options(const RedisCluster& cluster) {
  ratelimit::redis::RedisOptions o;
  o.time_source = ratelimit::redis::TimeSource::client;
  o.on_error = ratelimit::FailurePolicy::raise;
  o.key_prefix = unique_prefix();
  o.command_timeout = std::chrono::milliseconds(2000);
  o.connect_timeout = std::chrono::milliseconds(2000);
  return cluster.options(o);
}

/// Every key under `prefix` on every master of `cluster` has a TTL; returns how many keys there were.
inline std::size_t expect_all_cluster_keys_expire(const RedisCluster& cluster, const std::string& prefix) {
  std::size_t n = 0;
  for (const int port : cluster.master_ports()) {
    auto admin = RedisCluster::admin(port);
    n += expect_all_keys_expire(admin, prefix);
  }
  return n;
}

/// Moves `slot` of `cluster` from its owner (`owner`, "host:port") to another master, step by step:
/// `start` (IMPORTING on the target, MIGRATING on the source), `migrate` (MIGRATE of one key), `finish`
/// (SETSLOT NODE on every master). Each step expects "OK".
class SlotMove {
 public:
  SlotMove(const RedisCluster& cluster, std::uint16_t slot, const std::string& owner)
      : masters_(cluster.master_ports()),
        slot_(std::to_string(slot)),
        source_(std::stoi(owner.substr(owner.rfind(':') + 1))) {
    for (const int p : masters_) {
      if (p != source_) target_ = p;
    }
    EXPECT_NE(target_, 0) << "no other master";
  }
  [[nodiscard]] int source() const noexcept { return source_; }
  [[nodiscard]] int target() const noexcept { return target_; }
  void start() const {
    expect_ok(target_, {"CLUSTER", "SETSLOT", slot_, "IMPORTING", RedisCluster::id_of(source_)});
    expect_ok(source_, {"CLUSTER", "SETSLOT", slot_, "MIGRATING", RedisCluster::id_of(target_)});
  }
  void migrate(const std::string& key) const {
    expect_ok(source_, {"MIGRATE", "127.0.0.1", std::to_string(target_), "", "0", "5000", "KEYS", key});
  }
  void finish() const {
    const std::string id = RedisCluster::id_of(target_);
    expect_ok(target_, {"CLUSTER", "SETSLOT", slot_, "NODE", id});
    expect_ok(source_, {"CLUSTER", "SETSLOT", slot_, "NODE", id});
    for (const int p : masters_) {
      if (p != source_ && p != target_) expect_ok(p, {"CLUSTER", "SETSLOT", slot_, "NODE", id});
    }
  }

 private:
  static void expect_ok(int port, std::initializer_list<std::string_view> args) {
    auto admin = RedisCluster::admin(port);
    EXPECT_EQ(ratelimit::redis::engine::text(*admin.command(args)), "OK") << *args.begin() << " on port " << port;
  }
  std::vector<int> masters_;
  std::string slot_;
  int source_;
  int target_ = 0;
};

// Like RATELIMIT_REQUIRE_REDIS, for the cluster: skip with the reason, but fail under CI (where the
// cluster tests must run); a cluster that does not form is always a failure.
#define RATELIMIT_REQUIRE_CLUSTER()                                                              \
  do {                                                                                           \
    RATELIMIT_REQUIRE_REDIS();                                                                   \
    if (::ratelimit_test::shared_cluster() == nullptr) {                                         \
      const std::string& why = ::ratelimit_test::cluster_error();                                \
      if (std::getenv("CI") != nullptr || why.find("not found") == std::string::npos) {          \
        FAIL() << "cannot start a Redis Cluster: " << why;                                       \
      }                                                                                          \
      GTEST_SKIP() << why << ": skipping the Redis Cluster tests (apt-get install redis-tools)"; \
    }                                                                                            \
  } while (0)

}  // namespace ratelimit_test
