#pragma once

/// @file
/// Separate compilation of the core, in Boost.Asio's form. Header-only is the default; a program that
/// instead defines `RATELIMIT_SEPARATE_COMPILATION` in every translation unit (e.g. with
/// `target_compile_definitions`) and includes this header in exactly one of them compiles the in-memory
/// limiters of the five policies with the default clock (`MemoryLimiter<FixedWindow>` ...
/// `MemoryLimiter<Gcra>`, clock `std::chrono::steady_clock`) once, in that unit; the other units see
/// `extern template` declarations and compile none of the store's code. Other clocks stay header-only; a
/// program that uses the Redis backend includes `<ratelimit/redis/src.hpp>` instead, which includes this
/// header. Behaviour is the same in both modes; a call of `allow` then crosses units (link-time optimisation
/// can inline it again).

#ifndef RATELIMIT_SEPARATE_COMPILATION
#error "<ratelimit/src.hpp> needs RATELIMIT_SEPARATE_COMPILATION defined in every translation unit of the program"
#endif

#include "ratelimit/memory/memory_limiter.hpp"
#include "ratelimit/policy/fixed_window.hpp"
#include "ratelimit/policy/gcra.hpp"
#include "ratelimit/policy/sliding_window_counter.hpp"
#include "ratelimit/policy/sliding_window_log.hpp"
#include "ratelimit/policy/token_bucket.hpp"

namespace ratelimit {
template class MemoryLimiter<FixedWindow>;
template class MemoryLimiter<SlidingWindowLog>;
template class MemoryLimiter<SlidingWindowCounter>;
template class MemoryLimiter<TokenBucket>;
template class MemoryLimiter<Gcra>;
}  // namespace ratelimit
