#pragma once

/// @file
/// HTTP rate-limit header fields from decisions: the classic `X-RateLimit-*` and `Retry-After`, and the
/// IETF `RateLimit-Policy` / `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers-11). Framework
/// neutral: returns name/value pairs. No dependency beyond the core.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/decision.hpp"
#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/http/most_restrictive.hpp"
#include "ratelimit/policy/fixed_window.hpp"
#include "ratelimit/policy/gcra.hpp"
#include "ratelimit/policy/sliding_window_counter.hpp"
#include "ratelimit/policy/sliding_window_log.hpp"
#include "ratelimit/policy/token_bucket.hpp"

namespace ratelimit::http {

/// One header field: name and value.
using Field = std::pair<std::string, std::string>;

/// A policy as the `RateLimit-Policy` field advertises it: `quota` units per `window`.
///
/// Build it with `quota_policy(name, policy)`, which maps each policy as follows (SPEC section 6):
/// - windowed policies (`FixedWindow`, `SlidingWindowLog`, `SlidingWindowCounter`): `q = limit`,
///   `w = window`;
/// - `Gcra{limit, period, burst}`: `q = burst`, `w = burst * T` with `T = ceil(period / limit)`, i.e.
///   the burst and the time one burst takes to refill; `q / w` is the sustained rate and `q` equals
///   `Decision::limit`, so `r <= q` always holds (a `q = limit, w = period` mapping breaks that when
///   `burst > limit`);
/// - `TokenBucket{capacity, refill_tokens, refill_period}`: as its GCRA, `q = capacity`,
///   `w = capacity * ceil(refill_period / refill_tokens)`.
/// `w` is whole seconds (the draft has no sub-second windows), rounded up, at least 1.
struct QuotaPolicy {
  /// The policy identifier: printable ASCII (0x20..0x7E), serialized as a Structured Field String.
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

/// How `X-RateLimit-Reset` is written.
enum class ResetFormat {
  /// Seconds from now until the key is full again, rounded up (the default; immune to clock skew).
  delta_seconds,
  /// The Unix time (seconds since 1970, UTC) when the key is full again, rounded up; some clients expect it.
  epoch_seconds,
};

/// Which fields `rate_limit_fields` writes.
struct FieldOptions {
  /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (of the most restrictive policy).
  bool classic = true;
  /// `RateLimit-Policy` and `RateLimit` (every policy).
  bool ietf = true;
  /// `X-RateLimit-Reset` format.
  ResetFormat reset = ResetFormat::delta_seconds;
  /// The wall-clock time of the response, for `ResetFormat::epoch_seconds`; the default (the epoch)
  /// means "read `std::chrono::system_clock::now()`".
  std::chrono::system_clock::time_point now{};
};

/// Whole seconds of `d`, rounded up; 0 for `d <= 0`. `Decision::never` maps to the largest int64.
/// Pure; thread-safe.
[[nodiscard]] inline std::int64_t ceil_seconds(std::chrono::nanoseconds d) noexcept {
  if (d <= std::chrono::nanoseconds::zero()) return 0;
  if (d == Decision::never) return detail::kInt64Max;
  return detail::ceil_div(d.count(), 1'000'000'000);
}

/// The `Retry-After` value (RFC 9110 delay-seconds) of a decision: `max(1, ceil(retry_after))` seconds
/// on a denial, so a client never retries at once; empty when the request was allowed or can never pass
/// (`Decision::never`, cost above `limit`): waiting cannot help, so no wait is advertised (the 429
/// body says which policy was violated). Pure; thread-safe.
[[nodiscard]] inline std::string retry_after_value(const Decision& d) {
  if (d.allowed || d.retry_after == Decision::never) return {};
  const std::int64_t s = ceil_seconds(d.retry_after);
  return std::to_string(s < 1 ? 1 : s);
}

/// A Structured Field String (RFC 9651 section 3.3.3): `"` + the name with `"` and `\` escaped + `"`.
/// Throws `std::invalid_argument` ("name: ...") for a character outside printable ASCII.
[[nodiscard]] inline std::string sf_string(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 2);
  out += '"';
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7E) {
      detail::invalid("name", "policy names must be printable ASCII (RFC 9651 String), got byte " + std::to_string(u));
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

namespace detail {
[[nodiscard]] inline std::chrono::seconds window_seconds(std::chrono::nanoseconds w) {
  const std::int64_t s = ceil_seconds(w);
  return std::chrono::seconds(s < 1 ? 1 : s);
}
[[nodiscard]] inline QuotaPolicy checked(std::string name, std::int64_t quota, std::chrono::nanoseconds window) {
  (void)sf_string(name);  // validates the name now, not on every response
  return QuotaPolicy{std::move(name), quota, window_seconds(window)};
}
}  // namespace detail

/// The advertised quota of a fixed window: `q = limit`, `w = ceil(window)` s. Throws
/// `std::invalid_argument` naming the field for an invalid policy or a non-ASCII name.
[[nodiscard]] inline QuotaPolicy quota_policy(std::string name, const FixedWindow& p) {
  (void)p.rules(1);
  return detail::checked(std::move(name), p.limit, p.window);
}
/// As for `FixedWindow`.
[[nodiscard]] inline QuotaPolicy quota_policy(std::string name, const SlidingWindowLog& p) {
  (void)p.rules(1);
  return detail::checked(std::move(name), p.limit, p.window);
}
/// As for `FixedWindow`.
[[nodiscard]] inline QuotaPolicy quota_policy(std::string name, const SlidingWindowCounter& p) {
  (void)p.rules(1);
  return detail::checked(std::move(name), p.limit, p.window);
}
/// GCRA: `q = burst`, `w = ceil(burst * T)` s (see `QuotaPolicy`).
[[nodiscard]] inline QuotaPolicy quota_policy(std::string name, const Gcra& p) {
  const Gcra::Rules r = p.rules(1);
  return detail::checked(std::move(name), r.limit(), std::chrono::nanoseconds(r.tolerance()));
}
/// Token bucket: `q = capacity`, `w = ceil(capacity * T)` s, as its GCRA.
[[nodiscard]] inline QuotaPolicy quota_policy(std::string name, const TokenBucket& p) {
  const TokenBucket::Rules r = p.rules(1);
  return detail::checked(std::move(name), r.limit(), std::chrono::nanoseconds(r.tolerance()));
}

/// The `RateLimit-Policy` value: `"<name>";q=<quota>;w=<window s>` per policy, comma-separated (an
/// RFC 9651 List; members joined by ", "). Pure; thread-safe.
[[nodiscard]] inline std::string ratelimit_policy_value(std::span<const PolicyDecision> entries) {
  std::string out;
  for (const PolicyDecision& e : entries) {
    if (!out.empty()) out += ", ";
    out += sf_string(e.policy->name);
    out += ";q=" + std::to_string(e.policy->quota) + ";w=" + std::to_string(e.policy->window.count());
  }
  return out;
}

/// The `t` (effective window, seconds) of one decision in the `RateLimit` field: on a denial the
/// `Retry-After` value (so, as the draft asks, `Retry-After` is never earlier than the end of the
/// effective window); for `Decision::never` and on admission, `ceil(reset_after)`, the time until the
/// key is full again (0 when it is full).
[[nodiscard]] inline std::int64_t effective_window_seconds(const Decision& d) {
  if (!d.allowed && d.retry_after != Decision::never) {
    const std::int64_t s = ceil_seconds(d.retry_after);
    return s < 1 ? 1 : s;
  }
  return ceil_seconds(d.reset_after);
}

/// The `RateLimit` value: `"<name>";r=<remaining>;t=<effective window s>` per policy, comma-separated.
/// Pure; thread-safe.
[[nodiscard]] inline std::string ratelimit_value(std::span<const PolicyDecision> entries) {
  std::string out;
  for (const PolicyDecision& e : entries) {
    if (!out.empty()) out += ", ";
    out += sf_string(e.policy->name);
    out += ";r=" + std::to_string(e.decision.remaining) + ";t=" + std::to_string(effective_window_seconds(e.decision));
  }
  return out;
}

/// The header fields for the decisions of one request (one per policy or layer), in this order:
/// `RateLimit-Policy`, `RateLimit` (every entry) when `options.ietf`; `X-RateLimit-Limit`,
/// `X-RateLimit-Remaining`, `X-RateLimit-Reset` of the most restrictive entry (`most_restrictive`)
/// when `options.classic`; `Retry-After` when that entry denies with a finite wait
/// (`retry_after_value`). Empty `entries` give no fields. Thread-safe. Throws `std::invalid_argument`
/// ("name: ...") for a policy name outside printable ASCII.
[[nodiscard]] inline std::vector<Field> rate_limit_fields(std::span<const PolicyDecision> entries,
                                                         const FieldOptions& options = {}) {
  std::vector<Field> fields;
  if (entries.empty()) return fields;
  if (options.ietf) {
    fields.emplace_back("RateLimit-Policy", ratelimit_policy_value(entries));
    fields.emplace_back("RateLimit", ratelimit_value(entries));
  }
  std::vector<Decision> decisions;
  decisions.reserve(entries.size());
  for (const PolicyDecision& e : entries) decisions.push_back(e.decision);
  const Decision& d = decisions[most_restrictive(decisions)];
  if (options.classic) {
    fields.emplace_back("X-RateLimit-Limit", std::to_string(d.limit));
    fields.emplace_back("X-RateLimit-Remaining", std::to_string(d.remaining));
    std::int64_t reset = ceil_seconds(d.reset_after);
    if (options.reset == ResetFormat::epoch_seconds) {
      const auto now = options.now == std::chrono::system_clock::time_point{} ? std::chrono::system_clock::now()
                                                                              : options.now;
      // Saturating: a long penalty (up to nanoseconds::max()) ends past what int64 nanoseconds can count.
      const std::int64_t at_ns = ratelimit::detail::saturating_add(
          std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count(), d.reset_after.count());
      reset = at_ns <= 0 ? 0 : ratelimit::detail::ceil_div(at_ns, 1'000'000'000);
    }
    fields.emplace_back("X-RateLimit-Reset", std::to_string(reset));
  }
  if (std::string retry = retry_after_value(d); !retry.empty()) fields.emplace_back("Retry-After", std::move(retry));
  return fields;
}

/// The fields for a single policy's decision; see the span overload.
[[nodiscard]] inline std::vector<Field> rate_limit_fields(const QuotaPolicy& policy, const Decision& decision,
                                                         const FieldOptions& options = {}) {
  const PolicyDecision entry{&policy, decision};
  return rate_limit_fields(std::span<const PolicyDecision>(&entry, 1), options);
}

}  // namespace ratelimit::http
