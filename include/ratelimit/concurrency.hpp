#pragma once

/// @file
/// Umbrella header of concurrency limits (in memory): `ConcurrencyLimiter`, `Permit`, their options, and the
/// adaptive algorithms that can move a limit (`AimdLimit`, `GradientLimit`, `VegasLimit`).
/// The Redis one is `<ratelimit/redis/concurrency_limiter.hpp>` (in `<ratelimit/redis.hpp>`).

#include "ratelimit/concurrency/adaptive.hpp"
#include "ratelimit/concurrency/concurrency_limiter.hpp"
#include "ratelimit/concurrency/permit.hpp"
