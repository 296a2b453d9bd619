#pragma once

/// @file
/// Separate compilation of the core and the Redis backend (README.md "Compile cost"), as `<ratelimit/src.hpp>` for
/// the core: a program that defines `RATELIMIT_SEPARATE_COMPILATION` in every translation unit includes this header
/// (instead of `<ratelimit/src.hpp>`, which it includes) in exactly one of them. That unit compiles the core's
/// limiters and `redis::RedisLimiter` of the five policies with the default clock (`std::chrono::system_clock`),
/// with the engine, connections, TLS and scripts they reach, once; the other units see the class and `extern
/// template` declarations and parse none of the engine. A core-only program keeps `<ratelimit/src.hpp>`, so it
/// needs neither hiredis nor the Redis target. `LeasedLimiter`, `RedisConcurrencyLimiter`, the pool, router and
/// route classes, and `RedisLimiter` of other clocks stay header-only. Behaviour is the same in both modes.

#ifndef RATELIMIT_SEPARATE_COMPILATION
#error "<ratelimit/redis/src.hpp> needs RATELIMIT_SEPARATE_COMPILATION defined in every translation unit of the program"
#endif

#include "ratelimit/policy/fixed_window.hpp"
#include "ratelimit/policy/gcra.hpp"
#include "ratelimit/policy/sliding_window_counter.hpp"
#include "ratelimit/policy/sliding_window_log.hpp"
#include "ratelimit/policy/token_bucket.hpp"
#include "ratelimit/redis/impl/redis_limiter.hpp"
#include "ratelimit/redis/redis_limiter.hpp"
#include "ratelimit/src.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
template class RedisLimiter<FixedWindow>;
template class RedisLimiter<SlidingWindowLog>;
template class RedisLimiter<SlidingWindowCounter>;
template class RedisLimiter<TokenBucket>;
template class RedisLimiter<Gcra>;
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
