#pragma once

/// @file
/// Blocking acquire for client-side throttling: wait until a limiter admits a request.

#include <chrono>
#include <cstdint>
#include <string_view>
#include <thread>

#include "ratelimit/decision.hpp"
#include "ratelimit/limiter.hpp"

namespace ratelimit {

/// The default way `acquire` waits: `std::this_thread::sleep_for`.
struct SleepWaiter {
  /// Blocks the calling thread for `delay` (nanoseconds, > 0).
  void operator()(std::chrono::nanoseconds delay) const { std::this_thread::sleep_for(delay); }
};

/// Waits until `limiter` admits `cost` units for `key`, for outgoing calls to someone else's API.
///
/// Calls `limiter.allow(key, cost)`; on a denial it waits `retry_after` with `wait(delay)` and tries
/// again (another caller may have taken the quota meanwhile). When the next wait would pass `max_wait`
/// in total, or the request can never pass (`retry_after == Decision::never`), it returns that denial at
/// once instead of sleeping uselessly. A denial that names no wait (`retry_after <= 0`, e.g. a backend
/// failure answered `fail_closed` by a limiter of your own) is returned at once too: waiting nothing
/// and asking again would spin. Thread-safe as far as the limiter is.
///
/// @param max_wait the longest total time to wait; >= 0 (0 means try once).
/// @param wait     called with each delay; inject one that advances a `ManualClock` in tests.
/// @return the admitting decision, or the last denial.
/// @throws whatever `limiter.allow` throws (e.g. `std::invalid_argument` for a negative cost).
template <Limiter L, class Wait = SleepWaiter>
Decision acquire(L& limiter, std::string_view key, std::int64_t cost, std::chrono::nanoseconds max_wait,
                 Wait&& wait = {}) {
  std::chrono::nanoseconds budget = max_wait;
  for (;;) {
    const Decision d = limiter.allow(key, cost);
    if (d.allowed || d.retry_after == Decision::never || d.retry_after > budget || d.retry_after.count() <= 0) {
      return d;
    }
    wait(d.retry_after);
    budget -= d.retry_after;
  }
}

}  // namespace ratelimit
