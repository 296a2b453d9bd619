#pragma once

/// @file
/// The `Limiter` concept that every backend satisfies.

#include <chrono>
#include <concepts>
#include <cstdint>
#include <string_view>

#include "ratelimit/decision.hpp"
#include "ratelimit/reservation.hpp"

namespace ratelimit {

/// A policy bound to a store of per-key state (include/ratelimit/README.md "Decisions").
///
/// - `allow(key)` / `allow(key, cost)`: check and, if admitted with cost >= 1, consume.
/// - `peek(key)`: what a cost-1 request would see; consumes nothing.
/// - `reset(key)`: forget the key's state (it is full again).
template <class L>
concept Limiter = requires(L& limiter, std::string_view key, std::int64_t cost) {
  { limiter.allow(key) } -> std::same_as<Decision>;
  { limiter.allow(key, cost) } -> std::same_as<Decision>;
  { limiter.peek(key) } -> std::same_as<Decision>;
  limiter.reset(key);
};

/// A `Limiter` that books slots ahead (include/ratelimit/README.md "Reservations"): `reserve(key, cost,
/// max_delay)` takes the units now and says when the caller may act, or books nothing when that would be
/// later than `max_delay`. GCRA and the token bucket offer it, in memory and on Redis; the window
/// policies do not (a window's count keeps no order of arrivals to book a later slot in). `acquire`,
/// `FairAcquirer` and `Shaper` use it (include/ratelimit/README.md "Shaping").
template <class L>
concept ReservingLimiter = Limiter<L> &&
    requires(L& limiter, std::string_view key, std::int64_t cost, std::chrono::nanoseconds max_delay) {
  { limiter.reserve(key, cost, max_delay) } -> std::same_as<Reservation>;
};

}  // namespace ratelimit
