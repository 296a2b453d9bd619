// The backend conformance suite (tests/support/conformance.hpp) run against MemoryLimiter.
#include <ratelimit/ratelimit.hpp>

#include "../support/conformance.hpp"

namespace {

struct MemoryBackend {
  template <ratelimit::Policy P>
  static auto make(P policy, ratelimit::ManualClock clock) {
    return ratelimit::MemoryLimiter<P, ratelimit::ManualClock>(std::move(policy), {}, std::move(clock));
  }
};

/// The same, returned through a pointer: the suite must accept both shapes.
struct MemoryBackendByPointer {
  template <ratelimit::Policy P>
  static auto make(P policy, ratelimit::ManualClock clock) {
    return std::make_unique<ratelimit::MemoryLimiter<P, ratelimit::ManualClock>>(
        std::move(policy), ratelimit::MemoryOptions{.max_keys = 64, .max_key_bytes = 512, .shards = 1},
        std::move(clock));
  }
};

using Backends = ::testing::Types<MemoryBackend, MemoryBackendByPointer>;

}  // namespace

namespace ratelimit_test {
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, Conformance, Backends);
}  // namespace ratelimit_test
