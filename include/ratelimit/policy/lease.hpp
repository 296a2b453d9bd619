#pragma once

/// @file
/// Budget leases: the arithmetic of granting a slice of a key's budget to one process for a bounded time and
/// taking back what it did not use, exactly (include/ratelimit/redis/README.md "Budget leases"). Pure functions of
/// (state, now), like the policies; no backend, no clock. The Redis lease scripts (lua/parts/*_lease.lua) compute the
/// same.

#include <cstdint>
#include <type_traits>

#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/policy/fixed_window.hpp"
#include "ratelimit/policy/gcra.hpp"
#include "ratelimit/policy/policy.hpp"
#include "ratelimit/policy/sliding_window_counter.hpp"
#include "ratelimit/policy/sliding_window_log.hpp"
#include "ratelimit/policy/token_bucket.hpp"

namespace ratelimit::lease {

/// The answer to a lease request: the decision for the `need` units the caller must serve now, and how many
/// units (>= need when allowed, 0 when denied) the store gave it, with what the caller must send back when it
/// returns unused units.
struct Grant {
  /// For the `need` units: `limit` is the lease-mode limit (the reduced burst, or the window limit),
  /// `remaining` what is left in the store after the grant, `retry_after` the wait until `need` fits.
  TickDecision decision{};
  /// Units granted (0 when denied or for need = want = 0).
  std::int64_t units = 0;
  /// GCRA / token bucket: the TAT right after this grant. Fixed window: the start of the grant's window.
  std::int64_t mark = 0;
  /// GCRA / token bucket: the store's grant counter right after this grant (0 for a fixed window).
  std::int64_t granted_after = 0;
  /// Ticks after the store's time during which the units may be served: the rest of the window for a fixed
  /// window, `TickDecision::never` (no bound but the lease lifetime) for GCRA and token bucket.
  std::int64_t serve_for = TickDecision::never;
};

/// `evaluate` and `peek` of a lease, derived once from its `grant(state, now, need, want)` (CRTP).
template <class Derived>
class LeaseQueries {
 public:
  /// What a request of `cost` would get at `now` without a lease (the decision of a grant of exactly
  /// `cost`), writing nothing.
  template <class State>
  [[nodiscard]] TickDecision evaluate(const State& s, std::int64_t now, std::int64_t cost) const noexcept {
    State copy = s;
    return static_cast<const Derived&>(*this).grant(copy, now, cost, cost).decision;
  }

  /// `peek`: cost 1's `allowed` / `retry_after`, cost 0's `remaining` / `reset_after`; writes nothing.
  template <class State>
  [[nodiscard]] TickDecision peek(const State& s, std::int64_t now) const noexcept {
    TickDecision one = evaluate(s, now, 1);
    const TickDecision zero = evaluate(s, now, 0);
    one.remaining = zero.remaining;
    one.reset_after = zero.reset_after;
    return one;
  }
};

/// Leases for GCRA and the token bucket (one TAT per key).
///
/// With lease lifetime `L` (every leased unit is served at most `L` after the store granted it), every grant -
/// a lease or a single request - is checked against the reduced tolerance `tau - L` (include/ratelimit/redis/README.md
/// "Budget leases", trap (a)), so units served up to `L` late still fit the policy's bound `B + floor(d / T)` in any
/// interval of length d. A key whose tolerance cannot cover a lease (`B * T <= L`) is not leasable: `lifetime()` is
/// then 0, every grant uses the full tolerance, and the caller must serve at once (per-request checks).
/// Thread-safety: immutable; the functions taking a `State&` must be serialized per state by the store.
class GcraLease : public LeaseQueries<GcraLease> {
 public:
  /// The stored state of a leased key. Absent (all defaults) is full.
  struct State {
    /// Theoretical arrival time, ticks; `kInt64Min` when absent.
    std::int64_t tat = detail::kInt64Min;
    /// Time of the latest write (effective time never goes back before it).
    std::int64_t written = detail::kInt64Min;
    /// Units granted so far on this state (a counter; never decreases). Returns use it (trap (b)).
    std::int64_t granted = 0;
    /// The largest TAT any grant left; a store keeps the state at least until then (Redis: its TTL).
    std::int64_t horizon = detail::kInt64Min;
  };

  /// `rules` validated for the store's tick; `lifetime_ticks` >= 0 is the lease lifetime L in those ticks.
  GcraLease(const Gcra::Rules& rules, std::int64_t lifetime_ticks) noexcept
      : T_(rules.emission_interval()),
        tau_(rules.tolerance()),
        lifetime_(lifetime_ticks > 0 && lifetime_ticks < rules.tolerance() ? lifetime_ticks : 0),
        tolerance_(tau_ - lifetime_) {}

  /// False when the policy's tolerance cannot cover a lease (`B * T <= L`): per-request checks then.
  [[nodiscard]] bool leasable() const noexcept { return lifetime_ > 0; }
  /// The lifetime in effect: L when leasable, else 0.
  [[nodiscard]] std::int64_t lifetime() const noexcept { return lifetime_; }
  /// The tolerance every grant is checked against: `tau - lifetime()`, ticks; >= T.
  [[nodiscard]] std::int64_t tolerance() const noexcept { return tolerance_; }
  /// The emission interval T, ticks.
  [[nodiscard]] std::int64_t emission_interval() const noexcept { return T_; }
  /// The lease-mode limit: the most units one grant can hold, `floor(tolerance() / T)`; >= 1.
  [[nodiscard]] std::int64_t limit() const noexcept { return tolerance_ / T_; }

  /// Grants between `need` and `want` units at `now` (`0 <= need`, `want` is raised to `need`): all of `want`
  /// that fits under the reduced tolerance, or a denial when `need` does not fit (nothing written).
  [[nodiscard]] Grant grant(State& s, std::int64_t now, std::int64_t need, std::int64_t want) const noexcept {
    const std::int64_t t = view(s, now);
    const std::int64_t backlog = s.tat > t ? s.tat - t : 0;
    const std::int64_t room = tolerance_ - backlog;
    const std::int64_t avail = room > 0 ? room / T_ : 0;
    Grant g;
    g.decision.limit = limit();
    g.decision.remaining = avail;
    g.decision.reset_after = backlog;
    g.mark = t + backlog;
    g.granted_after = s.granted;
    if (need > limit()) return g.decision = detail::never_passes(g.decision), g;
    if (need > avail) {
      g.decision.retry_after = backlog + need * T_ - tolerance_;
      return g;
    }
    const std::int64_t units = want > avail ? avail : (want < need ? need : want);
    g.decision.allowed = true;
    g.units = units;
    if (units > 0) {
      s.tat = t + backlog + units * T_;
      s.written = t;
      s.granted += units;
      if (s.tat > s.horizon) s.horizon = s.tat;
    }
    g.decision.remaining = avail - units;
    g.decision.reset_after = backlog + units * T_;
    g.mark = t + backlog + units * T_;
    g.granted_after = s.granted;
    return g;
  }

  /// Gives back `unused` units of the grant that left TAT `mark` and counter `granted_after`
  /// (include/ratelimit/redis/README.md "Budget leases", trap (b)). With `t` the effective time and `A = max(TAT, t)`
  /// the TAT lowers to `min(A, max(A - min(unused * T, mark - t), t + T * (units granted since), t))`: never below the
  /// slots of units granted after the lease (which the lease's own slots may no longer lie under), and never by budget
  /// the passing time has already refilled. Nothing when `mark <= t` or the counter shows the state was forgotten
  /// since. Returns the state as a cost-0 check sees it.
  TickDecision give_back(State& s, std::int64_t now, std::int64_t unused, std::int64_t mark,
                         std::int64_t granted_after) const noexcept {
    const std::int64_t t = view(s, now);
    const std::int64_t backlog = s.tat > t ? s.tat - t : 0;
    if (unused > 0 && backlog > 0 && mark > t && s.granted >= granted_after) {
      const std::int64_t ahead = mark - t;  // the lease's slots still in the future, at most
      const std::int64_t delta = unused >= detail::ceil_div(ahead, T_) ? ahead : unused * T_;
      const std::int64_t later = s.granted - granted_after;
      // The slots of later grants: at least `later * T` past t (capped at the backlog: no overflow).
      const std::int64_t floor_backlog = later >= detail::ceil_div(backlog, T_) ? backlog : later * T_;
      std::int64_t new_backlog = backlog - delta;
      if (new_backlog < floor_backlog) new_backlog = floor_backlog;
      if (new_backlog < 0) new_backlog = 0;
      if (new_backlog < backlog) {
        s.tat = t + new_backlog;
        s.written = t;
      }
    }
    return evaluate(s, t, 0);
  }

 private:
  [[nodiscard]] std::int64_t view(const State& s, std::int64_t now) const noexcept {
    return detail::clamp_time(now > s.written ? now : s.written, 2 * tau_);
  }

  std::int64_t T_;
  std::int64_t tau_;
  std::int64_t lifetime_;
  std::int64_t tolerance_;
};

/// Leases for the fixed window: a grant takes units from the current window's count and may be served only
/// until the window ends (`Grant::serve_for`), so every window still admits at most `limit` units, whenever
/// they are served. No tolerance is reduced; a returned unit goes back only into the window it came from.
/// Thread-safety: immutable; the functions taking a `State&` must be serialized per state by the store.
class FixedWindowLease : public LeaseQueries<FixedWindowLease> {
 public:
  /// The same state as the fixed window's: latest write time and the count of its window.
  using State = FixedWindow::Rules::State;

  /// `rules` validated for the store's tick; the lifetime plays no part in the arithmetic (it bounds serving
  /// on the caller's side, together with `Grant::serve_for`).
  explicit FixedWindowLease(const FixedWindow::Rules& rules, std::int64_t /*lifetime_ticks*/ = 0) noexcept
      : limit_(rules.limit()), window_(rules.window()) {}

  /// Always true: a window's remaining time bounds each lease.
  [[nodiscard]] static constexpr bool leasable() noexcept { return true; }
  /// The lease-mode limit: the window's limit.
  [[nodiscard]] std::int64_t limit() const noexcept { return limit_; }

  /// Grants between `need` and `want` units of the current window, or denies when `need` does not fit.
  [[nodiscard]] Grant grant(State& s, std::int64_t now, std::int64_t need, std::int64_t want) const noexcept {
    const View v = view(s, now);
    Grant g;
    g.decision.limit = limit_;
    g.decision.remaining = limit_ - v.count;
    g.decision.reset_after = v.count > 0 ? window_ - v.offset : 0;
    g.mark = v.start;
    g.granted_after = 0;
    g.serve_for = window_ - v.offset;
    if (need > limit_) return g.decision = detail::never_passes(g.decision), g;
    const std::int64_t avail = limit_ - v.count;
    if (need > avail) {
      g.decision.retry_after = window_ - v.offset;
      return g;
    }
    const std::int64_t units = want > avail ? avail : (want < need ? need : want);
    g.decision.allowed = true;
    g.units = units;
    if (units > 0) {
      s.written = v.now;
      s.count = v.count + units;
    }
    g.decision.remaining = avail - units;
    g.decision.reset_after = v.count + units > 0 ? window_ - v.offset : 0;
    return g;
  }

  /// Gives back `unused` units of the grant made in the window starting at `mark`: `c = max(0, c - unused)`
  /// if that window is still the current one, else nothing (its units are gone with it). Returns the state
  /// as a cost-0 check sees it.
  TickDecision give_back(State& s, std::int64_t now, std::int64_t unused, std::int64_t mark,
                         std::int64_t /*granted_after*/ = 0) const noexcept {
    const View v = view(s, now);
    if (unused > 0 && v.count > 0 && v.start == mark) {
      s.written = v.now;
      s.count = v.count > unused ? v.count - unused : 0;
    }
    return evaluate(s, now, 0);
  }

 private:
  struct View {
    std::int64_t now;
    std::int64_t start;
    std::int64_t offset;
    std::int64_t count;
  };
  [[nodiscard]] View view(const State& s, std::int64_t now) const noexcept {
    const std::int64_t t = detail::clamp_time(now > s.written ? now : s.written, window_);
    const std::int64_t start = detail::floor_div(t, window_) * window_;
    const bool same = s.count > 0 && s.written >= start;
    return View{t, start, t - start, same ? s.count : 0};
  }

  std::int64_t limit_;
  std::int64_t window_;
};

/// The lease arithmetic of policy `P`: `GcraLease` for `Gcra` and `TokenBucket`, `FixedWindowLease` for
/// `FixedWindow`. The sliding windows are refused at compile time (see the static_assert).
template <class P>
struct LeaseFor {
  static_assert(!std::is_same_v<P, SlidingWindowLog> && !std::is_same_v<P, SlidingWindowCounter>,
                "ratelimit leases: SlidingWindowLog and SlidingWindowCounter cannot be leased exactly. A leased unit "
                "is served at an unknown time up to the lease lifetime after its grant; a sliding window counts "
                "every unit at its own time and has no tolerance to absorb that delay (and the counter is an "
                "estimate), so a fleet could exceed the limit in some window. Use Gcra, TokenBucket or "
                "FixedWindow with LeasedLimiter, or RedisLimiter for sliding windows "
                "(include/ratelimit/redis/README.md \"Budget leases\").");
  static_assert(std::is_same_v<P, Gcra> || std::is_same_v<P, TokenBucket> || std::is_same_v<P, FixedWindow> ||
                    std::is_same_v<P, SlidingWindowLog> || std::is_same_v<P, SlidingWindowCounter>,
                "ratelimit leases: only Gcra, TokenBucket and FixedWindow can be leased");
  using type = void;
};
template <>
struct LeaseFor<Gcra> {
  using type = GcraLease;
};
template <>
struct LeaseFor<TokenBucket> {
  using type = GcraLease;
};
template <>
struct LeaseFor<FixedWindow> {
  using type = FixedWindowLease;
};

/// The lease arithmetic of `P` (see `LeaseFor`).
template <class P>
using LeaseOf = typename LeaseFor<P>::type;

}  // namespace ratelimit::lease
