#pragma once

/// @file
/// The answer of every limiter: whether a request passes and the numbers for 429 responses and headers.

#include <chrono>
#include <cstdint>

#include "ratelimit/detail/requirements.hpp"

namespace ratelimit {

/// The outcome of one check (`allow` or `peek`) against a key.
///
/// Field meanings are fixed by include/ratelimit/README.md "Decisions" and identical on every backend.
struct Decision {
  /// The `retry_after` of a request that can never pass (its cost exceeds `limit`).
  static constexpr std::chrono::nanoseconds never = std::chrono::nanoseconds::max();

  /// True when the request was admitted (and, for cost >= 1, consumed quota).
  bool allowed = false;
  /// The largest value `remaining` can take: window limit, bucket capacity or GCRA burst. >= 1.
  std::int64_t limit = 0;
  /// How many more cost-1 requests would pass right now, after this decision. In [0, limit].
  std::int64_t remaining = 0;
  /// 0 when allowed; otherwise the shortest wait after which the same request would pass if no other
  /// request came; `never` when the cost exceeds `limit`.
  std::chrono::nanoseconds retry_after{0};
  /// How long until the key is back to full (`remaining == limit`) if no request came; 0 if full.
  std::chrono::nanoseconds reset_after{0};

  /// Same as `allowed`, so `if (limiter.allow(key))` reads naturally.
  explicit operator bool() const noexcept { return allowed; }

  friend bool operator==(const Decision&, const Decision&) = default;
};

/// Who made a decision.
enum class Outcome {
  /// The policy, from the key's state: a quota decision.
  decided,
  /// The backend failed and its failure policy answered (`FailurePolicy::fail_open` admits as a fresh
  /// key would, `fail_closed` denies): no quota was consulted.
  failure_policy,
};

/// A decision and who made it: what `check`, `check_many` and `JointBackend::check_jointly` return, so a
/// caller can tell a failure-policy decision from a quota one (e.g. to start no penalty after it).
struct CheckResult {
  Decision decision{};
  Outcome outcome = Outcome::decided;

  /// True when the backend failed and `decision` is its failure policy's answer.
  [[nodiscard]] bool failed() const noexcept { return outcome == Outcome::failure_policy; }
  /// Same as `decision.allowed`.
  explicit operator bool() const noexcept { return decision.allowed; }

  friend bool operator==(const CheckResult&, const CheckResult&) = default;
};

}  // namespace ratelimit
