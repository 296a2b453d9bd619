#pragma once

// A Redis Cluster of 3 masters (no replicas) whose first node sits behind a FaultProxy
// (tests/support/fault_proxy.hpp): the node announces the proxy's port (`cluster-announce-port`), so
// `CLUSTER SLOTS` names the proxy and a router reaches that node only through it.

#include <exception>
#include <string>
#include <vector>

#include "../support/fault_proxy.hpp"
#include "cluster_support.hpp"

namespace ratelimit_test {

/// Starts the cluster (about 2 s) and sets `proxy` to the proxy in front of its first node; the caller deletes
/// both. Null without redis-server or redis-cli, or when the cluster did not form (`error` says why).
inline RedisCluster* start_proxied_cluster(FaultProxy*& proxy, std::string& error) {
  const auto cli = find_redis_cli();
  if (shared_redis() == nullptr || !cli) return nullptr;
  try {
    return new RedisCluster(redis_server_binary(), *cli, 3, 0, 1000, [&proxy](int port) -> std::vector<std::string> {
      if (proxy != nullptr) return {};
      proxy = new FaultProxy("127.0.0.1", port);
      return {"--cluster-announce-ip",       "127.0.0.1",
              "--cluster-announce-port",     std::to_string(proxy->port()),
              "--cluster-announce-bus-port", std::to_string(port + 10000)};
    });
  } catch (const std::exception& e) {
    error = e.what();
    return nullptr;
  }
}

}  // namespace ratelimit_test
