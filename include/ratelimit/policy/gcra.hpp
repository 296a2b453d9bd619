#pragma once

/// @file
/// GCRA, the generic cell rate algorithm.

#include <chrono>
#include <cstdint>
#include <string_view>

#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/detail/divider.hpp"
#include "ratelimit/policy/policy.hpp"
#include "ratelimit/policy/viewed_rules.hpp"
#include "ratelimit/reservation.hpp"

namespace ratelimit {

/// Generic cell rate algorithm (include/ratelimit/README.md "Policy formulas"), from ATM traffic shaping (ITU-T I.371,
/// the "virtual scheduling" form): one theoretical arrival time (TAT) per key.
///
/// `limit` requests per `period` on average, with up to `burst` at once from idle. Emission interval
/// `T = ceil(period / limit)` ticks (rounded up so the rate is never exceeded), tolerance `tau = burst * T`.
/// Exact, smooth, and the smallest state of all: one TAT (plus the latest write time for clock steps).
/// A plain aggregate, validated when a limiter is made from it (`std::invalid_argument` naming `Gcra.limit`,
/// `Gcra.period` or `Gcra.burst`).
/// Example:
///   // 10 requests per second on average, up to 20 at once from idle.
///   ratelimit::Gcra policy{.limit = 10, .period = std::chrono::seconds(1), .burst = 20};
///   ratelimit::MemoryLimiter<ratelimit::Gcra> limiter(policy);
///   const ratelimit::Decision d = limiter.allow("client-42");
///   if (!d) { /* answer 429 with Retry-After: d.retry_after */ }
struct Gcra {
  static constexpr std::string_view kind = "gcra";

  /// Equal when every parameter is (two policies of equal rules in ticks may still differ, e.g. in the
  /// window they advertise).
  friend bool operator==(const Gcra&, const Gcra&) = default;

  /// Requests (cost units) per `period` in the long run; >= 1.
  std::int64_t limit = 0;
  /// The period `limit` refers to; > 0, a whole number of ticks, and `period / limit >= 1 tick`.
  std::chrono::nanoseconds period{0};
  /// Requests that may pass at once from idle; >= 1.
  std::int64_t burst = 0;

  class Rules : public detail::ViewedRules<Rules> {
   public:
    /// Per-key state: the theoretical arrival time and the time of the latest write. Both absent
    /// (`kInt64Min`) for a full key: `TAT = max(TAT, t)` is then `t`.
    struct State {
      std::int64_t tat = detail::kInt64Min;
      std::int64_t written = detail::kInt64Min;
    };

    [[nodiscard]] std::int64_t limit() const noexcept { return burst_; }
    /// T, in ticks.
    [[nodiscard]] std::int64_t emission_interval() const noexcept { return emission_interval_; }
    /// tau = burst * T, in ticks.
    [[nodiscard]] std::int64_t tolerance() const noexcept { return tolerance_; }

    /// The same burst and emission interval: the same rules (a key's state need not be converted).
    friend bool operator==(const Rules&, const Rules&) = default;

    /// Gives back up to `cost` units: `TAT = max(TAT - n*T, t)`, so the key never holds more than
    /// `burst` (its state cannot go past full). Returns the state as a cost-0 check sees it afterwards.
    /// `cost >= 0`.
    TickDecision refund(State& s, std::int64_t now, std::int64_t cost) const noexcept {
      const std::int64_t t = view(s, now);
      if (s.tat > t && cost > 0) {
        const std::int64_t backlog = s.tat - t;
        // n*T >= backlog  <=>  n >= ceil(backlog / T); otherwise n*T < backlog cannot overflow.
        s.tat = cost >= detail::ceil_div(backlog, emission_interval_) ? t : s.tat - cost * emission_interval_;
        s.written = t;
      }
      return evaluate_at(s, t, 0);
    }

    /// What `reserve` answers, in ticks.
    struct Booking {
      /// True when the units were booked.
      bool ok = false;
      /// How long after `t` the caller may act (>= 0); for a refusal the wait the booking would have
      /// needed, `TickDecision::never` when the cost exceeds the burst.
      std::int64_t delay = 0;
      /// What `cancel` needs (meaningful when `ok`).
      detail::ReservationTicket ticket{};
      /// The key's state afterwards as a cost-0 check sees it (`remaining` 0 while the backlog is past tau).
      TickDecision decision{};
    };

    /// The longest backlog `TAT - t` a booking or a debit may leave, in ticks: the policies' horizon (~73 years
    /// of nanoseconds) in this backend's ticks, so that every duration a decision reports stays representable.
    /// Near the end of the int64 clock it is smaller (`TAT` itself must fit): never below `2 * tau`.
    [[nodiscard]] std::int64_t max_backlog() const noexcept { return max_backlog_; }

    /// Books `cost` units at `now` (include/ratelimit/README.md "Reservations"): `base = max(TAT, t)`,
    /// `new_tat = base + cost*T`, `delay = max(0, new_tat - tau - t)`. Refused, with nothing written, when
    /// `cost > burst` (`delay = never`), when `delay > max_delay`, or when the new backlog would pass
    /// `max_backlog()`; else `TAT = new_tat`, written at `t`. The backlog may pass tau: later bookings wait.
    /// `cost >= 0`, `max_delay >= 0` (the caller checks).
    Booking reserve(State& s, std::int64_t now, std::int64_t cost, std::int64_t max_delay) const noexcept {
      const std::int64_t t = view(s, now);
      Booking b;
      if (cost > burst_) {
        b.delay = TickDecision::never;
      } else {
        // Up to max_backlog + 4 tau (a state written under other rules) plus tau: in 128 bits to be sure.
        const detail::i128 backlog = detail::i128{s.tat > t ? s.tat - t : 0} + detail::i128{cost} * emission_interval_;
        const detail::i128 delay = backlog > tolerance_ ? backlog - tolerance_ : 0;
        b.delay = static_cast<std::int64_t>(delay);
        if (delay <= max_delay && backlog <= backlog_cap(t)) {
          s.tat = t + static_cast<std::int64_t>(backlog);
          s.written = t;
          b.ok = true;
          b.ticket = detail::ReservationTicket{s.tat, t + b.delay, cost};
        }
      }
      b.decision = evaluate_at(s, t, 0);
      return b;
    }

    /// Gives back what is unspent of a booking (x/time/rate's `CancelAt`, include/ratelimit/README.md
    /// "Reservations"): nothing once `act_at <= t`; else `later = max(0, TAT - booked_tat)` (what later bookings
    /// added), `restore = min(cost*T - later, TAT - (booked_tat - cost*T))`, and when `restore > 0`:
    /// `TAT = max(TAT - restore, t)`, written at `t`. The second bound keeps the key at or above the TAT the
    /// booking started from: a reset, refund or settle since gave its units back already.
    /// In 128 bits: a ticket may come from other rules (a policy changed since the booking).
    void cancel(State& s, std::int64_t now, const detail::ReservationTicket& ticket) const noexcept {
      const std::int64_t t = view(s, now);
      if (ticket.act_at <= t) return;
      const detail::i128 booked = detail::i128{ticket.cost} * emission_interval_;
      const detail::i128 added_later = detail::i128{s.tat} - ticket.booked_tat;
      const detail::i128 unspent = booked - (added_later > 0 ? added_later : 0);
      const detail::i128 held = detail::i128{s.tat} - (detail::i128{ticket.booked_tat} - booked);
      const detail::i128 restore = unspent < held ? unspent : held;
      if (restore <= 0) return;
      const detail::i128 tat = detail::i128{s.tat} - restore;
      s.tat = tat > t ? static_cast<std::int64_t>(tat) : t;
      s.written = t;
    }

    /// Debits `cost` units owed after the fact (`settle` above the charge): `TAT = max(TAT, t) + cost*T`,
    /// also past tau, but leaving at most `max_debt` units owed beyond the burst (a backlog of at most
    /// `tau + max_debt*T`, and at most `max_backlog()`): clamped, never refused, and never lowered. Written
    /// at `t` (also when the bound leaves the backlog as it was). Returns the state afterwards as a cost-0 check sees
    /// it. `cost >= 0`, `max_debt >= 0`.
    TickDecision debit(State& s, std::int64_t now, std::int64_t cost, std::int64_t max_debt) const noexcept {
      const std::int64_t t = view(s, now);
      if (cost > 0) {
        using detail::i128;
        const i128 backlog = s.tat > t ? i128{s.tat} - t : 0;
        const i128 debt_cap = i128{tolerance_} + i128{max_debt} * emission_interval_;
        const i128 cap = debt_cap < backlog_cap(t) ? debt_cap : i128{backlog_cap(t)};
        const i128 wanted = backlog + i128{cost} * emission_interval_;
        const i128 after = wanted < cap ? wanted : cap;
        if (after > backlog) s.tat = t + static_cast<std::int64_t>(after);
        s.written = t;  // also at the bound: a debit is a write, as on Redis
      }
      return evaluate_at(s, t, 0);
    }

    /// Carries a key's usage kept under `old` over to these rules at `now` (include/ratelimit/README.md "Changing a
    /// policy at run time"): the used units `ceil((TAT - t) / T_old)` stay used, `TAT = t + min(units, burst) * T`
    /// (clamped to the new tolerance), written at the effective time `t`. A full key stays full, also
    /// written at `t`: a check that read its clock before the change (an earlier `now`) must not see the
    /// old backlog that was left at its time, under the new rules.
    void carry(const Rules& old, State& s, std::int64_t now) const noexcept {
      const std::int64_t t = view(s, now);
      if (s.tat <= t) {
        if (s.tat != detail::kInt64Min) s.written = t;
        return;
      }
      const std::int64_t used = detail::ceil_div(s.tat - t, old.emission_interval_);  // <= old burst
      s.tat = t + (used < burst_ ? used : burst_) * emission_interval_;
      s.written = t;
    }

   private:
    // Built only by `Gcra::rules`, which validates the values (a zero window would divide by zero).
    friend struct Gcra;
    friend class detail::ViewedRules<Rules>;
    Rules(std::int64_t burst, std::int64_t emission_interval, std::int64_t max_backlog)
        : burst_(burst),
          emission_interval_(emission_interval),
          tolerance_(burst * emission_interval),
          per_interval_(static_cast<std::uint64_t>(emission_interval)),
          time_lo_(detail::clamp_time(detail::kInt64Min, 2 * tolerance_)),
          time_hi_(detail::clamp_time(detail::kInt64Max, 2 * tolerance_)),
          max_backlog_(max_backlog) {}

    // The view is the effective time `t`; the *_at functions take it already computed.
    [[nodiscard]] TickDecision evaluate_at(const State& s, std::int64_t t, std::int64_t cost) const noexcept {
      const std::int64_t backlog = s.tat > t ? s.tat - t : 0;  // max(TAT, t) - t, in [0, tau]
      TickDecision d{.limit = burst_};
      const bool fits = cost <= burst_;
      const std::int64_t new_backlog = fits ? backlog + cost * emission_interval_ : 0;  // <= 2 tau
      d.allowed = fits && new_backlog <= tolerance_;
      const std::int64_t after = d.allowed ? new_backlog : backlog;
      // A backlog past tau (a debt, a booking ahead, or rules of a larger tolerance) leaves nothing: remaining 0.
      d.remaining = after < tolerance_ ? truncated_quotient(tolerance_ - after) : 0;
      d.reset_after = after;
      if (!fits) return detail::never_passes(d);
      d.retry_after = d.allowed ? 0 : new_backlog - tolerance_;
      return d;
    }

    void commit_at(State& s, std::int64_t t, std::int64_t cost) const noexcept {
      s.tat = (s.tat > t ? s.tat : t) + cost * emission_interval_;
      s.written = t;
    }

    static bool full_at(const State& s, std::int64_t t) noexcept { return s.tat <= t; }

    /// `n / T` for `n >= 0`.
    [[nodiscard]] std::int64_t truncated_quotient(std::int64_t n) const noexcept {
      return static_cast<std::int64_t>(per_interval_.quotient(static_cast<std::uint64_t>(n)));
    }

    /// The longest backlog a write at `t` may leave: `max_backlog_`, less near the end of the clock so that
    /// `t + backlog` fits (`t <= time_hi_` keeps that at least `4 tau`).
    [[nodiscard]] std::int64_t backlog_cap(std::int64_t t) const noexcept {
      return t > 0 && detail::kInt64Max - t < max_backlog_ ? detail::kInt64Max - t : max_backlog_;
    }

    [[nodiscard]] std::int64_t view(const State& s, std::int64_t now) const noexcept {
      const std::int64_t t = now > s.written ? now : s.written;  // clamp_time(t, 2 * tau), bounds computed once
      return t < time_lo_ ? time_lo_ : (t > time_hi_ ? time_hi_ : t);
    }

    std::int64_t burst_;
    std::int64_t emission_interval_;
    std::int64_t tolerance_;
    // Derived from the three above (so `==` still compares the rules): a check divides by T with a multiply-high
    // (the hardware division took a quarter of a hot key's profile samples) and clamps the time to bounds
    // computed once.
    detail::Divider per_interval_;
    std::int64_t time_lo_;
    std::int64_t time_hi_;
    std::int64_t max_backlog_;  // the horizon in ticks: equal for every rules of one backend
  };

  /// Validates for a backend whose tick is `tick_ns` nanoseconds. Throws `std::invalid_argument`
  /// naming `Gcra.limit`, `Gcra.period` or `Gcra.burst`.
  [[nodiscard]] Rules rules(std::int64_t tick_ns) const { return make_rules(limit, period, burst, tick_ns, names); }

  /// Field names for error messages; `TokenBucket` reuses the validation under its own names.
  struct FieldNames {
    std::string_view limit, period, burst;
  };
  static constexpr FieldNames names{"Gcra.limit", "Gcra.period", "Gcra.burst"};

  /// Validation shared with `TokenBucket` (which decides exactly as GCRA).
  [[nodiscard]] static Rules make_rules(std::int64_t limit, std::chrono::nanoseconds period, std::int64_t burst,
                                        std::int64_t tick_ns, const FieldNames& field) {
    detail::require_positive(limit, field.limit);
    detail::require_positive(burst, field.burst);
    const std::int64_t p = detail::to_ticks(period, tick_ns, field.period);
    if (p < limit) {
      detail::invalid(field.period, "period / limit must be at least one tick (" + std::to_string(tick_ns) +
                                        " ns): a rate above one per tick cannot be enforced");
    }
    const std::int64_t emission_interval = detail::ceil_div(p, limit);
    // Twice tau is the largest intermediate (backlog + cost * T). Name the period when one emission
    // interval alone is too long, else the burst that multiplies it.
    detail::require_horizon(detail::i128{emission_interval} * 2, tick_ns, field.period);
    detail::require_horizon(detail::i128{burst} * emission_interval * 2, tick_ns, field.burst);
    return Rules(burst, emission_interval, detail::kMaxHorizonNs / tick_ns);
  }
};

}  // namespace ratelimit
