// The exact-value tables shared by every backend (tests/support/conformance.hpp), run on Redis Cluster.
// Guarded so that this branch builds before the shared suite exists.
#if __has_include("../support/conformance.hpp")
#include "../support/conformance.hpp"
#include "cluster_backend.hpp"

INSTANTIATE_TYPED_TEST_SUITE_P(RedisCluster, Conformance, testing::Types<ratelimit_test::RedisClusterBackend>);
#endif
