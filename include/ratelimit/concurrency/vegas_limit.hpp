#pragma once

/// @file
/// `VegasLimit`: a concurrency limit moved by TCP Vegas's estimate of the queue inside the service
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

/// Options of `VegasLimit`; a plain aggregate.
struct VegasOptions {
  /// The limit before any sample, in units; in [min_limit, max_limit]. The first window measures the
  /// unloaded RTT, so keep it below the service's capacity.
  std::int64_t initial_limit = 20;
  /// The limit never goes below this; >= 1.
  std::int64_t min_limit = 1;
  /// The limit never goes above this; >= min_limit.
  std::int64_t max_limit = 1000;
  /// An estimated queue (units) under alpha x log10(limit) grows the limit; finite, > 0.
  double alpha = 1.0;
  /// An estimated queue (units) over beta x log10(limit) cuts the limit; finite, >= alpha.
  double beta = 3.0;
  /// Weight of a window's new limit against the old one; in (0, 1].
  double smoothing = 0.7;
  /// A window with a drop multiplies the limit by this; in (0, 1).
  double drop_backoff = 0.9;
  /// Samples per window; >= 1.
  std::int64_t window_samples = 1000;
  /// A window closes at this age even with fewer samples; > 0.
  std::chrono::nanoseconds window_max = std::chrono::seconds(1);
  /// The min-RTT probe.
  MinRttProbeOptions probe{};
};

/// TCP Vegas's queue estimate (Netflix concurrency-limits `VegasLimit`) with min-RTT probing (Envoy's
/// adaptive concurrency filter). Per window: queue = mean in flight x (1 - min_rtt / mean RTT), the units
/// waiting inside the service; with L = log10(limit) (at least 1): queue <= L grows the limit by beta x L,
/// queue < alpha x L by L, queue > beta x L cuts it by the excess over (alpha + beta) / 2 x L at once (the
/// estimate is in units, so one window corrects it; Netflix cuts by L); a drop multiplies it by
/// `drop_backoff`; smoothed by `smoothing`. A window using less than half the limit leaves it. Slow start
/// (TCP's): until the first window with a drop or a queue of alpha x L or more, each used window doubles it.
/// Saturated, the limit settles between capacity + alpha x L and capacity + beta x L. Doubles; deterministic
/// for a seed. Not thread-safe (see `AdaptiveAlgorithm`). Throws `std::invalid_argument` naming the field for
/// bad options.
/// Example:
///   ratelimit::VegasLimit vegas({.initial_limit = 10, .probe = {.interval = std::chrono::seconds(30)}});
///   vegas.on_sample({.now_ns = 0, .rtt_ns = 2'000'000, .in_flight = 10});
class VegasLimit final : public detail::ProbedLimit {
 public:
  explicit VegasLimit(VegasOptions options = {})
      : ProbedLimit(validated(options).initial_limit, options.min_limit, options.max_limit, options.window_samples,
                    options.window_max, options.probe),
        options_(options) {}

  [[nodiscard]] std::string_view name() const noexcept override { return "vegas"; }
  std::int64_t on_sample(const LatencySample& sample) override {
    const auto w = feed(sample);
    if (w) adjust(*w);
    return limit();
  }
  [[nodiscard]] std::unique_ptr<AdaptiveAlgorithm> clone() const override {
    return std::make_unique<VegasLimit>(options_);
  }
  [[nodiscard]] const VegasOptions& options() const noexcept { return options_; }

 private:
  static VegasOptions validated(const VegasOptions& o) {
    detail::check_adaptive_common("VegasOptions", o.initial_limit, o.min_limit, o.max_limit, o.window_samples,
                                  o.window_max);
    detail::adaptive_require(o.alpha > 0 && std::isfinite(o.alpha), "VegasOptions.alpha", "must be finite and > 0");
    detail::adaptive_require(o.beta >= o.alpha && std::isfinite(o.beta), "VegasOptions.beta",
                             "must be finite and >= alpha");
    detail::adaptive_require(o.smoothing > 0 && o.smoothing <= 1, "VegasOptions.smoothing", "must be in (0, 1]");
    detail::adaptive_require(o.drop_backoff > 0 && o.drop_backoff < 1, "VegasOptions.drop_backoff",
                             "must be in (0, 1)");
    detail::check_probe("VegasOptions.probe", o.probe);
    return o;
  }

  /// One window's move of the limit.
  void adjust(const detail::WindowStats& w) noexcept {
    double next = estimate_;
    if (w.drops > 0) {
      next = estimate_ * options_.drop_backoff;
      slow_start_ = false;
    } else if (static_cast<double>(w.max_in_flight) * 2 >= estimate_) {
      const double lg = estimate_ > 10 ? std::log10(estimate_) : 1.0;
      const double min_rtt = baseline_ns();
      const double queue = w.mean_rtt_ns > min_rtt ? w.mean_in_flight * (1 - min_rtt / w.mean_rtt_ns) : 0.0;
      slow_start_ = slow_start_ && queue < options_.alpha * lg;
      if (slow_start_) {
        next = estimate_ * 2;
      } else if (queue <= lg) {
        next = estimate_ + options_.beta * lg;
      } else if (queue < options_.alpha * lg) {
        next = estimate_ + lg;
      } else if (queue > options_.beta * lg) {
        next = estimate_ - (queue - (options_.alpha + options_.beta) / 2 * lg);
      }
    }
    const double weight = slow_start_ ? 1.0 : options_.smoothing;
    move_to(next, weight);
  }

  VegasOptions options_;
};

}  // namespace ratelimit
