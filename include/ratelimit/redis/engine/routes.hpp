#pragma once

/// @file
/// `make_route`: the route a set of connection options asks for (one server, Redis Cluster, or the master
/// Redis Sentinel names).

#include <memory>

#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/engine/cluster_router.hpp"
#include "ratelimit/redis/options.hpp"
#include "ratelimit/redis/engine/pool.hpp"
#include "ratelimit/redis/engine/route.hpp"
#include "ratelimit/redis/engine/sentinel_route.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace engine {

/// A `ClusterRouter` when `options.cluster_nodes` is set, a `SentinelRoute` when
/// `options.sentinel.master_name` is, else a `ServerRoute` over a new `ConnectionPool`. Connects nothing.
/// `limiter_defaults`: the options of limiters made on the route without their own. Throws
/// `std::invalid_argument` naming a bad field.
[[nodiscard]] inline std::shared_ptr<Route> make_route(const ConnectionOptions& options,
                                                       const LimiterOptions& limiter_defaults = {}) {
  if (!options.cluster_nodes.empty()) return std::make_shared<ClusterRouter>(options, limiter_defaults);
  if (!options.sentinel.master_name.empty()) return std::make_shared<SentinelRoute>(options, limiter_defaults);
  return std::make_shared<ServerRoute>(std::make_shared<ConnectionPool>(options, limiter_defaults));
}

}  // namespace engine
using engine::make_route;
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
