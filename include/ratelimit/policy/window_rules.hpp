#pragma once

/// @file
/// `detail::WindowRules`: what the three window policies' rules share (a limit and a window length in
/// ticks, validated once), on top of `detail::ViewedRules`.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/policy/viewed_rules.hpp"

namespace ratelimit::detail {

/// A window policy's limit and window length in ticks, validated by `window_ticks`.
struct WindowTicks {
  std::int64_t limit;
  std::int64_t window;
  std::int64_t horizon;  // the policy's longest wait: `horizon_windows` windows
};

/// Validates a window policy's parameters for a backend whose tick is `tick_ns` nanoseconds: `limit >= 1`,
/// `window` > 0 and a whole number of ticks, and the policy's longest wait (`horizon_windows` windows)
/// representable. Throws `std::invalid_argument` naming `<policy>.limit` or `<policy>.window`.
[[nodiscard]] inline WindowTicks window_ticks(std::int64_t limit, std::chrono::nanoseconds window, std::int64_t tick_ns,
                                              std::string_view policy, std::int64_t horizon_windows) {
  require_positive(limit, std::string(policy) + ".limit");
  const std::string window_field = std::string(policy) + ".window";
  const std::int64_t w = to_ticks(window, tick_ns, window_field);
  require_horizon(i128{w} * horizon_windows, tick_ns, window_field);
  return WindowTicks{limit, w, w * horizon_windows};
}

/// Base of a window policy's `Rules` (CRTP, see `ViewedRules`): the validated limit and window.
template <class Derived>
class WindowRules : public ViewedRules<Derived> {
 public:
  /// Requests (cost units) admitted per window; >= 1.
  [[nodiscard]] std::int64_t limit() const noexcept { return limit_; }
  /// The window length in ticks; >= 1.
  [[nodiscard]] std::int64_t window() const noexcept { return window_; }

  /// The same limit and window: the same rules (a key's state need not be converted between them).
  friend bool operator==(const WindowRules&, const WindowRules&) = default;

 protected:
  explicit WindowRules(WindowTicks t) noexcept
      : limit_(t.limit),
        window_(t.window),
        time_lo_(clamp_time(kInt64Min, t.horizon)),
        time_hi_(clamp_time(kInt64Max, t.horizon)) {}

  /// A window count after a debit of `cost` units owed (`settle` above the charge): `count + cost`, also past
  /// the limit, but leaving at most `max_debt` units beyond it (clamped, never refused), and never below
  /// `count` (a count already past the bound stays). Saturating: at most `INT64_MAX`. `cost`, `max_debt` >= 0.
  [[nodiscard]] std::int64_t debited(std::int64_t count, std::int64_t cost, std::int64_t max_debt) const noexcept {
    const std::int64_t cap = saturating_add(limit_, max_debt);
    const std::int64_t wanted = saturating_add(count, cost);
    const std::int64_t after = wanted < cap ? wanted : cap;
    return after > count ? after : count;
  }

  /// The effective time of a check at `now` of a state last written at `written`: the later of the two, kept
  /// where time plus twice the horizon cannot overflow (`clamp_time`, with its bounds computed once).
  [[nodiscard]] std::int64_t effective_time(std::int64_t now, std::int64_t written) const noexcept {
    const std::int64_t t = now > written ? now : written;
    return t < time_lo_ ? time_lo_ : (t > time_hi_ ? time_hi_ : t);
  }

  std::int64_t limit_;
  std::int64_t window_;
  std::int64_t time_lo_;
  std::int64_t time_hi_;
};

}  // namespace ratelimit::detail
