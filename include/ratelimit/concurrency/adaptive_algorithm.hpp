#pragma once

/// @file
/// `AdaptiveAlgorithm`: the interface of the algorithms that move a concurrency limit from latency samples
/// (include/ratelimit/concurrency/README.md "Adaptive algorithms").

#include <cstdint>
#include <memory>
#include <string_view>

namespace ratelimit {

/// How the work a permit guarded ended.
enum class PermitOutcome {
  succeeded,  ///< done (whatever the answer was)
  failed,     ///< an error unrelated to load; the latency still counts
  dropped,    ///< timed out or shed downstream: a sign of overload
};

/// One released permit, as an algorithm sees it.
struct LatencySample {
  /// The limiter's clock at release, in nanoseconds since its epoch (`detail::now_ns(clock)`).
  std::int64_t now_ns = 0;
  /// Release time minus grant time, in nanoseconds; >= 0 (a negative value counts as 0).
  std::int64_t rtt_ns = 0;
  /// Units in flight (every key the algorithm governs) when this permit was granted, itself included;
  /// >= 1 (a smaller value counts as 1).
  std::int64_t in_flight = 1;
  PermitOutcome outcome = PermitOutcome::succeeded;
};

/// Moves a concurrency limit from latency samples. NOT thread-safe: its owner serialises calls
/// (`ConcurrencyLimiter` holds one under a mutex). Deterministic: no clock of its own (time comes from
/// `LatencySample::now_ns`), no randomness except from a seed in its options. Memory is fixed at
/// construction (no container grows). `on_sample` does not throw.
class AdaptiveAlgorithm {
 public:
  virtual ~AdaptiveAlgorithm() = default;
  /// "aimd", "gradient" or "vegas".
  [[nodiscard]] virtual std::string_view name() const noexcept = 0;
  /// The current limit, in units; always in [min_limit, max_limit] of the options.
  [[nodiscard]] virtual std::int64_t limit() const noexcept = 0;
  /// Takes one sample; returns the new `limit()`.
  virtual std::int64_t on_sample(const LatencySample& sample) = 0;
  /// The unloaded round-trip time the algorithm measured, in nanoseconds; 0 when not known or not used.
  [[nodiscard]] virtual std::int64_t min_rtt_ns() const noexcept { return 0; }
  /// A fresh algorithm with the same options (no samples seen).
  [[nodiscard]] virtual std::unique_ptr<AdaptiveAlgorithm> clone() const = 0;
};

}  // namespace ratelimit
