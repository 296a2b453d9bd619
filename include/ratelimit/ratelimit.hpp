#pragma once

/// @file
/// Umbrella header: every policy, the in-memory backend, clocks and acquire. Concurrency limits are in
/// `<ratelimit/concurrency.hpp>`, Redis in `<ratelimit/redis.hpp>`.

#include "ratelimit/acquire.hpp"
#include "ratelimit/batch_request.hpp"
#include "ratelimit/clock.hpp"
#include "ratelimit/decision.hpp"
#include "ratelimit/joint_backend.hpp"
#include "ratelimit/limiter.hpp"
#include "ratelimit/memory/memory_limiter.hpp"
#include "ratelimit/memory/options.hpp"
#include "ratelimit/memory/overridable_limiter.hpp"
#include "ratelimit/policy/fixed_window.hpp"
#include "ratelimit/policy/gcra.hpp"
#include "ratelimit/policy/policy.hpp"
#include "ratelimit/policy/share.hpp"
#include "ratelimit/policy/sliding_window_counter.hpp"
#include "ratelimit/policy/sliding_window_log.hpp"
#include "ratelimit/policy/token_bucket.hpp"
#include "ratelimit/version.hpp"

namespace ratelimit {
static_assert(Policy<FixedWindow> && Policy<SlidingWindowLog> && Policy<SlidingWindowCounter> && Policy<TokenBucket> &&
              Policy<Gcra>);
static_assert(Limiter<MemoryLimiter<Gcra>>);
}  // namespace ratelimit
