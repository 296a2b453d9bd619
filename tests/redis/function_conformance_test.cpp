// The exact-value tables shared by every backend (tests/support/conformance.hpp), run on Redis with the
// scripts sent as Redis Functions (FCALL of the loaded library; include/ratelimit/redis/README.md "Redis Functions").
#include <memory>

#include "../support/conformance.hpp"
#include "redis_backend.hpp"

namespace ratelimit_test {

struct RedisFunctionBackend {
  template <ratelimit::Policy P>
  static auto make(P policy, ratelimit::ManualClock clock) {
    if (shared_redis() == nullptr) return RedisBackend::make(std::move(policy), std::move(clock));  // fails
    auto o = client_options(*shared_redis());
    o.use_functions = true;
    return std::make_unique<ratelimit::redis::RedisLimiter<P, ratelimit::ManualClock>>(std::move(policy), o,
                                                                                       std::move(clock));
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(RedisFunction, Conformance, testing::Types<RedisFunctionBackend>);

}  // namespace ratelimit_test
