#pragma once

/// @file
/// Sliding window log: an exact count of what was admitted in the last `window`.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/detail/entry_log.hpp"
#include "ratelimit/policy/policy.hpp"
#include "ratelimit/policy/window_rules.hpp"

namespace ratelimit {

/// Sliding window log (include/ratelimit/README.md "Policy formulas"): every admitted request is kept as a (timestamp,
/// cost) entry until it leaves the window `(t - W, t]`.
///
/// Exact (never more than `limit` in any window of length `window`), at the price of memory that grows
/// with the number of admitted requests per window (at most `limit` entries per key). A plain aggregate,
/// validated when a limiter is made from it (`std::invalid_argument` naming `SlidingWindowLog.limit` or
/// `SlidingWindowLog.window`).
/// Example:
///   // Never more than 5 logins in any 10 minutes, however they fall on the clock.
///   ratelimit::SlidingWindowLog policy{.limit = 5, .window = std::chrono::minutes(10)};
///   ratelimit::MemoryLimiter<ratelimit::SlidingWindowLog> limiter(policy);
///   if (!limiter.allow("login:alice")) { /* answer 429 */ }
struct SlidingWindowLog {
  static constexpr std::string_view kind = "sliding_window_log";

  /// Equal when every parameter is (two policies of equal rules in ticks may still differ, e.g. in the
  /// window they advertise).
  friend bool operator==(const SlidingWindowLog&, const SlidingWindowLog&) = default;

  /// Requests (cost units) admitted in any window of length `window`; >= 1.
  std::int64_t limit = 0;
  /// Window length; > 0 and a whole number of the backend's ticks.
  std::chrono::nanoseconds window{0};

  class Rules : public detail::WindowRules<Rules> {
   public:
    /// One admitted request, or several admitted at the same tick (their costs summed: they expire
    /// together, so this is exact and keeps at most `limit` entries). A refund that leaves live entries
    /// older than its time adds a cost-0 entry at that time, its write time (include/ratelimit/README.md "Refunds"); it
    /// is always the newest entry, and the next write replaces it: at most `limit + 1` entries.
    using Entry = detail::LogEntry;

    /// Per-key state: the entries oldest first, two inline and the rest in a heap ring (`detail::EntryLog`),
    /// so that a key with one or two live entries owns no heap block.
    struct State {
      detail::EntryLog entries;

      [[nodiscard]] std::int64_t written() const noexcept { return entries.newest_at(); }
      /// Heap bytes the log holds (its ring's capacity, expired entries included): what the store counts.
      [[nodiscard]] std::size_t heap_bytes() const noexcept { return entries.heap_bytes(); }
    };

    /// The most heap bytes one key's log can hold: `limit + 1` entries, in a ring that grows by
    /// doubling (so up to twice that). The store refuses a byte budget smaller than this. Saturates at
    /// `SIZE_MAX` (limits from 2^59 - 1 up: 2 * 2^59 entries of 16 bytes are 2^64), which no budget covers: such a
    /// limit is refused, never wrapped, unless `MemoryOptions::max_bytes` is `SIZE_MAX`, which turns the budget off.
    [[nodiscard]] std::size_t max_heap_bytes() const noexcept {
      constexpr std::size_t kMaxEntries = std::numeric_limits<std::size_t>::max() / (2 * sizeof(Entry));
      const auto entries = static_cast<std::size_t>(limit_) + 1;  // limit_ >= 1: no wrap here
      return entries > kMaxEntries ? std::numeric_limits<std::size_t>::max() : 2 * entries * sizeof(Entry);
    }

    /// Gives back up to `cost` units, newest entries first (the refunded request is normally the
    /// latest one): entries shrink or disappear until `cost` is given back or no live entry is left.
    /// Returns the state as a cost-0 check sees it afterwards. `cost >= 0`. A refund of `cost >= 1` that
    /// leaves live entries writes the state at its time `t`: a clock that then steps back stands at `t`.
    TickDecision refund(State& s, std::int64_t now, std::int64_t cost) const {
      const std::int64_t t = view(s, now).now;  // evaluate at the time the refunded entries set
      drop_expired(s, view(s, now));
      std::int64_t left = cost;
      while (left > 0 && !s.entries.empty()) {
        const std::int64_t newest = s.entries.back().cost;  // a refund's cost-0 mark goes first
        const std::int64_t taken = newest < left ? newest : left;
        s.entries.take_from_back(taken);  // and drops the entry when nothing is left of it
        left -= taken;
      }
      if (cost > 0 && s.entries.total() > 0 && s.entries.back().at < t) s.entries.push_back(Entry{t, 0});
      return evaluate(s, t, 0);
    }

    /// Debits `cost` units owed after the fact (`settle` above the charge): one entry `(t, n)` (merged into an
    /// entry at `t`), also past the limit, with the live count at most `limit + max_debt`
    /// (`WindowRules::debited`). The log keeps at most `limit + 1` entries: a debit when it holds `limit` already
    /// is added to the newest entry, which moves to `t` (its units then count longer: the safe side). Returns the
    /// state as a cost-0 check sees it afterwards. `cost`, `max_debt` >= 0. Throws `std::bad_alloc` when the
    /// log cannot grow (nothing debited then).
    TickDecision debit(State& s, std::int64_t now, std::int64_t cost, std::int64_t max_debt) const {
      const View v = view(s, now);
      drop_expired(s, v);  // the total is then the live count, which the clamp keeps in int64
      const std::int64_t live = s.entries.total();
      const std::int64_t added = debited(live, cost, max_debt) - live;
      if (added > 0) {
        if (s.entries.size() < static_cast<std::size_t>(limit_)) {
          s.entries.advance(0, 0, v.now, added);
        } else {
          s.entries.add_to_back(v.now, added);
        }
      }
      return evaluate(s, v.now, 0);
    }

    /// Carries a key's usage kept under `old` over to these rules (include/ratelimit/README.md "Changing a policy at
    /// run time"): the entries keep their times and costs, so the new window counts those inside it and compares them
    /// with the new limit. Only at the clock's edge does a time move: a longer window's time stands still earlier, and
    /// an entry written after that point moves to it (still inside the window there, so every count stays), keeping
    /// every entry at or before the effective time.
    void carry(const Rules&, State& s, std::int64_t) const noexcept {
      const std::int64_t edge = detail::clamp_time(detail::kInt64Max, window_);
      for (std::size_t i = s.entries.size(); i > 0 && s.entries[i - 1].at > edge; --i) s.entries.set_at(i - 1, edge);
    }

   private:
    // Built only by `SlidingWindowLog::rules`, which validates the values (a zero window would divide by zero).
    friend struct SlidingWindowLog;
    friend class detail::ViewedRules<Rules>;
    explicit Rules(detail::WindowTicks t) noexcept : WindowRules(t) {}

    struct View {
      std::int64_t now;        // effective time: never before the newest entry
      std::size_t first_live;  // index of the oldest entry inside (now - W, now]
      std::int64_t expired;    // sum of costs of the entries before it
    };

    [[nodiscard]] View view(const State& s, std::int64_t now) const noexcept {
      const std::int64_t written = s.written();
      const std::int64_t t = effective_time(now, written);
      const detail::EntryLog::Prefix gone = s.entries.prefix_through(t - window_);
      return View{t, gone.count, gone.cost};
    }

    [[nodiscard]] TickDecision evaluate_at(const State& s, const View& v, std::int64_t cost) const noexcept {
      const std::int64_t count = s.entries.total() - v.expired;
      // Cost 0 only reports the state: allowed, also over a limit lowered below the count.
      TickDecision d{.allowed = cost == 0 || cost <= limit_ - count, .limit = limit_};
      const std::int64_t after = d.allowed ? count + cost : count;
      d.remaining = after < limit_ ? limit_ - after : 0;  // a log carried over a lowered limit may exceed it
      if (d.allowed && cost > 0) {
        d.reset_after = window_;  // the newest entry is now
      } else {
        d.reset_after = count > 0 ? newest_cost_at(s) + window_ - v.now : 0;
      }
      if (cost > limit_) return detail::never_passes(d);
      if (!d.allowed) {
        // Oldest first, until the entries that leave free enough room for this request.
        const std::int64_t need = cost - (limit_ - count);  // count + cost - L, without overflow
        std::int64_t freed = 0;
        for (std::size_t i = v.first_live; i < s.entries.size(); ++i) {
          freed += s.entries[i].cost;
          if (freed >= need) {
            d.retry_after = s.entries[i].at + window_ - v.now;
            break;
          }
        }
      }
      return d;
    }

    static void commit_at(State& s, const View& v, std::int64_t cost) {
      // Forgets the entries that left the window, then merges into the newest entry (or replaces a refund's
      // mark) or appends.
      s.entries.advance(v.first_live, v.expired, v.now, cost);
    }

    static bool full_at(const State& s, const View& v) noexcept { return s.entries.total() == v.expired; }

    /// The time of the newest entry that holds units (a refund's cost-0 mark may follow it); the oldest
    /// possible time when none does. Written as a loop so that no path indexes an empty log.
    static std::int64_t newest_cost_at(const State& s) noexcept {
      for (std::size_t i = s.entries.size(); i > 0; --i) {
        if (s.entries[i - 1].cost != 0) return s.entries[i - 1].at;
      }
      return detail::kInt64Min;
    }

    /// Forgets the entries that left the window (the state is the same for every decision).
    static void drop_expired(State& s, const View& v) noexcept { s.entries.pop_front(v.first_live, v.expired); }
  };

  /// Validates for a backend whose tick is `tick_ns` nanoseconds.
  /// Throws `std::invalid_argument` naming `SlidingWindowLog.limit` or `SlidingWindowLog.window`.
  [[nodiscard]] Rules rules(std::int64_t tick_ns) const {
    return Rules(detail::window_ticks(limit, window, tick_ns, "SlidingWindowLog", 1));
  }
};

}  // namespace ratelimit
