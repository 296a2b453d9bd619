#pragma once

/// @file
/// Deliberately simple reference models of include/ratelimit/README.md "Policy formulas", for tests only.
///
/// Written straight from the formulas of include/ratelimit/README.md "Policy formulas", in ticks, sharing no code with
/// the library's policies: the sliding log is a plain vector of (t, cost) entries, windows use plain integer math in
/// 128 bits, and the token bucket is modelled as an actual bucket of tokens (not as GCRA), so the contract's claim
/// "TokenBucket decides exactly as Gcra" is checked, not assumed. An absent key is full. Clock stepping back
/// (include/ratelimit/README.md "Guarantees"): the effective time is max(t, latest admitted write with cost >= 1).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ratelimit_test::model {

__extension__ typedef __int128 i128;

inline constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

/// A decision in ticks; `retry_after == kNever` when the cost exceeds the limit.
struct Outcome {
  bool allowed = false;
  std::int64_t limit = 0;
  std::int64_t remaining = 0;
  std::int64_t retry_after = 0;
  std::int64_t reset_after = 0;

  friend bool operator==(const Outcome&, const Outcome&) = default;
};

/// floor(a / b) for b > 0, any sign of a.
inline i128 floor_div(i128 a, i128 b) {
  i128 q = a / b;
  if (a % b != 0 && a < 0) --q;
  return q;
}

inline std::int64_t narrow(i128 v) { return static_cast<std::int64_t>(v); }

/// The outcome of one check and the state the key has if the check is committed.
template <class State>
struct Step {
  Outcome outcome;
  State next;
};

/// FixedWindow{L, W}: window index k_s and count c.
struct FixedWindowModel {
  std::int64_t L, W;

  struct State {
    std::int64_t written, ks, c;
  };

  [[nodiscard]] std::int64_t limit() const { return L; }

  [[nodiscard]] Step<State> check(const State* s, std::int64_t now, std::int64_t n) const {
    const std::int64_t t = s ? std::max(now, s->written) : now;
    const auto k = narrow(floor_div(t, W));
    i128 c = (s && s->ks == k) ? s->c : 0;  // k > k_s: a new window, c = 0
    const bool ok = c + n <= L;
    if (ok) c += n;
    const i128 window_end = i128{k + 1} * W;
    Outcome o{ok, L, narrow(L - c), 0, c > 0 ? narrow(window_end - t) : 0};
    if (n > L) {
      o.retry_after = kNever;
    } else if (!ok) {
      o.retry_after = narrow(window_end - t);
    }
    return {o, State{t, k, narrow(c)}};
  }

  [[nodiscard]] bool full(const State& s, std::int64_t now) const { return check(&s, now, 0).outcome.remaining == L; }
};

/// SlidingWindowLog{L, W}: one (t, cost) entry per admitted request, window (t - W, t].
struct SlidingWindowLogModel {
  std::int64_t L, W;

  struct State {
    std::vector<std::pair<std::int64_t, std::int64_t>> log;  // (timestamp, cost), oldest first
    std::int64_t written;
  };

  [[nodiscard]] std::int64_t limit() const { return L; }

  [[nodiscard]] Step<State> check(const State* s, std::int64_t now, std::int64_t n) const {
    const std::int64_t t = s ? std::max(now, s->written) : now;
    State next{{}, t};
    if (s) {
      for (const auto& e : s->log) {
        if (i128{e.first} > i128{t} - W) next.log.push_back(e);  // entries <= t - W are dropped
      }
    }
    i128 c = 0;
    for (const auto& e : next.log) c += e.second;
    const bool ok = c + n <= L;
    if (ok && n > 0) next.log.emplace_back(t, n);
    const i128 c_after = ok ? c + n : c;
    Outcome o{ok, L, narrow(L - c_after), 0, 0};
    if (c_after > 0) o.reset_after = narrow(i128{next.log.back().first} + W - t);
    if (n > L) {
      o.retry_after = kNever;
    } else if (!ok) {
      const i128 need = c + n - L;
      i128 sum = 0;
      for (const auto& e : next.log) {
        sum += e.second;
        if (sum >= need) {
          o.retry_after = narrow(i128{e.first} + W - t);
          break;
        }
      }
    }
    return {o, next};
  }

  [[nodiscard]] bool full(const State& s, std::int64_t now) const { return check(&s, now, 0).outcome.remaining == L; }
};

/// SlidingWindowCounter{L, W}: k_s, cur, prev; estimate prev*(W-r)/W + cur.
struct SlidingWindowCounterModel {
  std::int64_t L, W;

  struct State {
    std::int64_t written, ks, cur, prev;
  };

  [[nodiscard]] std::int64_t limit() const { return L; }

  [[nodiscard]] Step<State> check(const State* s, std::int64_t now, std::int64_t n) const {
    const std::int64_t t = s ? std::max(now, s->written) : now;
    const auto k = narrow(floor_div(t, W));
    const i128 r = i128{t} - i128{k} * W;
    i128 cur = 0, prev = 0;
    if (s && k == s->ks) {
      cur = s->cur;
      prev = s->prev;
    } else if (s && i128{k} == i128{s->ks} + 1) {
      prev = s->cur;
    }
    const i128 w = W, l = L;
    const bool ok = prev * (w - r) + (cur + n) * w <= l * w;
    const i128 cur_after = ok ? cur + n : cur;
    Outcome o{ok, L, 0, 0, 0};
    o.remaining = narrow(std::max<i128>(0, floor_div(l * w - prev * (w - r), w) - cur_after));
    o.reset_after = cur_after > 0 ? narrow(2 * w - r) : (prev > 0 ? narrow(w - r) : 0);
    if (n > L) {
      o.retry_after = kNever;
    } else if (!ok) {
      const i128 a = l - cur - n;
      bool done = false;
      if (prev > 0 && a >= 0) {
        const i128 r1 = w - floor_div(a * w, prev);
        if (r1 < w) {
          o.retry_after = narrow(r1 - r);
          done = true;
        }
      }
      if (!done) {
        const i128 r2 = cur > 0 ? std::max<i128>(0, w - floor_div((l - n) * w, cur)) : 0;
        o.retry_after = narrow((w - r) + r2);
      }
    }
    return {o, State{t, k, narrow(cur_after), narrow(prev)}};
  }

  [[nodiscard]] bool full(const State& s, std::int64_t now) const { return check(&s, now, 0).outcome.remaining == L; }
};

/// Gcra{L, P, B}: T = ceil(P / L), tau = B * T, one TAT.
struct GcraModel {
  std::int64_t L, P, B;

  struct State {
    std::int64_t tat, written;
  };

  [[nodiscard]] std::int64_t limit() const { return B; }
  [[nodiscard]] i128 T() const { return (i128{P} + L - 1) / L; }

  [[nodiscard]] Step<State> check(const State* s, std::int64_t now, std::int64_t n) const {
    const std::int64_t t = s ? std::max(now, s->written) : now;
    const i128 T_ = T(), tau = i128{B} * T_;
    const i128 TAT = s ? s->tat : t;  // absent: TAT = t
    const i128 tat = std::max<i128>(TAT, t);
    const i128 new_tat = tat + n * T_;
    const bool ok = new_tat - t <= tau;
    const i128 tat_after = ok ? new_tat : TAT;
    Outcome o{ok, B, 0, 0, 0};
    o.remaining = narrow(floor_div(i128{t} + tau - std::max<i128>(tat_after, t), T_));
    o.reset_after = narrow(std::max<i128>(0, tat_after - t));
    if (n > B) {
      o.retry_after = kNever;
    } else if (!ok) {
      o.retry_after = narrow(new_tat - t - tau);
    }
    return {o, State{narrow(tat_after), t}};
  }

  [[nodiscard]] bool full(const State& s, std::int64_t now) const { return check(&s, now, 0).outcome.remaining == B; }
};

/// TokenBucket{C, R, P} as a real bucket: whole tokens, and the time `last` at which the count was
/// exact; one token every T = ceil(P / R) after `last`. A full bucket drops its partial progress.
struct TokenBucketModel {
  std::int64_t C, R, P;

  struct State {
    std::int64_t tokens, last, written;
  };

  [[nodiscard]] std::int64_t limit() const { return C; }
  [[nodiscard]] std::int64_t T() const { return narrow((i128{P} + R - 1) / R); }

  [[nodiscard]] Step<State> check(const State* s, std::int64_t now, std::int64_t n) const {
    const std::int64_t t = s ? std::max(now, s->written) : now;
    const std::int64_t T_ = T();
    i128 tokens = C, last = t;
    if (s && s->tokens < C) {
      const i128 gained = (i128{t} - s->last) / T_;
      tokens = s->tokens + gained;
      last = s->last + gained * T_;
      if (tokens >= C) {
        tokens = C;
        last = t;
      }
    }
    const bool ok = n <= tokens;
    const i128 after = ok ? tokens - n : tokens;
    Outcome o{ok, C, narrow(after), 0, after == C ? 0 : narrow(last + (C - after) * T_ - t)};
    if (n > C) {
      o.retry_after = kNever;
    } else if (!ok) {
      o.retry_after = narrow(last + (n - tokens) * T_ - t);
    }
    return {o, State{narrow(after), narrow(last), t}};
  }

  [[nodiscard]] bool full(const State& s, std::int64_t now) const { return check(&s, now, 0).outcome.remaining == C; }
};

/// Per-key state for one model: `allow`, `peek` (include/ratelimit/README.md "Decisions"), `reset`, and `sweep` (forget
/// the keys that are full at `now`, as the in-memory backend may do at any time).
template <class Algo>
class Keyed {
 public:
  explicit Keyed(Algo algo) : algo_(std::move(algo)) {}

  [[nodiscard]] const Algo& algo() const { return algo_; }

  Outcome allow(const std::string& key, std::int64_t now, std::int64_t cost) {
    auto it = states_.find(key);
    auto step = algo_.check(it == states_.end() ? nullptr : &it->second, now, cost);
    if (step.outcome.allowed && cost >= 1) states_.insert_or_assign(key, std::move(step.next));
    return step.outcome;
  }

  /// A cost-1 request's `allowed` and `retry_after`; the current `remaining` and `reset_after`.
  [[nodiscard]] Outcome peek(const std::string& key, std::int64_t now) const {
    auto it = states_.find(key);
    const auto* s = it == states_.end() ? nullptr : &it->second;
    Outcome one = algo_.check(s, now, 1).outcome;
    const Outcome zero = algo_.check(s, now, 0).outcome;
    one.remaining = zero.remaining;
    one.reset_after = zero.reset_after;
    return one;
  }

  void reset(const std::string& key) { states_.erase(key); }

  void sweep(std::int64_t now) {
    for (auto it = states_.begin(); it != states_.end();) {
      it = algo_.full(it->second, now) ? states_.erase(it) : std::next(it);
    }
  }

  [[nodiscard]] std::size_t size() const { return states_.size(); }

 private:
  Algo algo_;
  std::map<std::string, typename Algo::State> states_;
};

}  // namespace ratelimit_test::model
