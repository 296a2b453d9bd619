#pragma once

// Helpers of the Redis Cluster tests: one cluster per test process (started on first use, stopped at
// exit), skip or fail without redis-cli as the standalone tests do without redis-server.

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

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

// Like RATELIMIT_REQUIRE_REDIS, for the cluster: skip with the reason, but fail under CI (where the
// cluster tests must run); a cluster that does not form is always a failure.
#define RATELIMIT_REQUIRE_CLUSTER()                                                                        \
  do {                                                                                                     \
    RATELIMIT_REQUIRE_REDIS();                                                                             \
    if (::ratelimit_test::shared_cluster() == nullptr) {                                                   \
      const std::string& why = ::ratelimit_test::cluster_error();                                          \
      if (std::getenv("CI") != nullptr || why.find("not found") == std::string::npos) {                    \
        FAIL() << "cannot start a Redis Cluster: " << why;                                                 \
      }                                                                                                    \
      GTEST_SKIP() << why << ": skipping the Redis Cluster tests (apt-get install redis-tools)";            \
    }                                                                                                      \
  } while (0)

}  // namespace ratelimit_test
