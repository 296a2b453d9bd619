#pragma once

// The Redis Cluster backend for the typed conformance suite (tests/support/conformance.hpp): every
// limiter gets a fresh key prefix on the process's cluster, client time from the suite's ManualClock,
// and raises on failure (a conformance test must never pass on a fail-open decision).

#include <memory>

#include <ratelimit/redis.hpp>

#include "cluster_support.hpp"

namespace ratelimit_test {

struct RedisClusterBackend {
  template <ratelimit::Policy P>
  static auto make(P policy, ratelimit::ManualClock clock) {
    if (shared_redis() == nullptr || shared_cluster() == nullptr) {
      ADD_FAILURE() << "no Redis Cluster (" << cluster_error() << "): this conformance test cannot run";
      ratelimit::redis::RedisOptions nowhere;
      nowhere.cluster_nodes = {{"127.0.0.1", 1}};  // every call fails and raises
      nowhere.on_error = ratelimit::FailurePolicy::raise;
      return std::make_unique<ratelimit::redis::RedisLimiter<P, ratelimit::ManualClock>>(std::move(policy), nowhere,
                                                                                          std::move(clock));
    }
    return std::make_unique<ratelimit::redis::RedisLimiter<P, ratelimit::ManualClock>>(
        std::move(policy), cluster_client_options(*shared_cluster()), std::move(clock));
  }
};

}  // namespace ratelimit_test
