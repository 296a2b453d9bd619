#pragma once

/// @file
/// `GateClock`: the monotonic clock of a Redis limiter's probe gate and denial cache, from the limiter's clock.

#include <chrono>
#include <type_traits>

#include "ratelimit/clock.hpp"
#include "ratelimit/redis/abi.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace detail {

/// The monotonic clock of a fallback's probe gate: the limiter's clock when it is a test clock, else steady
/// (a wall clock step must not lengthen a probe period).
template <Clock C>
using GateClock = std::conditional_t<std::is_same_v<C, std::chrono::system_clock>, std::chrono::steady_clock, C>;

/// `clock` as the gate's clock: the same test clock, or a steady clock.
template <Clock C>
[[nodiscard]] GateClock<C> gate_clock(const C& clock) {
  if constexpr (std::is_same_v<GateClock<C>, C>) {
    return clock;
  } else {
    return GateClock<C>{};
  }
}

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
