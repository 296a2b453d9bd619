// libFuzzer target: policy arithmetic. Random parameters (zero, negative, near int64's ends), random times
// (steps back, huge jumps, the ends of int64) and costs (negative, 0, around the limit, int64 max) against
// every policy's Rules, checked against a deliberately simple reference model written from include/ratelimit/README.md
// "Policy formulas" (plain formulas, 128-bit where a product may overflow, an unmerged entry list for the log).
//
// Fails (abort) on: UB (built with -fsanitize=undefined, no recovery), an exception other than
// std::invalid_argument naming the field, a broken invariant, or a decision that differs from the model.
#include <fuzzer/FuzzedDataProvider.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <ratelimit/ratelimit.hpp>

namespace {

using i128 = __int128;
using ratelimit::TickDecision;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kNever = TickDecision::never;

[[noreturn]] void fail(const char* what, long long a = 0, long long b = 0) {
  std::fprintf(stderr, "policy_fuzz: %s (%lld, %lld)\n", what, a, b);
  std::abort();
}
void check(bool ok, const char* what, long long a = 0, long long b = 0) {
  if (!ok) fail(what, a, b);
}

// --- The reference model (include/ratelimit/README.md "Policy formulas", "Guarantees", "Clock readings near the ends
// of int64") ---

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const i128 q = i128{a} / b;
  return static_cast<std::int64_t>((i128{a} % b != 0 && a < 0) ? q - 1 : q);
}
// Time stands still at the latest write; readings are clamped so that t +/- 2 * horizon fits in int64.
std::int64_t effective(bool has, std::int64_t written, std::int64_t now, std::int64_t horizon) {
  std::int64_t t = has && written > now ? written : now;
  const std::int64_t lo = kMin + 2 * horizon + 1, hi = kMax - 2 * horizon - 1;
  return t < lo ? lo : (t > hi ? hi : t);
}

struct FixedWindowModel {
  std::int64_t L, W;
  FixedWindowModel(std::int64_t l_, std::int64_t w_) : L(l_), W(w_) {}
  bool has = false;
  std::int64_t written = 0, ks = 0, c = 0;
  std::int64_t pending_t = 0, pending_k = 0;

  TickDecision eval(std::int64_t now, std::int64_t n) {
    const std::int64_t t = effective(has, written, now, W);
    const std::int64_t k = floor_div(t, W);
    const std::int64_t c0 = has && ks == k ? c : 0;
    TickDecision d{.allowed = i128{c0} + n <= L, .limit = L};
    const std::int64_t after = d.allowed ? c0 + n : c0;
    d.remaining = L - after;
    const auto to_end = static_cast<std::int64_t>(i128{k + 1} * W - t);
    d.reset_after = after > 0 ? to_end : 0;
    d.retry_after = n > L ? kNever : (d.allowed ? 0 : to_end);
    pending_t = t;
    pending_k = k;
    c_after = after;
    return d;
  }
  std::int64_t c_after = 0;
  void commit() { has = true, written = pending_t, ks = pending_k, c = c_after; }
};

struct SlidingLogModel {
  std::int64_t L, W;
  SlidingLogModel(std::int64_t l_, std::int64_t w_) : L(l_), W(w_) {}
  bool has = false;
  std::int64_t written = 0;
  std::deque<std::pair<std::int64_t, std::int64_t>> entries;  // (timestamp, cost), one per admitted request
  std::int64_t pending_t = 0, pending_n = 0;

  TickDecision eval(std::int64_t now, std::int64_t n) {
    const std::int64_t t = effective(has, written, now, W);
    i128 c = 0;
    std::int64_t newest = 0;
    for (const auto& [ts, cost] : entries) {
      if (i128{ts} > i128{t} - W) c += cost, newest = ts;
    }
    TickDecision d{.allowed = c + n <= L, .limit = L};
    const i128 after = d.allowed ? c + n : c;
    d.remaining = static_cast<std::int64_t>(L - after);
    if (d.allowed && n > 0) {
      d.reset_after = W;
    } else {
      d.reset_after = c > 0 ? newest + W - t : 0;
    }
    if (n > L) {
      d.retry_after = kNever;
    } else if (!d.allowed) {
      const i128 need = c + n - L;
      i128 freed = 0;
      for (const auto& [ts, cost] : entries) {
        if (i128{ts} <= i128{t} - W) continue;
        freed += cost;
        if (freed >= need) {
          d.retry_after = ts + W - t;
          break;
        }
      }
    }
    pending_t = t, pending_n = n;
    return d;
  }
  void commit() {
    while (!entries.empty() && i128{entries.front().first} <= i128{pending_t} - W) entries.pop_front();
    entries.emplace_back(pending_t, pending_n);
    has = true, written = pending_t;
  }
};

struct SlidingCounterModel {
  std::int64_t L, W;
  SlidingCounterModel(std::int64_t l_, std::int64_t w_) : L(l_), W(w_) {}
  bool has = false;
  std::int64_t written = 0, ks = 0, cur = 0, prev = 0;
  std::int64_t pending_t = 0, pending_k = 0, pending_cur = 0, pending_prev = 0;

  TickDecision eval(std::int64_t now, std::int64_t n) {
    const std::int64_t t = effective(has, written, now, 2 * W);
    const std::int64_t k = floor_div(t, W);
    const std::int64_t r = t - k * W;
    std::int64_t c0 = 0, p0 = 0;
    if (has && k == ks) c0 = cur, p0 = prev;
    if (has && k == ks + 1) p0 = cur;
    const i128 w = W;
    TickDecision d{.limit = L};
    d.allowed = n <= L && i128{p0} * (w - r) + (i128{c0} + n) * w <= i128{L} * w;
    const std::int64_t after = d.allowed ? c0 + n : c0;
    const i128 room = (i128{L} * w - i128{p0} * (w - r)) / w;
    d.remaining = room - after > 0 ? static_cast<std::int64_t>(room - after) : 0;
    d.reset_after = after > 0 ? 2 * W - r : (p0 > 0 ? W - r : 0);
    if (n > L) {
      d.retry_after = kNever;
    } else if (!d.allowed) {
      const std::int64_t a = L - c0 - n;
      bool done = false;
      if (p0 > 0 && a >= 0) {
        const i128 r1 = w - i128{a} * w / p0;
        if (r1 < w) d.retry_after = static_cast<std::int64_t>(r1 - r), done = true;
      }
      if (!done) {
        i128 r2 = c0 > 0 ? w - i128{L - n} * w / c0 : 0;
        if (r2 < 0) r2 = 0;
        d.retry_after = static_cast<std::int64_t>((w - r) + r2);
      }
    }
    pending_t = t, pending_k = k, pending_cur = after, pending_prev = p0;
    return d;
  }
  void commit() { has = true, written = pending_t, ks = pending_k, cur = pending_cur, prev = pending_prev; }
};

struct GcraModel {
  std::int64_t B, T;  // burst, emission interval ceil(P / L)
  GcraModel(std::int64_t b_, std::int64_t t_) : B(b_), T(t_) {}
  bool has = false;
  std::int64_t written = 0, tat = 0;
  std::int64_t pending_t = 0, pending_tat = 0;

  TickDecision eval(std::int64_t now, std::int64_t n) {
    const std::int64_t tau = B * T;
    const std::int64_t t = effective(has, written, now, 2 * tau);
    const std::int64_t tat0 = has && tat > t ? tat : t;
    const bool fits = n <= B;
    const std::int64_t new_tat = fits ? tat0 + n * T : tat0;
    TickDecision d{.allowed = fits && new_tat - t <= tau, .limit = B};
    const std::int64_t after = d.allowed ? new_tat : tat0;
    d.remaining = (t + tau - after) / T;
    d.reset_after = after - t;
    d.retry_after = !fits ? kNever : (d.allowed ? 0 : new_tat - t - tau);
    pending_t = t, pending_tat = new_tat;
    return d;
  }
  void commit() { has = true, written = pending_t, tat = pending_tat; }
};

// --- Inputs -----------------------------------------------------------------------------------------

// Mostly values near the interesting edges, sometimes anything.
std::int64_t pick(FuzzedDataProvider& in, std::int64_t small_max) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: return in.ConsumeIntegral<std::int64_t>();
    case 1: return kMax - in.ConsumeIntegralInRange<std::int64_t>(0, 3);
    case 2: return kMin + in.ConsumeIntegralInRange<std::int64_t>(0, 3);
    case 3: return in.ConsumeIntegralInRange<std::int64_t>(-2, 2);
    case 4:
      return (std::int64_t{1} << in.ConsumeIntegralInRange<int>(0, 62)) +
             in.ConsumeIntegralInRange<std::int64_t>(-1, 1);
    default: return in.ConsumeIntegralInRange<std::int64_t>(1, small_max);
  }
}

std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return b > 0 ? kMax : kMin;
  return out;
}

std::int64_t next_time(FuzzedDataProvider& in, std::int64_t now, std::int64_t scale) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: return now;
    case 1: return saturating_add(now, -in.ConsumeIntegralInRange<std::int64_t>(0, 2 * scale));  // steps back
    case 2: return pick(in, scale);                                                              // anywhere
    case 3: return saturating_add(now, in.ConsumeBool() ? kMax / 2 : kMin / 2);                  // huge jump
    default: return saturating_add(now, in.ConsumeIntegralInRange<std::int64_t>(0, 2 * scale));  // forward
  }
}

std::int64_t next_cost(FuzzedDataProvider& in, std::int64_t limit) {
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0: return 0;
    case 1: return limit;
    case 2: return saturating_add(limit, 1);
    case 3: return saturating_add(limit, -1);
    case 4: return pick(in, limit);  // may be negative
    case 5: return kMax;
    default: return in.ConsumeIntegralInRange<std::int64_t>(1, limit < 4 ? limit : 4);
  }
}

void check_invariants(const TickDecision& d, std::int64_t limit, std::int64_t cost) {
  check(d.limit == limit, "limit", d.limit, limit);
  check(d.remaining >= 0 && d.remaining <= limit, "0 <= remaining <= limit", d.remaining, limit);
  check(d.retry_after >= 0, "retry_after >= 0", d.retry_after);
  check(d.reset_after >= 0 && d.reset_after <= ratelimit::detail::kMaxHorizonNs, "0 <= reset_after <= horizon",
        d.reset_after);
  check(!d.allowed || d.retry_after == 0, "allowed implies retry_after == 0", d.retry_after);
  if (cost > limit) check(!d.allowed && d.retry_after == kNever, "cost > limit is never", cost, d.retry_after);
  if (cost == 0) check(d.allowed, "cost 0 is allowed");
  if (!d.allowed && cost <= limit) check(d.retry_after > 0 && d.retry_after != kNever, "finite wait", d.retry_after);
  const ratelimit::Decision dec = ratelimit::to_decision(d, 1);
  check(dec.remaining == d.remaining && dec.retry_after.count() >= 0, "to_decision");
}

void check_same(const TickDecision& got, const TickDecision& want, const char* what) {
  if (got == want) return;
  std::fprintf(stderr,
               "policy_fuzz: %s differs from the model\n  got  {%d, %lld, %lld, %lld, %lld}\n"
               "  want {%d, %lld, %lld, %lld, %lld}\n",
               what, got.allowed, (long long)got.limit, (long long)got.remaining, (long long)got.retry_after,
               (long long)got.reset_after, want.allowed, (long long)want.limit, (long long)want.remaining,
               (long long)want.retry_after, (long long)want.reset_after);
  std::abort();
}

// A policy is refused with std::invalid_argument whose message names one of its fields ("Gcra.burst: ...").
template <class P>
std::optional<ratelimit::RulesOf<P>> make_rules(const P& policy, std::string_view prefix) {
  try {
    return policy.rules(1);
  } catch (const std::invalid_argument& e) {
    check(std::string_view(e.what()).starts_with(prefix), "invalid_argument names the field");
    return std::nullopt;
  }
}

template <class P, class Model>
void run(FuzzedDataProvider& in, const P& policy, std::string_view prefix, Model model, std::int64_t scale,
         bool must_accept) {
  const std::optional<ratelimit::RulesOf<P>> made = make_rules(policy, prefix);
  if (!made) {
    check(!must_accept, "a small valid policy was refused");
    return;
  }
  const ratelimit::RulesOf<P>& rules = *made;
  const std::int64_t limit = rules.limit();
  typename ratelimit::RulesOf<P>::State state[2];
  Model models[2] = {model, model};
  std::int64_t now = pick(in, scale);
  for (int step = 0; step < 512 && in.remaining_bytes() > 0; ++step) {
    now = next_time(in, now, scale);
    const int key = in.ConsumeBool() ? 1 : 0;
    if (in.ConsumeIntegralInRange<int>(0, 5) == 0) {
      const TickDecision got = ratelimit::peek(rules, state[key], now);
      TickDecision want = models[key].eval(now, 1);
      const TickDecision zero = models[key].eval(now, 0);
      want.remaining = zero.remaining;
      want.reset_after = zero.reset_after;
      check_invariants(got, limit, 1);
      check_same(got, want, "peek");
      continue;
    }
    const std::int64_t cost = next_cost(in, limit);
    if (cost < 0) {
      try {
        (void)ratelimit::decide(rules, state[key], now, cost);
        fail("a negative cost was accepted", cost);
      } catch (const std::invalid_argument& e) {
        check(std::string_view(e.what()).starts_with("cost: "), "negative cost message");
      }
      continue;
    }
    const TickDecision got = ratelimit::decide(rules, state[key], now, cost);
    const TickDecision want = models[key].eval(now, cost);
    check_invariants(got, limit, cost);
    check_same(got, want, "decide");
    if (want.allowed && cost > 0) models[key].commit();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  using std::chrono::nanoseconds;
  const int kind = in.ConsumeIntegralInRange<int>(0, 4);
  const std::int64_t a = pick(in, 20), b = pick(in, 1'000'000), c = pick(in, 20);
  // Small positive parameters must be accepted (the validation refuses only what it must).
  const bool small = a >= 1 && a <= 1000 && b >= 1 && b <= 1'000'000'000 && c >= 1 && c <= 1000;
  const std::int64_t scale = b > 0 && b < kMax / 4 ? b : 1000;
  switch (kind) {
    case 0:
      run(in, ratelimit::FixedWindow{.limit = a, .window = nanoseconds(b)}, "FixedWindow.", FixedWindowModel{a, b},
          scale, small);
      break;
    case 1:
      run(in, ratelimit::SlidingWindowLog{.limit = a, .window = nanoseconds(b)}, "SlidingWindowLog.",
          SlidingLogModel{a, b}, scale, small);
      break;
    case 2:
      run(in, ratelimit::SlidingWindowCounter{.limit = a, .window = nanoseconds(b)}, "SlidingWindowCounter.",
          SlidingCounterModel{a, b}, scale, small);
      break;
    case 3: {
      // Gcra{limit a, period b, burst c}; T = ceil(b / a) (computed only for a valid policy).
      const std::int64_t t = a >= 1 && b >= a ? b / a + (b % a != 0) : 1;
      run(in, ratelimit::Gcra{.limit = a, .period = nanoseconds(b), .burst = c}, "Gcra.", GcraModel{c, t}, scale,
          small && b >= a);
      break;
    }
    case 4: {
      // TokenBucket{capacity c, refill_tokens a, refill_period b} decides as Gcra{a, b, c}.
      const std::int64_t t = a >= 1 && b >= a ? b / a + (b % a != 0) : 1;
      run(in, ratelimit::TokenBucket{.capacity = c, .refill_tokens = a, .refill_period = nanoseconds(b)},
          "TokenBucket.", GcraModel{c, t}, scale, small && b >= a);
      break;
    }
  }
  return 0;
}
