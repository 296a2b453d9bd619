#pragma once

/// @file
/// Blocking acquire for client-side throttling: wait until a limiter admits a request
/// (include/ratelimit/README.md "Shaping").

#include <chrono>
#include <concepts>
#include <cstdint>
#include <string_view>
#include <thread>

#include "ratelimit/clock.hpp"
#include "ratelimit/decision.hpp"
#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/jitter.hpp"
#include "ratelimit/limiter.hpp"
#include "ratelimit/reservation.hpp"

namespace ratelimit {

/// The default way `acquire` waits: `std::this_thread::sleep_for`.
struct SleepWaiter {
  /// Blocks the calling thread for `delay` (nanoseconds, > 0).
  void operator()(std::chrono::nanoseconds delay) const { std::this_thread::sleep_for(delay); }
};

/// What `acquire` calls to wait: anything callable with a `std::chrono::nanoseconds` delay.
template <class W>
concept AcquireWaiter = std::invocable<W&, std::chrono::nanoseconds>;

namespace detail {

/// The extra wait `jitter` adds to `delay` without passing `deadline_ns` (0 without jitter).
template <Clock C>
[[nodiscard]] std::chrono::nanoseconds jitter_within(Jitter* jitter, std::chrono::nanoseconds delay,
                                                     std::int64_t deadline_ns, C& clock) noexcept {
  if (jitter == nullptr) return std::chrono::nanoseconds::zero();
  const std::int64_t room = saturating_sub(saturating_sub(deadline_ns, now_ns(clock)), delay.count());
  const std::int64_t extra = jitter->draw().count();
  return std::chrono::nanoseconds(room <= 0 ? 0 : (extra < room ? extra : room));
}

/// Books a slot with `reserve` and sleeps until it: waiters of one key act in the order they booked, each
/// waking at its own slot. Books nothing when the slot is later than `max_wait`.
template <ReservingLimiter L, AcquireWaiter W, Clock C>
Decision acquire_by_reserving(L& limiter, std::string_view key, std::int64_t cost, std::chrono::nanoseconds max_wait,
                              Jitter* jitter, W& wait, C& clock) {
  const std::int64_t deadline_ns = saturating_add(now_ns(clock), max_wait.count());
  Reservation booked = limiter.reserve(key, cost, max_wait);
  Decision d = booked.decision();
  d.allowed = booked.ok();
  if (!booked.ok()) {
    d.retry_after = booked.delay();
    return d;
  }
  d.retry_after = std::chrono::nanoseconds::zero();
  const std::chrono::nanoseconds delay = booked.delay() + jitter_within(jitter, booked.delay(), deadline_ns, clock);
  if (delay > std::chrono::nanoseconds::zero()) {
    try {
      wait(delay);
    } catch (...) {
      booked.cancel();  // the caller will not act: give the slot back
      throw;
    }
  }
  return d;
}

/// Checks with `allow` and, on a denial, waits its `retry_after` (plus jitter) and checks again, until
/// admitted or the next wait would end past `deadline_ns` (on `clock`). Not ordered: concurrent callers race.
template <Limiter L, AcquireWaiter W, Clock C>
Decision acquire_by_retrying(L& limiter, std::string_view key, std::int64_t cost, std::int64_t deadline_ns,
                             Jitter* jitter, W& wait, C& clock) {
  for (;;) {
    const Decision d = limiter.allow(key, cost);
    if (d.allowed || d.retry_after == Decision::never || d.retry_after.count() <= 0 ||
        saturating_add(now_ns(clock), d.retry_after.count()) > deadline_ns) {
      return d;
    }
    wait(d.retry_after + jitter_within(jitter, d.retry_after, deadline_ns, clock));
  }
}

template <Limiter L, AcquireWaiter W, Clock C>
Decision acquire(L& limiter, std::string_view key, std::int64_t cost, std::chrono::nanoseconds max_wait, Jitter* jitter,
                 W& wait, C& clock) {
  if (max_wait < std::chrono::nanoseconds::zero()) invalid("max_wait", "must be >= 0");
  if constexpr (ReservingLimiter<L>) {
    return acquire_by_reserving(limiter, key, cost, max_wait, jitter, wait, clock);
  } else {
    return acquire_by_retrying(limiter, key, cost, saturating_add(now_ns(clock), max_wait.count()), jitter, wait,
                               clock);
  }
}

}  // namespace detail

/// Waits until `limiter` admits `cost` units for `key`, for outgoing calls to someone else's API
/// (include/ratelimit/README.md "Shaping").
///
/// A `ReservingLimiter` (GCRA or token bucket, in memory or on Redis) books a slot with
/// `reserve(key, cost, max_wait)` and waits exactly until it: waiters of one key act in the order they
/// booked (FIFO, also across processes sharing a Redis key), each wakes once at its own slot (no
/// thundering herd), and a slot later than `max_wait` books nothing and returns at once, its
/// `retry_after` the wait it would have needed. If `wait` throws, the slot is cancelled.
///
/// Any other `Limiter` is checked with `allow`; on a denial `acquire` waits `retry_after` with
/// `wait(delay)` and tries again (another caller may have taken the quota meanwhile: concurrent callers
/// race; `FairAcquirer` serves them in arrival order). `max_wait` bounds the whole call as read on
/// `clock`: time spent in checks and sleeps that overshoot count too. When the next wait would end past
/// the deadline (`clock.now()` at the call + `max_wait`), or the request can never pass
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
/// @return the admitting decision (after a booked slot: the key's state at the booking), or the last denial.
/// @throws `std::invalid_argument` naming `max_wait` when it is negative (nothing is checked), and
///         whatever `limiter.allow` / `reserve` throws (e.g. `std::invalid_argument` for a negative cost).
/// Example:
///   // Stay under a partner API's 5 calls per second: wait for a slot, at most 2 s.
///   ratelimit::MemoryLimiter<ratelimit::Gcra> outgoing(
///       ratelimit::Gcra{.limit = 5, .period = std::chrono::seconds(1), .burst = 1});
///   const ratelimit::Decision d = ratelimit::acquire(outgoing, "partner-api", 1, std::chrono::seconds(2));
///   if (d) { /* call the partner API now */ } else { /* give up: no slot within 2 s */ }
template <Limiter L, AcquireWaiter W = SleepWaiter, Clock C = std::chrono::steady_clock>
Decision acquire(L& limiter, std::string_view key, std::int64_t cost, std::chrono::nanoseconds max_wait, W&& wait = {},
                 C clock = {}) {
  return detail::acquire(limiter, key, cost, max_wait, nullptr, wait, clock);
}

/// `acquire` that adds a random extra wait from `jitter` to each wait (include/ratelimit/README.md
/// "Shaping"), cut so that the call still ends within `max_wait`: waiters of many processes whose waits
/// end at one instant spread out. Waiting longer never admits more; with reservations, two waiters of
/// one process may act out of booking order by up to `jitter.max()`. Same parameters, results and
/// exceptions as `acquire` above.
template <Limiter L, AcquireWaiter W = SleepWaiter, Clock C = std::chrono::steady_clock>
Decision acquire(L& limiter, std::string_view key, std::int64_t cost, std::chrono::nanoseconds max_wait, Jitter& jitter,
                 W&& wait = {}, C clock = {}) {
  return detail::acquire(limiter, key, cost, max_wait, &jitter, wait, clock);
}

}  // namespace ratelimit
