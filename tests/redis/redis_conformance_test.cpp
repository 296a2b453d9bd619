// The exact-value tables shared by every backend (tests/support/conformance.hpp), run on Redis.
#include "../support/conformance.hpp"
#include "redis_backend.hpp"

namespace ratelimit_test {
INSTANTIATE_TYPED_TEST_SUITE_P(Redis, Conformance, testing::Types<RedisBackend>);
}  // namespace ratelimit_test
