#pragma once

/// @file
/// Fixed window: at most `limit` per window of length `window`, windows aligned to the clock's epoch.

#include <chrono>
#include <cstdint>
#include <string_view>

#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/policy/policy.hpp"
#include "ratelimit/policy/window_rules.hpp"

namespace ratelimit {

/// Fixed window counter (include/ratelimit/README.md "Policy formulas"): a count per aligned window, reset at each
/// window edge.
///
/// Cheapest and simplest; allows up to `2 * limit` across a window edge (the boundary burst).
/// A plain aggregate, validated when a limiter is made from it (`std::invalid_argument` naming
/// `FixedWindow.limit` or `FixedWindow.window`).
/// Example:
///   // At most 100 requests per minute and client; windows are whole minutes since the clock's epoch.
///   ratelimit::FixedWindow policy{.limit = 100, .window = std::chrono::minutes(1)};
///   ratelimit::MemoryLimiter<ratelimit::FixedWindow> limiter(policy);
///   if (!limiter.allow("client-42")) { /* answer 429 */ }
struct FixedWindow {
  static constexpr std::string_view kind = "fixed_window";

  /// Equal when every parameter is (two policies of equal rules in ticks may still differ, e.g. in the
  /// window they advertise).
  friend bool operator==(const FixedWindow&, const FixedWindow&) = default;

  /// Requests (cost units) admitted per window; >= 1.
  std::int64_t limit = 0;
  /// Window length; > 0 and a whole number of the backend's ticks.
  std::chrono::nanoseconds window{0};

  /// Validated parameters in ticks and the pure decision functions.
  class Rules : public detail::WindowRules<Rules> {
   public:
    /// Per-key state: the time of the latest write (its window is `floor(written / W)`) and the count.
    struct State {
      std::int64_t written = detail::kInt64Min;
      std::int64_t count = 0;
    };

    /// Gives back up to `cost` units consumed in the current window: `c = max(0, c - n)`. Units of an
    /// earlier window are gone already, so nothing is given back for them. Returns the state as a cost-0
    /// check sees it afterwards. `cost >= 0` (the caller checks).
    TickDecision refund(State& s, std::int64_t now, std::int64_t cost) const noexcept {
      const View v = view(s, now);
      if (v.count > 0 && cost > 0) {
        s.written = v.now;
        s.count = v.count > cost ? v.count - cost : 0;
      }
      return evaluate(s, now, 0);
    }

    /// Debits `cost` units owed after the fact (`settle` above the charge) to the current window, the one the
    /// request was charged in while it is current: `c = c + n`, also past the limit, at most `limit + max_debt`
    /// (`WindowRules::debited`), written at the effective time. Returns the state as a cost-0 check sees it
    /// afterwards (`remaining` 0 past the limit; `reset_after` when the window ends). `cost`, `max_debt` >= 0.
    TickDecision debit(State& s, std::int64_t now, std::int64_t cost, std::int64_t max_debt) const noexcept {
      const View v = view(s, now);
      if (cost > 0) {
        s.written = v.now;
        s.count = debited(v.count, cost, max_debt);
      }
      return evaluate(s, now, 0);
    }

    /// Carries a key's usage kept under `old` over to these rules at `now` (include/ratelimit/README.md "Changing a
    /// policy at run time"): the count of the current (old) window is kept as the count of the current new window
    /// (written at the effective time `t`) and compared with the new limit; a count of an earlier window
    /// is gone already.
    void carry(const Rules& old, State& s, std::int64_t now) const noexcept {
      const std::int64_t count = old.view(s, now).count;
      if (count == 0) {  // full: the new windows must not see an old window's count either
        s.count = 0;
        return;
      }
      s.written = view(s, now).now;
      s.count = count;
    }

   private:
    // Built only by `FixedWindow::rules`, which validates the values (a zero window would divide by zero).
    friend struct FixedWindow;
    friend class detail::ViewedRules<Rules>;
    explicit Rules(detail::WindowTicks t) noexcept : WindowRules(t) {}

    struct View {
      std::int64_t now;     // effective time: never before the latest write
      std::int64_t offset;  // r = t - k*W
      std::int64_t count;   // c after rolling over to the current window
    };

    [[nodiscard]] TickDecision evaluate_at(const State&, const View& v, std::int64_t cost) const noexcept {
      // Cost 0 only reports the state: allowed, also over a limit lowered below the count.
      TickDecision d{.allowed = cost == 0 || cost <= limit_ - v.count, .limit = limit_};
      const std::int64_t after = d.allowed ? v.count + cost : v.count;
      d.remaining = after < limit_ ? limit_ - after : 0;  // a count carried over a lowered limit may exceed it
      d.reset_after = after > 0 ? window_ - v.offset : 0;
      if (cost > limit_) return detail::never_passes(d);
      d.retry_after = d.allowed ? 0 : window_ - v.offset;
      return d;
    }

    static void commit_at(State& s, const View& v, std::int64_t cost) noexcept {
      s.written = v.now;
      s.count = v.count + cost;
    }

    static bool full_at(const State&, const View& v) noexcept { return v.count == 0; }

    [[nodiscard]] View view(const State& s, std::int64_t now) const noexcept {
      // The window's start from `now` alone unless the state was written later (a clock stepped back): the
      // division then need not wait for the state to load (a hot key: about 2.5 ns less, bench/README.md "Results").
      std::int64_t t = effective_time(now, now);
      std::int64_t start = detail::floor_div(t, window_) * window_;
      if (s.written > now) [[unlikely]] {
        t = effective_time(now, s.written);
        start = detail::floor_div(t, window_) * window_;
      }
      // written <= t, so it lies in t's window exactly when it is not before the window's start.
      const bool same_window = s.count > 0 && s.written >= start;
      return View{t, t - start, same_window ? s.count : 0};
    }
  };

  /// Validates for a backend whose tick is `tick_ns` nanoseconds.
  /// Throws `std::invalid_argument` naming `FixedWindow.limit` or `FixedWindow.window`.
  [[nodiscard]] Rules rules(std::int64_t tick_ns) const {
    return Rules(detail::window_ticks(limit, window, tick_ns, "FixedWindow", 1));
  }
};

}  // namespace ratelimit
