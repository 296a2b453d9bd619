#pragma once

/// @file
/// Umbrella header of the Redis backend (needs hiredis; CMake target `ratelimit::redis`): the limiters, their
/// options and counters, and the routes a user may build and share (`ConnectionPool`, `ClusterRouter`,
/// `SentinelRoute`). The engine's own types live in `ratelimit::redis::engine` (include/ratelimit/redis/README.md
/// "Layout").

#include "ratelimit/ratelimit.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/redis/failure_report.hpp"
#include "ratelimit/redis/options.hpp"
#include "ratelimit/redis/redis_limiter.hpp"
#include "ratelimit/redis/stats.hpp"

// Separately compiled (README.md "Compile cost"), the umbrella declares `RedisLimiter` and its options only: a unit
// that makes its own pool, router or Sentinel route, or uses `LeasedLimiter` or `RedisConcurrencyLimiter`, includes
// their headers (ratelimit/redis/engine/pool.hpp, cluster_router.hpp, sentinel_route.hpp, leased_limiter.hpp,
// concurrency_limiter.hpp), which stay header-only.
#ifndef RATELIMIT_SEPARATE_COMPILATION
#include "ratelimit/redis/concurrency_limiter.hpp"
#include "ratelimit/redis/engine/cluster_router.hpp"
#include "ratelimit/redis/engine/connection.hpp"
#include "ratelimit/redis/engine/pool.hpp"
#include "ratelimit/redis/engine/routes.hpp"
#include "ratelimit/redis/engine/sentinel_route.hpp"
#include "ratelimit/redis/leased_limiter.hpp"

namespace ratelimit::redis {
static_assert(Limiter<LeasedLimiter<Gcra>> && Limiter<LeasedLimiter<FixedWindow, ManualClock, ManualClock>>);
}  // namespace ratelimit::redis
#endif

namespace ratelimit::redis {
static_assert(Limiter<RedisLimiter<Gcra>>);
static_assert(Limiter<RedisLimiter<SlidingWindowLog, ManualClock>>);
}  // namespace ratelimit::redis
