#pragma once

/// @file
/// `Shaper`: nginx `limit_req`'s `burst` and `delay` on a reserving limiter: pass, delay by a stated
/// time, or refuse (include/ratelimit/README.md "Shaping").

#include <chrono>
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>

#include "ratelimit/decision.hpp"
#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/limiter.hpp"
#include "ratelimit/policy/gcra.hpp"
#include "ratelimit/reservation.hpp"

namespace ratelimit {

/// nginx's `limit_req zone=... rate=limit/period burst=B delay=N` (include/ratelimit/README.md "Shaping"):
/// at one instant, from idle, the first `delay + 1` requests pass at once, the next `burst - delay` are
/// delayed to the rate (the k-th of them by k emission intervals), the rest are refused.
/// A plain aggregate; `gcra()` and `Shaper` validate it.
struct ShapingRule {
  /// Requests per `period` in the long run; >= 1.
  std::int64_t limit = 0;
  /// > 0, a whole number of the backend's ticks, `period / limit >= 1 tick` (as `Gcra.period`).
  std::chrono::nanoseconds period{0};
  /// nginx's `burst`: requests beyond the rate a key may hold, passed or delayed; >= `delay`.
  std::int64_t burst = 0;
  /// nginx's `delay`: requests beyond the rate passed without delay; in [0, burst] (`burst` is nginx's `nodelay`).
  std::int64_t delay = 0;

  /// The policy of the limiter under a `Shaper`: `Gcra{limit, period, .burst = delay + 1}`. Throws
  /// `std::invalid_argument` naming `ShapingRule.limit`, `.period`, `.burst` or `.delay` when out of range.
  [[nodiscard]] Gcra gcra() const {
    (void)validate(1);
    return Gcra{.limit = limit, .period = period, .burst = delay + 1};
  }

  /// Validates for a backend whose tick is `tick_ns` nanoseconds; returns the underlying GCRA's rules.
  /// Throws `std::invalid_argument` naming the field.
  [[nodiscard]] Gcra::Rules validate(std::int64_t tick_ns) const {
    if (delay < 0) detail::invalid("ShapingRule.delay", "must be >= 0, got " + std::to_string(delay));
    if (burst < delay) {
      detail::invalid("ShapingRule.burst",
                      "must be >= ShapingRule.delay (" + std::to_string(delay) + "), got " + std::to_string(burst));
    }
    // `delay + 1` in 128 bits: at INT64_MAX it would wrap into a rule that passes.
    detail::require_horizon(detail::i128{delay} + 1, tick_ns, "ShapingRule.delay");
    static constexpr Gcra::FieldNames names{"ShapingRule.limit", "ShapingRule.period", "ShapingRule.delay"};
    const Gcra::Rules rules = Gcra::make_rules(limit, period, delay + 1, tick_ns, names);
    // The longest wait a booking may be given, (burst + 1) T, twice over as GCRA's horizon.
    detail::require_horizon((detail::i128{burst} + 1) * rules.emission_interval() * 2, tick_ns, "ShapingRule.burst");
    return rules;
  }
};

/// What `Shaper::shape` decided for one request.
enum class ShapeOutcome {
  passed,   ///< serve it now
  delayed,  ///< serve it after `Shaped::delay`
  refused,  ///< refuse it now (429), nothing booked
};

/// "passed", "delayed" or "refused" (logs, test messages).
[[nodiscard]] constexpr std::string_view to_string(ShapeOutcome outcome) noexcept {
  return outcome == ShapeOutcome::passed ? "passed" : (outcome == ShapeOutcome::delayed ? "delayed" : "refused");
}

/// One request's outcome from `Shaper::shape`.
struct Shaped {
  ShapeOutcome outcome = ShapeOutcome::refused;
  /// `delayed`: how long to hold the request before serving it (> 0); 0 otherwise.
  std::chrono::nanoseconds delay{0};
  /// `refused`: how long until the same request would be admitted (passed or delayed), for
  /// `Retry-After`; `Decision::never` when its cost exceeds `delay + 1`; 0 otherwise.
  std::chrono::nanoseconds retry_after{0};
  /// The booked slot (`passed`, `delayed`): `cancel()` it when the client leaves during the delay, and
  /// the slot goes to the next request. Its `decision()` has the numbers for rate-limit headers.
  Reservation reservation;

  /// True unless refused.
  explicit operator bool() const noexcept { return outcome != ShapeOutcome::refused; }
};

/// Shapes requests as nginx's `limit_req` with `burst` and `delay` (include/ratelimit/README.md "Shaping"):
/// each is passed at once, delayed by a stated time, or refused at once, decided in one atomic step
/// (`reserve(key, cost, max_delay)`: one lock in memory, one script on Redis).
///
/// Exactly, in the limiter's ticks: `T = ceil(period / limit)`, the limiter's GCRA has burst `delay + 1`
/// (`tau = (delay + 1) T`), and `max_delay = (burst - delay) T`. A request of cost `c` at `t` on a key of
/// theoretical arrival time `TAT` needs `wait = max(0, max(TAT, t) + c T - tau - t)`: passed when
/// `wait == 0`, delayed by `wait` when `0 < wait <= max_delay` (booked: `TAT += c T`), refused when
/// `wait > max_delay` (nothing booked; `retry_after = wait - max_delay`).
///
/// Thread-safe as far as the limiter is (both backends are). The limiter must outlive it; its policy must
/// stay `rule.gcra()` (after `set_policy`, make a new `Shaper`).
/// @tparam L a `ReservingLimiter` on a GCRA or token bucket with `rules()` and `kTickNs`:
///           `MemoryLimiter<Gcra, C>` or `redis::RedisLimiter<Gcra, C>`.
/// Example:
///   // nginx: limit_req_zone ... rate=5r/s; limit_req zone=api burst=12 delay=8;
///   const ratelimit::ShapingRule rule{.limit = 5, .period = std::chrono::seconds(1), .burst = 12, .delay = 8};
///   ratelimit::MemoryLimiter<ratelimit::Gcra> limiter(rule.gcra());
///   ratelimit::Shaper shaper(limiter, rule);
///   const std::string client_ip = "203.0.113.7";
///   ratelimit::Shaped s = shaper.shape(client_ip);
///   if (!s) { /* 429, Retry-After: s.retry_after */ }
///   else { std::this_thread::sleep_for(s.delay); /* serve */ }
template <ReservingLimiter L>
  requires requires(const L& limiter) {
    { L::kTickNs } -> std::convertible_to<std::int64_t>;
    { limiter.rules() } -> std::convertible_to<Gcra::Rules>;
  }
class Shaper {
 public:
  /// Shapes with `limiter` (kept by reference), whose policy must be `rule.gcra()`. Throws
  /// `std::invalid_argument` naming the rule's field when out of range, or `ShapingRule` when the
  /// limiter's rules are not the rule's GCRA.
  Shaper(L& limiter, const ShapingRule& rule) : limiter_(limiter) {
    const Gcra::Rules rules = rule.validate(L::kTickNs);
    if (!(Gcra::Rules(limiter.rules()) == rules)) {
      detail::invalid("ShapingRule", "the limiter's policy must be ShapingRule::gcra() (a GCRA of burst delay + 1)");
    }
    max_delay_ = std::chrono::nanoseconds((rule.burst - rule.delay) * rules.emission_interval() * L::kTickNs);
  }

  /// Passes, delays or refuses a request of `cost` units for `key`, booking its slot unless refused.
  /// Thread-safe. Throws what the limiter's `reserve` throws (`std::invalid_argument` for a negative
  /// cost or a bad key).
  [[nodiscard]] Shaped shape(std::string_view key, std::int64_t cost = 1) {
    Shaped s;
    s.reservation = limiter_.reserve(key, cost, max_delay_);
    const std::chrono::nanoseconds wait = s.reservation.delay();
    if (!s.reservation.ok()) {
      s.retry_after = wait > max_delay_ && wait != Decision::never ? wait - max_delay_ : wait;
    } else if (wait > std::chrono::nanoseconds::zero()) {
      s.outcome = ShapeOutcome::delayed;
      s.delay = wait;
    } else {
      s.outcome = ShapeOutcome::passed;
    }
    return s;
  }

  /// The longest delay given: `(burst - delay) T`.
  [[nodiscard]] std::chrono::nanoseconds max_delay() const noexcept { return max_delay_; }

 private:
  L& limiter_;
  std::chrono::nanoseconds max_delay_{0};
};

}  // namespace ratelimit
