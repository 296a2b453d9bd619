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
#include "ratelimit/most_restrictive.hpp"
#include "ratelimit/quota_policy.hpp"

namespace ratelimit::http {

/// One header field: name and value.
using Field = std::pair<std::string, std::string>;

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
  return ratelimit::detail::ceil_whole_seconds(d);
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

/// `ratelimit::quota_policy(name, policy)` (see `ratelimit::QuotaPolicy`) with the name checked as
/// header fields need it. Throws `std::invalid_argument` naming the field for an invalid policy, or
/// "name: ..." for a name outside printable ASCII. Pure; thread-safe.
template <class P>
  requires requires(std::string n, const P& p) { ratelimit::quota_policy(std::move(n), p); }
[[nodiscard]] ratelimit::QuotaPolicy quota_policy(std::string name, const P& policy) {
  ratelimit::QuotaPolicy q = ratelimit::quota_policy(std::move(name), policy);
  (void)sf_string(q.name);  // validates the name now, not on every response
  return q;
}

/// The `RateLimit-Policy` value: `"<name>";q=<quota>;w=<window s>` per policy, comma-separated (an
/// RFC 9651 List; members joined by ", "). Pure; thread-safe.
[[nodiscard]] inline std::string ratelimit_policy_value(std::span<const ratelimit::PolicyDecision> entries) {
  std::string out;
  for (const ratelimit::PolicyDecision& e : entries) {
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
[[nodiscard]] inline std::string ratelimit_value(std::span<const ratelimit::PolicyDecision> entries) {
  std::string out;
  for (const ratelimit::PolicyDecision& e : entries) {
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
/// Example:
///   ratelimit::MemoryLimiter<ratelimit::FixedWindow> per_key(
///       ratelimit::FixedWindow{.limit = 1000, .window = std::chrono::hours(1)});
///   ratelimit::LimiterLayer layer(per_key, "api-key");
///   const ratelimit::LayeredDecision d = ratelimit::check_layers({{&layer, "7f3a"}});
///   std::vector<ratelimit::http::Field> response_headers;  // your framework's response, in a service
///   for (ratelimit::http::Field& f : ratelimit::http::rate_limit_fields(d.policy_decisions())) {
///     response_headers.push_back(std::move(f));  // RateLimit-Policy, RateLimit, X-RateLimit-*, Retry-After
///   }
[[nodiscard]] inline std::vector<Field> rate_limit_fields(std::span<const ratelimit::PolicyDecision> entries,
                                                          const FieldOptions& options = {}) {
  std::vector<Field> fields;
  if (entries.empty()) return fields;
  if (options.ietf) {
    fields.emplace_back("RateLimit-Policy", ratelimit_policy_value(entries));
    fields.emplace_back("RateLimit", ratelimit_value(entries));
  }
  std::vector<Decision> decisions;
  decisions.reserve(entries.size());
  for (const ratelimit::PolicyDecision& e : entries) decisions.push_back(e.decision);
  const Decision& d = decisions[most_restrictive(decisions)];
  if (options.classic) {
    fields.emplace_back("X-RateLimit-Limit", std::to_string(d.limit));
    fields.emplace_back("X-RateLimit-Remaining", std::to_string(d.remaining));
    std::int64_t reset = ceil_seconds(d.reset_after);
    if (options.reset == ResetFormat::epoch_seconds) {
      const auto now =
          options.now == std::chrono::system_clock::time_point{} ? std::chrono::system_clock::now() : options.now;
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

/// The fields for a single policy's decision; see the span overload. Thread-safe. Throws as it.
/// Example:
///   const ratelimit::Gcra policy{.limit = 10, .period = std::chrono::seconds(1), .burst = 10};
///   ratelimit::MemoryLimiter<ratelimit::Gcra> limiter(policy);
///   const ratelimit::QuotaPolicy quota = ratelimit::http::quota_policy("per-client", policy);  // once
///   const ratelimit::Decision d = limiter.allow("client-42");
///   const std::vector<ratelimit::http::Field> fields = ratelimit::http::rate_limit_fields(quota, d);
///   if (!d) { /* send 429 with every field: Retry-After is among them */ }
[[nodiscard]] inline std::vector<Field> rate_limit_fields(const ratelimit::QuotaPolicy& policy,
                                                          const Decision& decision, const FieldOptions& options = {}) {
  const ratelimit::PolicyDecision entry{&policy, decision};
  return rate_limit_fields(std::span<const ratelimit::PolicyDecision>(&entry, 1), options);
}

}  // namespace ratelimit::http
