#pragma once

// The Redis backend for the typed conformance suite (tests/support/conformance.hpp): every limiter gets
// a fresh key prefix on the process's redis-server, client time from the suite's ManualClock, and
// raises on failure (a conformance test must never pass on a fail-open decision).

#include <memory>

#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace ratelimit_test {

struct RedisBackend {
  template <ratelimit::Policy P>
  static auto make(P policy, ratelimit::ManualClock clock) {
    if (shared_redis() == nullptr) {
      ADD_FAILURE() << "no redis-server (see the message above): this conformance test cannot run";
      ratelimit::redis::RedisOptions nowhere;
      nowhere.port = 1;  // every call fails and raises
      nowhere.on_error = ratelimit::FailurePolicy::raise;
      return std::make_unique<ratelimit::redis::RedisLimiter<P, ratelimit::ManualClock>>(std::move(policy), nowhere,
                                                                                          std::move(clock));
    }
    return std::make_unique<ratelimit::redis::RedisLimiter<P, ratelimit::ManualClock>>(
        std::move(policy), client_options(*shared_redis()), std::move(clock));
  }
};

}  // namespace ratelimit_test
