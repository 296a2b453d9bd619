#pragma once

/// @file
/// Blocking acquire for client-side throttling: wait until a limiter admits a request.

#include <chrono>
#include <cstdint>
#include <string_view>
#include <thread>

#include "ratelimit/clock.hpp"
#include "ratelimit/decision.hpp"
#include "ratelimit/detail/arithmetic.hpp"
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
/// again (another caller may have taken the quota meanwhile). `max_wait` bounds the whole call as read
/// on `clock`: time spent in checks and sleeps that overshoot count too. When the next wait would end
/// past the deadline (`clock.now()` at the call + `max_wait`), or the request can never pass
/// (`retry_after == Decision::never`), it returns that denial at once instead of sleeping uselessly. A
/// denial that names no wait (`retry_after <= 0`, e.g. a backend failure answered `fail_closed` by a
/// limiter of your own) is returned at once too: waiting nothing and asking again would spin. The
/// last check may itself end after the deadline by the time one check takes. Thread-safe as far as the
/// limiter is.
///
/// @param max_wait the longest total time, from the call to the last check's start; >= 0 (0 means try once).
/// @param wait     called with each delay; inject one that advances a `ManualClock` in tests.
/// @param clock    measures the elapsed time: `std::chrono::steady_clock` by default (monotonic); pass
///                 the `ManualClock` that `wait` advances in tests.
/// @return the admitting decision, or the last denial.
/// @throws `std::invalid_argument` naming `max_wait` when it is negative (nothing is checked), and
///         whatever `limiter.allow` throws (e.g. `std::invalid_argument` for a negative cost).
/// Example:
///   // Stay under a partner API's 5 calls per second: wait for a slot, at most 2 s.
///   ratelimit::MemoryLimiter<ratelimit::Gcra> outgoing(
///       ratelimit::Gcra{.limit = 5, .period = std::chrono::seconds(1), .burst = 1});
///   const ratelimit::Decision d = ratelimit::acquire(outgoing, "partner-api", 1, std::chrono::seconds(2));
///   if (d) { /* call the partner API now */ } else { /* give up: no slot within 2 s */ }
template <Limiter L, class Wait = SleepWaiter, Clock C = std::chrono::steady_clock>
Decision acquire(L& limiter, std::string_view key, std::int64_t cost, std::chrono::nanoseconds max_wait,
                 Wait&& wait = {}, C clock = {}) {
  if (max_wait < std::chrono::nanoseconds::zero()) detail::invalid("max_wait", "must be >= 0");
  auto now_ns = [&clock] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock.now().time_since_epoch()).count();
  };
  const std::int64_t deadline_ns = detail::saturating_add(now_ns(), max_wait.count());
  for (;;) {
    const Decision d = limiter.allow(key, cost);
    if (d.allowed || d.retry_after == Decision::never || d.retry_after.count() <= 0 ||
        detail::saturating_add(now_ns(), d.retry_after.count()) > deadline_ns) {
      return d;
    }
    wait(d.retry_after);
  }
}

}  // namespace ratelimit
