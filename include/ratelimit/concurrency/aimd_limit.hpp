#pragma once

/// @file
/// `AimdLimit`: additive increase, multiplicative decrease of a concurrency limit
/// (include/ratelimit/concurrency/README.md "Adaptive algorithms").

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string_view>

#include "ratelimit/concurrency/adaptive_algorithm.hpp"
#include "ratelimit/concurrency/adaptive_window.hpp"

namespace ratelimit {

/// Options of `AimdLimit`; a plain aggregate.
struct AimdOptions {
  /// The limit before any sample, in units; in [min_limit, max_limit].
  std::int64_t initial_limit = 20;
  /// The limit never goes below this; >= 1.
  std::int64_t min_limit = 1;
  /// The limit never goes above this; >= min_limit.
  std::int64_t max_limit = 1000;
  /// A window whose mean RTT exceeds this is overload (the limit is cut); > 0. No default fits every
  /// service: set it from the service's latency (for example 1.2 x its unloaded mean).
  std::chrono::nanoseconds latency_threshold = std::chrono::milliseconds(100);
  /// The cut: limit x backoff_ratio; in (0, 1).
  double backoff_ratio = 0.9;
  /// Units added per window without overload while the limit is used (in flight >= half of it); finite, >= 0.
  double additive_increase = 1.0;
  /// Samples per window; >= 1.
  std::int64_t window_samples = 100;
  /// A window closes at this age even with fewer samples; > 0.
  std::chrono::nanoseconds window_max = std::chrono::seconds(1);
};

/// Additive increase, multiplicative decrease (Netflix concurrency-limits `AIMDLimit`, over a sample
/// window as its `WindowedLimit`): per window, a drop or a mean RTT over `latency_threshold` multiplies
/// the limit by `backoff_ratio`; otherwise, if the window used at least half the limit, it adds
/// `additive_increase`. The limit is a double kept in [min_limit, max_limit]; `limit()` rounds it down.
/// Needs an absolute latency threshold; simple and predictable, but the limit saws between the knee and
/// `backoff_ratio` below it. Not thread-safe (see `AdaptiveAlgorithm`).
/// Throws `std::invalid_argument` naming the field (`AimdOptions.min_limit`, ...) for bad options.
/// Example:
///   ratelimit::AimdLimit aimd({.initial_limit = 10, .latency_threshold = std::chrono::milliseconds(50)});
///   aimd.on_sample({.now_ns = 0, .rtt_ns = 2'000'000, .in_flight = 10});  // returns the new limit
class AimdLimit final : public AdaptiveAlgorithm {
 public:
  explicit AimdLimit(AimdOptions options = {})
      : options_(validated(options)),
        estimate_(static_cast<double>(options_.initial_limit)),
        window_(options_.window_samples, options_.window_max) {}

  [[nodiscard]] std::string_view name() const noexcept override { return "aimd"; }
  [[nodiscard]] std::int64_t limit() const noexcept override {
    return detail::clamp_limit(estimate_, options_.min_limit, options_.max_limit);
  }
  std::int64_t on_sample(const LatencySample& sample) override {
    const std::optional<detail::WindowStats> w = window_.add(detail::sanitised(sample));
    if (!w) return limit();
    if (w->drops > 0 || w->mean_rtt_ns > static_cast<double>(options_.latency_threshold.count())) {
      estimate_ *= options_.backoff_ratio;
    } else if (static_cast<double>(w->max_in_flight) * 2 >= estimate_) {
      estimate_ += options_.additive_increase;
    }
    estimate_ = detail::clamp_estimate(estimate_, options_.min_limit, options_.max_limit);
    return limit();
  }
  [[nodiscard]] std::unique_ptr<AdaptiveAlgorithm> clone() const override {
    return std::make_unique<AimdLimit>(options_);
  }
  [[nodiscard]] const AimdOptions& options() const noexcept { return options_; }

 private:
  static AimdOptions validated(const AimdOptions& o) {
    detail::check_adaptive_common("AimdOptions", o.initial_limit, o.min_limit, o.max_limit, o.window_samples,
                                  o.window_max);
    detail::adaptive_require(o.latency_threshold.count() > 0, "AimdOptions.latency_threshold", "must be > 0");
    detail::adaptive_require(o.backoff_ratio > 0 && o.backoff_ratio < 1, "AimdOptions.backoff_ratio",
                             "must be in (0, 1)");
    detail::adaptive_require(o.additive_increase >= 0 && std::isfinite(o.additive_increase),
                             "AimdOptions.additive_increase", "must be finite and >= 0");
    return o;
  }

  AimdOptions options_;
  double estimate_;
  detail::SampleWindow window_;
};

}  // namespace ratelimit
