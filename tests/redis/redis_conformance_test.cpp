// The exact-value tables shared by every backend (tests/support/conformance.hpp), run on Redis.
// Guarded so that this branch builds before the shared suite exists.
#if __has_include("../support/conformance.hpp")
#include "../support/conformance.hpp"
#include "redis_backend.hpp"

INSTANTIATE_TYPED_TEST_SUITE_P(Redis, Conformance, testing::Types<ratelimit_test::RedisBackend>);
#endif
