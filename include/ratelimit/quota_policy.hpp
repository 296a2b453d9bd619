#pragma once

/// @file
/// `QuotaPolicy`: a policy as a quota `q` per window `w`, the description rate-limit header fields and
/// layers carry; `PolicyDecision` pairs one with a decision. Backend and protocol neutral.

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "ratelimit/decision.hpp"
#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/policy/fixed_window.hpp"
#include "ratelimit/policy/gcra.hpp"
#include "ratelimit/policy/sliding_window_counter.hpp"
#include "ratelimit/policy/sliding_window_log.hpp"
#include "ratelimit/policy/token_bucket.hpp"

namespace ratelimit {

/// A policy as a quota: `quota` units per `window`, under a name.
///
/// Build it with `quota_policy(name, policy)`, which maps each policy as follows (include/ratelimit/http/README.md
/// "Header fields"):
/// - windowed policies (`FixedWindow`, `SlidingWindowLog`, `SlidingWindowCounter`): `q = limit`,
///   `w = window`;
/// - `Gcra{limit, period, burst}`: `q = burst`, `w = burst * T` with `T = ceil(period / limit)`, i.e.
///   the burst and the time one burst takes to refill; `q / w` is the sustained rate and `q` equals
///   `Decision::limit`, so `r <= q` always holds (a `q = limit, w = period` mapping breaks that when
///   `burst > limit`);
/// - `TokenBucket{capacity, refill_tokens, refill_period}`: as its GCRA, `q = capacity`,
///   `w = capacity * ceil(refill_period / refill_tokens)`.
/// `w` is whole seconds, rounded up, at least 1. The name is any string here; header fields need
/// printable ASCII and refuse other names when they write them (`http::sf_string`).
struct QuotaPolicy {
  /// The policy identifier (layer name, header policy name).
  std::string name{};
  /// Quota units per window (`q`); >= 0.
  std::int64_t quota = 0;
  /// The window (`w`); >= 1 s.
  std::chrono::seconds window{1};
};

/// A decision together with the policy that made it, for one response.
struct PolicyDecision {
  /// The policy; must outlive this value.
  const QuotaPolicy* policy = nullptr;
  /// What the policy decided for this request.
  Decision decision{};
};

namespace detail {
/// Whole seconds of `d`, rounded up; 0 for `d <= 0`; `Decision::never` maps to the largest int64.
[[nodiscard]] inline std::int64_t ceil_whole_seconds(std::chrono::nanoseconds d) noexcept {
  if (d <= std::chrono::nanoseconds::zero()) return 0;
  if (d == Decision::never) return kInt64Max;
  return ceil_div(d.count(), 1'000'000'000);
}
[[nodiscard]] inline QuotaPolicy make_quota(std::string name, std::int64_t quota, std::chrono::nanoseconds window) {
  const std::int64_t s = ceil_whole_seconds(window);
  return QuotaPolicy{std::move(name), quota, std::chrono::seconds(s < 1 ? 1 : s)};
}
}  // namespace detail

/// The quota of a fixed window: `q = limit`, `w = ceil(window)` s. Throws `std::invalid_argument`
/// naming the field for an invalid policy. Pure; thread-safe.
[[nodiscard]] inline QuotaPolicy quota_policy(std::string name, const FixedWindow& p) {
  (void)p.rules(1);
  return detail::make_quota(std::move(name), p.limit, p.window);
}
/// As for `FixedWindow`.
[[nodiscard]] inline QuotaPolicy quota_policy(std::string name, const SlidingWindowLog& p) {
  (void)p.rules(1);
  return detail::make_quota(std::move(name), p.limit, p.window);
}
/// As for `FixedWindow`.
[[nodiscard]] inline QuotaPolicy quota_policy(std::string name, const SlidingWindowCounter& p) {
  (void)p.rules(1);
  return detail::make_quota(std::move(name), p.limit, p.window);
}
/// GCRA: `q = burst`, `w = ceil(burst * T)` s (see `QuotaPolicy`).
[[nodiscard]] inline QuotaPolicy quota_policy(std::string name, const Gcra& p) {
  const Gcra::Rules r = p.rules(1);
  return detail::make_quota(std::move(name), r.limit(), std::chrono::nanoseconds(r.tolerance()));
}
/// Token bucket: `q = capacity`, `w = ceil(capacity * T)` s, as its GCRA.
[[nodiscard]] inline QuotaPolicy quota_policy(std::string name, const TokenBucket& p) {
  const TokenBucket::Rules r = p.rules(1);
  return detail::make_quota(std::move(name), r.limit(), std::chrono::nanoseconds(r.tolerance()));
}

}  // namespace ratelimit
