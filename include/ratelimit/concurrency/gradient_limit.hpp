#pragma once

/// @file
/// `GradientLimit`: a concurrency limit moved by the gradient of the unloaded to the current RTT
/// (include/ratelimit/concurrency/README.md "Adaptive algorithms").

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string_view>

#include "ratelimit/concurrency/adaptive_algorithm.hpp"
#include "ratelimit/concurrency/adaptive_window.hpp"
#include "ratelimit/concurrency/min_rtt_probe.hpp"

namespace ratelimit {

/// Options of `GradientLimit`; a plain aggregate.
struct GradientOptions {
  /// The limit before any sample, in units; in [min_limit, max_limit]. The first window measures the
  /// unloaded RTT, so keep it below the service's capacity.
  std::int64_t initial_limit = 20;
  /// The limit never goes below this; >= 1.
  std::int64_t min_limit = 1;
  /// The limit never goes above this; >= min_limit.
  std::int64_t max_limit = 1000;
  /// RTT inflation over the min RTT taken as no queueing (1.05: 5 %); in [1, 2]. Above 1 it also absorbs
  /// the probe's measurement error (a min RTT measured low would otherwise hold the limit under capacity).
  double tolerance = 1.05;
  /// Units added to the limit per window: the queue it settles at, and how fast it grows; finite, >= 0.
  double queue_allowance = 2.0;
  /// Weight of a window's new limit against the old one; in (0, 1].
  double smoothing = 0.7;
  /// Samples per window; >= 1.
  std::int64_t window_samples = 1000;
  /// A window closes at this age even with fewer samples; > 0.
  std::chrono::nanoseconds window_max = std::chrono::seconds(1);
  /// The min-RTT probe.
  MinRttProbeOptions probe{};
};

/// A gradient of RTTs (Netflix concurrency-limits `Gradient2Limit`, with Envoy adaptive concurrency's
/// min-RTT probing for the baseline): per window, gradient = clamp(tolerance x min_rtt / mean RTT, 0.5, 2);
/// new = limit x gradient + queue_allowance; limit = limit x (1 - smoothing) + new x smoothing. A window
/// with a drop takes gradient 0.5; one using less than half the limit leaves it (the caller, not the
/// service, limits the load). Saturated, the limit settles at tolerance x capacity + queue_allowance.
/// Slow start (TCP's): until the first window with a drop or a gradient under 0.9, each used window doubles
/// the limit, so a low `initial_limit` costs a few windows, not seconds.
/// Gradient2 takes an exponential average of all RTTs as its long-term RTT; under sustained overload that
/// average absorbs the queueing and the limit climbs to max_limit (bench_adaptive measured it), so the
/// baseline here is the probed min RTT (`MinRttProbeOptions`). Doubles; deterministic for a seed.
/// Not thread-safe (see `AdaptiveAlgorithm`). Throws `std::invalid_argument` naming the field for bad options.
/// Example:
///   ratelimit::GradientLimit gradient({.initial_limit = 10, .max_limit = 200});
///   gradient.on_sample({.now_ns = 0, .rtt_ns = 2'000'000, .in_flight = 10});
class GradientLimit final : public detail::ProbedLimit {
 public:
  explicit GradientLimit(GradientOptions options = {})
      : ProbedLimit(validated(options).initial_limit, options.min_limit, options.max_limit, options.window_samples,
                    options.window_max, options.probe),
        options_(options) {}

  [[nodiscard]] std::string_view name() const noexcept override { return "gradient"; }
  std::int64_t on_sample(const LatencySample& sample) override {
    const auto w = feed(sample);
    if (w && (w->drops > 0 || static_cast<double>(w->max_in_flight) * 2 >= estimate_)) adjust(*w);
    return limit();
  }
  [[nodiscard]] std::unique_ptr<AdaptiveAlgorithm> clone() const override {
    return std::make_unique<GradientLimit>(options_);
  }
  [[nodiscard]] const GradientOptions& options() const noexcept { return options_; }

 private:
  static GradientOptions validated(const GradientOptions& o) {
    detail::check_adaptive_common("GradientOptions", o.initial_limit, o.min_limit, o.max_limit, o.window_samples,
                                  o.window_max);
    detail::adaptive_require(o.tolerance >= 1 && o.tolerance <= 2, "GradientOptions.tolerance", "must be in [1, 2]");
    detail::adaptive_require(o.queue_allowance >= 0 && std::isfinite(o.queue_allowance),
                             "GradientOptions.queue_allowance", "must be finite and >= 0");
    detail::adaptive_require(o.smoothing > 0 && o.smoothing <= 1, "GradientOptions.smoothing", "must be in (0, 1]");
    detail::check_probe("GradientOptions.probe", o.probe);
    return o;
  }

  /// One used window's move of the limit.
  void adjust(const detail::WindowStats& w) noexcept {
    double gradient = options_.tolerance * baseline_ns() / w.mean_rtt_ns;
    gradient = w.drops > 0 ? 0.5 : (gradient < 0.5 ? 0.5 : (gradient > 2 ? 2.0 : gradient));
    slow_start_ = slow_start_ && gradient >= kSlowStartExit;
    const double next = slow_start_ ? estimate_ * 2 : estimate_ * gradient + options_.queue_allowance;
    const double weight = slow_start_ ? 1.0 : options_.smoothing;
    move_to(next, weight);
  }

  // Slow start ends at the first gradient below this: three standard deviations of a 1,000-sample mean
  // of exponential service times.
  static constexpr double kSlowStartExit = 0.9;

  GradientOptions options_;
};

}  // namespace ratelimit
