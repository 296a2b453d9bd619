#pragma once

/// @file
/// Umbrella header of concurrency limits (in memory): `ConcurrencyLimiter`, `Permit`, their options.
/// The Redis one is `<ratelimit/redis/concurrency_limiter.hpp>` (in `<ratelimit/redis.hpp>`).

#include "ratelimit/concurrency/concurrency_limiter.hpp"
#include "ratelimit/concurrency/permit.hpp"
