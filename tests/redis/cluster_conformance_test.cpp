// The exact-value tables shared by every backend (tests/support/conformance.hpp), run on Redis Cluster.
#include "../support/conformance.hpp"
#include "cluster_backend.hpp"

namespace ratelimit_test {
INSTANTIATE_TYPED_TEST_SUITE_P(RedisCluster, Conformance, testing::Types<RedisClusterBackend>);
}  // namespace ratelimit_test
