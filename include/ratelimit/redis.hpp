#pragma once

/// @file
/// Umbrella header of the Redis backend (needs hiredis; CMake target `ratelimit::redis`).

#include "ratelimit/ratelimit.hpp"
#include "ratelimit/redis/cluster_router.hpp"
#include "ratelimit/redis/concurrency_limiter.hpp"
#include "ratelimit/redis/connection.hpp"
#include "ratelimit/redis/error.hpp"
#include "ratelimit/redis/failure_report.hpp"
#include "ratelimit/redis/leased_limiter.hpp"
#include "ratelimit/redis/options.hpp"
#include "ratelimit/redis/pool.hpp"
#include "ratelimit/redis/redis_limiter.hpp"
#include "ratelimit/redis/reply.hpp"
#include "ratelimit/redis/routes.hpp"
#include "ratelimit/redis/sentinel_route.hpp"
#include "ratelimit/redis/stats.hpp"

namespace ratelimit::redis {
static_assert(Limiter<RedisLimiter<Gcra>>);
static_assert(Limiter<RedisLimiter<SlidingWindowLog, ManualClock>>);
static_assert(Limiter<LeasedLimiter<Gcra>> && Limiter<LeasedLimiter<FixedWindow, ManualClock, ManualClock>>);
}  // namespace ratelimit::redis
