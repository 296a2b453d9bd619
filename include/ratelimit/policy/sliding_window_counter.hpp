#pragma once

/// @file
/// Sliding window counter: the previous window's count, weighted by how much of it still overlaps
/// the sliding window, plus the current window's count.

#include <chrono>
#include <cstdint>
#include <string_view>

#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/detail/divider.hpp"
#include "ratelimit/policy/policy.hpp"
#include "ratelimit/policy/window_rules.hpp"

namespace ratelimit {

/// Sliding window counter (include/ratelimit/README.md "Policy formulas"), as popularised by Cloudflare: the estimate
/// `prev * (W - r) / W + cur` smooths the fixed window's boundary burst with two counters per key.
///
/// Approximate: it assumes the previous window's requests were spread evenly. Computed exactly in integers
/// (no floating point): in 64 bits when the previous window's count times the window fits, else in 128.
/// A plain aggregate, validated when a limiter is made from it (`std::invalid_argument` naming
/// `SlidingWindowCounter.limit` or `SlidingWindowCounter.window`).
/// Example:
///   // About 1,000 requests per hour, without the fixed window's burst at the hour's edge.
///   ratelimit::SlidingWindowCounter policy{.limit = 1000, .window = std::chrono::hours(1)};
///   ratelimit::MemoryLimiter<ratelimit::SlidingWindowCounter> limiter(policy);
///   if (!limiter.allow("api-key:7f3a")) { /* answer 429 */ }
struct SlidingWindowCounter {
  static constexpr std::string_view kind = "sliding_window_counter";

  /// Equal when every parameter is (two policies of equal rules in ticks may still differ, e.g. in the
  /// window they advertise).
  friend bool operator==(const SlidingWindowCounter&, const SlidingWindowCounter&) = default;

  /// Requests (cost units) admitted per (estimated) window; >= 1.
  std::int64_t limit = 0;
  /// Window length; > 0 and a whole number of the backend's ticks.
  std::chrono::nanoseconds window{0};

  class Rules : public detail::WindowRules<Rules> {
   public:
    /// Per-key state: the latest write (its window is `k_s = floor(written / W)`), and the counts of
    /// window `k_s` (`current`) and of window `k_s - 1` (`previous`).
    struct State {
      std::int64_t written = detail::kInt64Min;
      std::int64_t current = 0;
      std::int64_t previous = 0;
    };

    /// Gives back up to `cost` units: from the current window first, `cur = max(0, cur - n)`, then what is
    /// left of `n` from the previous one, whose units still weigh `(W - r) / W` (a request admitted just
    /// before the window's edge). A refund that gives back units writes the state at the effective time.
    /// Returns the state as a cost-0 check sees it afterwards. `cost >= 0`.
    TickDecision refund(State& s, std::int64_t now, std::int64_t cost) const noexcept {
      const View v = view(s, now);
      if ((v.current > 0 || v.previous > 0) && cost > 0) {
        const std::int64_t from_current = v.current < cost ? v.current : cost;
        const std::int64_t rest = cost - from_current;
        s.written = v.now;
        s.current = v.current - from_current;
        s.previous = v.previous > rest ? v.previous - rest : 0;
      }
      return evaluate(s, now, 0);
    }

    /// Debits `cost` units owed after the fact (`settle` above the charge) to the current window's count, the
    /// window the request was charged in while it is current: `cur = cur + n`, also past the limit, with `cur` at
    /// most `limit + max_debt` (`WindowRules::debited`), written at the effective time. Returns the state as a
    /// cost-0 check sees it afterwards. `cost`, `max_debt` >= 0.
    TickDecision debit(State& s, std::int64_t now, std::int64_t cost, std::int64_t max_debt) const noexcept {
      const View v = view(s, now);
      if (cost > 0) {
        s.written = v.now;
        s.current = debited(v.current, cost, max_debt);
        s.previous = v.previous;
      }
      return evaluate(s, now, 0);
    }

    /// Carries a key's usage kept under `old` over to these rules at `now` (include/ratelimit/README.md "Changing a
    /// policy at run time"): the current and previous windows' counts (as the old windows see them at the effective
    /// time `t`) become the counts of the new current and previous windows, written at `t`.
    void carry(const Rules& old, State& s, std::int64_t now) const noexcept {
      const View v = old.view(s, now);
      if (v.current == 0 && v.previous == 0) {  // full: the new windows must not see older counts either
        s.current = s.previous = 0;
        return;
      }
      s.written = view(s, now).now;
      s.current = v.current;
      s.previous = v.previous;
    }

   private:
    // Built only by `SlidingWindowCounter::rules`, which validates the values (a zero window would divide by zero).
    friend struct SlidingWindowCounter;
    friend class detail::ViewedRules<Rules>;
    explicit Rules(detail::WindowTicks t) noexcept
        : WindowRules(t), divider_(static_cast<std::uint64_t>(t.window)), previous_max_(detail::kInt64Max / t.window) {}

    // Divides by `window_` without a hardware division on every check (the window start, the 64-bit path).
    detail::Divider divider_;

    // The largest previous-window count whose weight `prev * W` fits in int64 (the 64-bit path of `evaluate_at`).
    std::int64_t previous_max_;

    struct View {
      std::int64_t now;  // effective time: never before the latest write
      std::int64_t offset;
      std::int64_t current;
      std::int64_t previous;
    };

    [[nodiscard]] TickDecision evaluate_at(const State&, const View& v, std::int64_t cost) const noexcept {
      using detail::i128;
      const i128 w = window_;
      const bool fits = cost <= limit_;
      TickDecision d{.limit = limit_};
      // Admitted when prev * (W - r) + (cur + cost) * W <= limit * W; room = (limit * W - prev * (W - r)) / W
      // (truncated). In 64 bits when prev * W fits (see `weigh`), else in 128 (a __divti3 call).
      std::int64_t room = 0;
      if (v.previous <= previous_max_) {
        const Weighed x = weigh(v, cost);
        d.allowed = cost == 0 || (fits && x.allowed);
        room = x.room;
      } else {
        const i128 weighted_prev = i128{v.previous} * (w - v.offset);
        // Cost 0 only reports the state: allowed, also over a limit lowered below the counts.
        d.allowed = cost == 0 || (fits && weighted_prev + (i128{v.current} + cost) * w <= i128{limit_} * w);
        room = static_cast<std::int64_t>((i128{limit_} * w - weighted_prev) / w);
      }
      const std::int64_t current = d.allowed ? v.current + cost : v.current;
      d.remaining = room > current ? room - current : 0;  // room may be far below 0: no subtraction then
      d.reset_after = current > 0 ? 2 * window_ - v.offset : (v.previous > 0 ? window_ - v.offset : 0);
      if (!fits) return detail::never_passes(d);
      if (!d.allowed) {
        const std::int64_t a = limit_ - v.current - cost;
        if (v.previous > 0 && a >= 0) {
          const auto r1 = static_cast<std::int64_t>(w - i128{a} * w / v.previous);
          if (r1 < window_) {
            d.retry_after = r1 - v.offset;
            return d;
          }
        }
        const std::int64_t r2 = v.current > 0 ? static_cast<std::int64_t>(w - i128{limit_ - cost} * w / v.current) : 0;
        d.retry_after = (window_ - v.offset) + (r2 > 0 ? r2 : 0);
      }
      return d;
    }

    struct Weighed {
      bool allowed;  // the admission inequality, for cost <= limit
      std::int64_t room;
    };

    /// The admission test and the room of `evaluate_at` without 128-bit products, for `prev <= previous_max_`,
    /// so `x = prev * (W - r) <= prev * W` fits: with integers, `x + (cur + cost) * W <= limit * W` holds
    /// exactly when `ceil(x / W) <= limit - cost - cur`, and the truncated `(limit * W - x) / W` is
    /// `limit - ceil(x / W)` when `x <= limit * W` and `limit - floor(x / W)` when not. The same values as the
    /// 128-bit computation, for every input.
    [[nodiscard]] Weighed weigh(const View& v, std::int64_t cost) const noexcept {
      const auto x = static_cast<std::uint64_t>(v.previous) * static_cast<std::uint64_t>(window_ - v.offset);
      const auto w = static_cast<std::uint64_t>(window_);
      const auto up = static_cast<std::int64_t>(divider_.quotient(x + (w - 1)));  // x + W - 1 < 2^64
      // limit - cost - cur: computed only when cost <= limit, so it cannot overflow (counts are >= 0).
      const bool allowed = cost <= limit_ && up <= limit_ - cost - v.current;
      if (up <= limit_) [[likely]]
        return {allowed, limit_ - up};
      const bool exact = static_cast<std::uint64_t>(up) * w == x;  // floor(x / W) = ceil(x / W) - (inexact)
      return {allowed, limit_ - up + (exact ? 0 : 1)};
    }

    static void commit_at(State& s, const View& v, std::int64_t cost) noexcept {
      s.written = v.now;
      s.current = v.current + cost;
      s.previous = v.previous;
    }

    static bool full_at(const State&, const View& v) noexcept { return v.current == 0 && v.previous == 0; }

    [[nodiscard]] View view(const State& s, std::int64_t now) const noexcept {
      const std::int64_t t = effective_time(now, s.written);  // clamped for a horizon of two windows
      const std::int64_t start = divider_.floor_quotient(t) * window_;
      View v{t, t - start, 0, 0};
      // written <= t: it is in t's window (k_s = k) when not before its start, in the one before
      // (k_s = k - 1) when not before that one's start. The clamp keeps start - W in range.
      if (s.written >= start) {
        v.current = s.current;
        v.previous = s.previous;
      } else if (s.written >= start - window_) {
        v.previous = s.current;
      }
      return v;
    }
  };

  /// Validates for a backend whose tick is `tick_ns` nanoseconds.
  /// Throws `std::invalid_argument` naming `SlidingWindowCounter.limit` or `SlidingWindowCounter.window`.
  [[nodiscard]] Rules rules(std::int64_t tick_ns) const {
    return Rules(detail::window_ticks(limit, window, tick_ns, "SlidingWindowCounter", 2));
  }
};

}  // namespace ratelimit
