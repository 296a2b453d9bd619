// The accuracy columns of the comparison: every policy fed the same deterministic traces on a ManualClock
// (bench/compare/metrics.hpp), and what the table reports of its decisions.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <ratelimit/ratelimit.hpp>

#include "metrics.hpp"

namespace bench::compare {

/// The parameters of every policy in one run: `limit` per `window` (ns); `burst` is the token bucket's
/// capacity and GCRA's burst.
struct Parameters {
  std::int64_t limit = 100;
  std::int64_t window_ns = 1'000'000'000;
  std::int64_t burst = 100;
};

/// What Retry-After told against the exact earliest admission (no other request in between).
struct RetryCheck {
  std::int64_t denials = 0;
  std::int64_t exact = 0;           // told == earliest
  std::int64_t early = 0;           // told < earliest: the client comes back and is denied again
  std::int64_t worst_early_ns = 0;  // most told too early
  std::int64_t worst_late_ns = 0;   // most told too late (the client waits longer than it must)
};

/// One policy's accuracy row.
struct Accuracy {
  std::int64_t boundary_max = 0;   // most admitted in any (t - window, t] of the boundary-burst trace
  double steady_fraction = 0;      // share admitted of a client at exactly the limit
  std::int64_t readmit_ns = 0;     // after a burst from full: wait until a request passes again
  std::int64_t burst_told_ns = 0;  // the Retry-After told at that burst's first denial
  double jain = 0;                 // fairness of the admitted shares of 100 clients on one key
  double min_share = 0;
  double max_share = 0;
  RetryCheck retry;  // a client at twice the limit
};

using Clock = ratelimit::ManualClock;

inline Clock::time_point at(std::int64_t ns) { return Clock::time_point(std::chrono::nanoseconds(ns)); }

/// The decisions of a fresh limiter on one key for the ascending `times`.
template <ratelimit::Policy P>
std::vector<bool> decide(const P& policy, const std::vector<std::int64_t>& times) {
  Clock clock;
  ratelimit::MemoryLimiter limiter(policy, {}, clock);
  std::vector<bool> out;
  out.reserve(times.size());
  for (const std::int64_t t : times) {
    clock.set(at(t));
    out.push_back(limiter.allow("client").allowed);
  }
  return out;
}

/// The shortest wait from `now` after which a cost-1 request on `key` would pass if none came before it
/// (binary search with `peek`, which writes nothing; admission only gets easier as time passes). Throws
/// `std::range_error` when none would pass before the clock's int64 nanoseconds end.
template <class L>
std::int64_t earliest_admission_ns(L& limiter, const std::string& key, std::int64_t now, std::int64_t upper) {
  while (!limiter.peek(key, at(now + upper)).allowed) {
    if (upper > (std::numeric_limits<std::int64_t>::max() - now) / 2) {
      throw std::range_error("no admission within the clock's range: a shorter --period");
    }
    upper *= 2;
  }
  std::int64_t lo = 0;  // denied at now + lo (the caller's denial)
  while (lo + 1 < upper) {
    const std::int64_t mid = lo + (upper - lo) / 2;
    (limiter.peek(key, at(now + mid)).allowed ? upper : lo) = mid;
  }
  return upper;
}

inline void count_retry(RetryCheck& r, std::int64_t told, std::int64_t earliest) {
  ++r.denials;
  if (told == earliest) ++r.exact;
  if (told < earliest) ++r.early;
  r.worst_early_ns = std::max(r.worst_early_ns, earliest - told);
  r.worst_late_ns = std::max(r.worst_late_ns, told - earliest);
}

/// A burst from full at a quarter into a window (as many requests at one instant as pass, and one more):
/// the wait until a request passes again, and what the first denial's Retry-After said.
template <ratelimit::Policy P>
void burst_then_wait(const P& policy, const Parameters& p, Accuracy& a) {
  Clock clock;
  ratelimit::MemoryLimiter limiter(policy, {}, clock);
  const std::int64_t t = 10 * p.window_ns + p.window_ns / 4;
  clock.set(at(t));
  ratelimit::Decision d;
  while ((d = limiter.allow("client")).allowed) {
  }
  a.burst_told_ns = d.retry_after.count();
  a.readmit_ns = earliest_admission_ns(limiter, "client", t, std::max<std::int64_t>(p.window_ns, 1));
}

/// A Poisson client at twice the limit for 20 windows: at every denial (the first `kRetryChecks`, so that
/// large limits stay quick), Retry-After against the exact wait.
inline constexpr std::int64_t kRetryChecks = 2000;
template <ratelimit::Policy P>
RetryCheck retry_after_check(const P& policy, const Parameters& p) {
  Clock clock;
  ratelimit::MemoryLimiter limiter(policy, {}, clock);
  RetryCheck r;
  for (const Arrival& arrival : shared_trace(1, 2.0, p.limit, p.window_ns, 20, 11)) {
    clock.set(at(arrival.at));
    const ratelimit::Decision d = limiter.allow("client");
    if (d.allowed || r.denials == kRetryChecks) continue;
    count_retry(r, d.retry_after.count(),
                earliest_admission_ns(limiter, "client", arrival.at, std::max<std::int64_t>(d.retry_after.count(), 1)));
  }
  return r;
}

inline constexpr std::uint32_t kFairnessClients = 100;
inline constexpr double kFairnessLoad = 1.5;  // the clients together, in limits per window

/// Whether each fairness client sends at least one request per window on average (else its share is
/// mostly chance).
inline bool fairness_meaningful(const Parameters& p) {
  return kFairnessLoad * static_cast<double>(p.limit) >= kFairnessClients;
}

/// 100 clients on one shared key at 1.5 times its limit together, for 50 windows: each client's admitted
/// share of what it sent, their spread and Jain's index.
template <ratelimit::Policy P>
void fairness(const P& policy, const Parameters& p, Accuracy& a) {
  constexpr std::uint32_t kClients = kFairnessClients;
  Clock clock;
  ratelimit::MemoryLimiter limiter(policy, {}, clock);
  std::vector<std::int64_t> sent(kClients, 0);
  std::vector<std::int64_t> admitted(kClients, 0);
  for (const Arrival& arrival : shared_trace(kClients, kFairnessLoad, p.limit, p.window_ns, 50, 1000)) {
    clock.set(at(arrival.at));
    ++sent[arrival.client];
    if (limiter.allow("shared").allowed) ++admitted[arrival.client];
  }
  std::vector<double> shares;
  for (std::uint32_t c = 0; c < kClients; ++c) {
    if (sent[c] > 0) shares.push_back(fraction(admitted[c], sent[c]));
  }
  a.jain = jain_index(shares);
  a.min_share = shares.empty() ? 0 : *std::min_element(shares.begin(), shares.end());
  a.max_share = shares.empty() ? 0 : *std::max_element(shares.begin(), shares.end());
}

/// Every accuracy figure of `policy` under the parameters `p`.
template <ratelimit::Policy P>
Accuracy measure_accuracy(const P& policy, const Parameters& p) {
  Accuracy a;
  const std::vector<std::int64_t> burst =
      boundary_burst_trace(std::max(p.limit, p.burst), p.limit, p.window_ns, 10 * p.window_ns);
  a.boundary_max = max_in_interval(admitted_times(burst, decide(policy, burst)), p.window_ns);
  const std::vector<std::int64_t> steady = steady_trace(p.limit, p.window_ns, 10 * p.window_ns + 1, 20);
  a.steady_fraction = admitted_fraction(decide(policy, steady));
  burst_then_wait(policy, p, a);
  fairness(policy, p, a);
  a.retry = retry_after_check(policy, p);
  return a;
}

}  // namespace bench::compare
