#pragma once

/// @file
/// Min-RTT probing for the adaptive algorithms that compare RTTs with the unloaded one (`GradientLimit`,
/// `VegasLimit`), and their common base: include/ratelimit/concurrency/README.md "Adaptive algorithms".

#include <array>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "ratelimit/concurrency/adaptive_algorithm.hpp"
#include "ratelimit/concurrency/adaptive_window.hpp"

namespace ratelimit {

/// How an algorithm measures the unloaded RTT (Envoy's adaptive concurrency filter, "minRTT calculation"):
/// every `interval` (+ jitter) the limit drops to `ratio` x the concurrency the last window served without
/// queueing (mean in flight x min RTT / mean RTT, at most the limit), until `samples` samples granted at or
/// under the lowered limit and completed after 7 x the old min RTT were averaged (the first completions of
/// a probe are its short requests); the min RTT is the mean of the last `history` probes' means. The
/// algorithm's first window gives a rough one, and a first probe at the limit then in force (not lowered)
/// follows at once. A plain aggregate.
struct MinRttProbeOptions {
  /// Time between probes, on the samples' clock; > 0.
  std::chrono::nanoseconds interval = std::chrono::seconds(10);
  /// Each interval is lengthened by up to this fraction, drawn from `seed` (so a fleet's probes spread); in [0, 1].
  double jitter = 0.15;
  /// The probe's limit over the concurrency served without queueing; in (0, 1).
  double ratio = 0.9;
  /// Samples a probe averages; >= 1. The mean of n samples of a service time with coefficient of variation
  /// v is off by about v / sqrt(n): 2,000 keeps exponential service times within 2.2 % (one sigma).
  std::int64_t samples = 2000;
  /// A probe ends this long after its settling time even with fewer samples (with none, the old min RTT
  /// stays); > 0.
  std::chrono::nanoseconds max = std::chrono::seconds(1);
  /// The min RTT is the mean of the last `history` probes (fewer before that many ran); in [1, 8]. More
  /// halves the measurement error with each fourfold, and follows a real change of the unloaded RTT over as
  /// many probes.
  std::int64_t history = 4;
  /// Seed of the jitter.
  std::uint64_t seed = 1;
};

namespace detail {

/// Probe results a `MinRttProbe` keeps at most (`MinRttProbeOptions::history`).
inline constexpr std::int64_t kMaxProbeHistory = 8;

/// Checks `MinRttProbeOptions`; `field` names it ("VegasOptions.probe").
inline void check_probe(const std::string& field, const MinRttProbeOptions& o) {
  adaptive_require(o.interval.count() > 0, field + ".interval", "must be > 0");
  adaptive_require(o.jitter >= 0 && o.jitter <= 1, field + ".jitter", "must be in [0, 1]");
  adaptive_require(o.ratio > 0 && o.ratio < 1, field + ".ratio", "must be in (0, 1)");
  adaptive_require(o.samples >= 1, field + ".samples", "must be >= 1");
  adaptive_require(o.max.count() > 0, field + ".max", "must be > 0");
  adaptive_require(o.history >= 1 && o.history <= kMaxProbeHistory, field + ".history", "must be in [1, 8]");
}

/// The probe of `MinRttProbeOptions`: fixed state, deterministic for a seed.
class MinRttProbe {
 public:
  explicit MinRttProbe(const MinRttProbeOptions& options) noexcept : options_(options), rng_(options.seed) {}

  [[nodiscard]] bool probing() const noexcept { return probing_; }
  /// The limit while probing.
  [[nodiscard]] std::int64_t limit() const noexcept { return limit_; }
  /// The unloaded RTT, ns; 0 before the first measurement.
  [[nodiscard]] double min_rtt_ns() const noexcept { return min_rtt_; }

  /// The rough first measurement (an algorithm's first window); a probe at the limit in force follows at once.
  void first_window(double rtt_ns, std::int64_t now_ns) noexcept {
    min_rtt_ = rtt_ns < 1 ? 1.0 : rtt_ns;
    next_ns_ = now_ns;
    first_ = true;
  }

  /// Offers a sample; true when the probe took it (running, or due and started now with the limit
  /// `served` x ratio in [min, max]): the algorithm's own window must not see it.
  bool take(const LatencySample& s, double served, std::int64_t min, std::int64_t max) noexcept {
    if (!probing_) {
      if (min_rtt_ == 0 || s.now_ns < next_ns_) return false;
      probing_ = true;
      start_ns_ = s.now_ns;
      count_ = 0;
      sum_ = 0;
      limit_ = clamp_limit(first_ ? served : served * options_.ratio, min, max);
      first_ = false;
      return true;
    }
    const double settle_ns = kSettleRtts * min_rtt_;
    const auto settle = static_cast<std::uint64_t>(settle_ns < 0x1.0p62 ? settle_ns : 0x1.0p62);
    const auto age = static_cast<std::uint64_t>(s.now_ns) - static_cast<std::uint64_t>(start_ns_);
    if (s.in_flight <= limit_ && s.now_ns >= start_ns_ && age >= settle) {
      ++count_;
      sum_ += static_cast<double>(s.rtt_ns);
    }
    const bool late = s.now_ns < start_ns_ || age >= static_cast<std::uint64_t>(options_.max.count()) + settle;
    if (count_ < options_.samples && !late) return true;
    if (count_ > 0) remember(sum_ / static_cast<double>(count_));
    probing_ = false;
    schedule(s.now_ns);
    return true;
  }

 private:
  // Completions a probe leaves out at its start, in min RTTs: of exponential service times the mean of the
  // rest is then short by about 7 e^-7 (0.6 %).
  static constexpr double kSettleRtts = 7;

  /// Keeps a probe's mean RTT; the min RTT becomes the mean of the kept ones.
  void remember(double mean_ns) noexcept {
    history_[static_cast<std::size_t>(next_slot_)] = mean_ns < 1 ? 1.0 : mean_ns;
    next_slot_ = (next_slot_ + 1) % options_.history;
    if (kept_ < options_.history) ++kept_;
    double sum = 0;
    for (std::int64_t i = 0; i < kept_; ++i) sum += history_[static_cast<std::size_t>(i)];
    min_rtt_ = sum / static_cast<double>(kept_);
  }

  void schedule(std::int64_t now_ns) noexcept {
    // splitmix64: one fixed sequence per seed.
    rng_ += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = rng_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    const double unit = static_cast<double>(z >> 11) * 0x1.0p-53;  // [0, 1)
    const double interval = static_cast<double>(options_.interval.count()) * (1 + options_.jitter * unit);
    const double room = static_cast<double>(std::numeric_limits<std::int64_t>::max()) - static_cast<double>(now_ns);
    next_ns_ =
        interval >= room ? std::numeric_limits<std::int64_t>::max() : now_ns + static_cast<std::int64_t>(interval);
  }

  MinRttProbeOptions options_;
  std::uint64_t rng_;
  double min_rtt_ = 0;
  std::array<double, kMaxProbeHistory> history_{};  // the last probes' mean RTTs, ns
  std::int64_t next_slot_ = 0;
  std::int64_t kept_ = 0;
  std::int64_t next_ns_ = 0;
  bool probing_ = false;
  bool first_ = false;
  std::int64_t limit_ = 1;
  std::int64_t start_ns_ = 0;
  std::int64_t count_ = 0;
  double sum_ = 0;
};

/// A sample window with a min-RTT probe beside it: what `GradientLimit` and `VegasLimit` share.
class ProbedWindow {
 public:
  ProbedWindow(std::int64_t window_samples, std::chrono::nanoseconds window_max, const MinRttProbeOptions& probe)
      : window_(window_samples, window_max), probe_(probe) {}

  /// Feeds one sample (sanitised) given the algorithm's limit `estimate` in [min, max]; returns a completed
  /// window's stats when the algorithm should move its limit (never while probing, nor for the first window,
  /// which gives the first min RTT).
  std::optional<WindowStats> feed(const LatencySample& s, double estimate, std::int64_t min,
                                  std::int64_t max) noexcept {
    const double served = served_ > 0 && served_ < estimate ? served_ : estimate;
    if (probe_.take(s, served, min, max)) {
      window_.reset();
      return {};
    }
    const std::optional<WindowStats> w = window_.add(s);
    if (!w) return {};
    if (probe_.min_rtt_ns() == 0) {
      probe_.first_window(w->mean_rtt_ns, s.now_ns);
      return {};
    }
    served_ = w->mean_in_flight * probe_.min_rtt_ns() / w->mean_rtt_ns;
    return w;
  }
  [[nodiscard]] bool probing() const noexcept { return probe_.probing(); }
  [[nodiscard]] std::int64_t probe_limit() const noexcept { return probe_.limit(); }
  [[nodiscard]] double min_rtt_ns() const noexcept { return probe_.min_rtt_ns(); }

 private:
  SampleWindow window_;
  MinRttProbe probe_;
  double served_ = 0;  // the last window's concurrency served without queueing
};

/// The base of the algorithms with a min-RTT probe (`GradientLimit`, `VegasLimit`): their limit as a double in
/// [min, max] (`limit()` rounds it down; the probe's limit while probing), their window and probe.
class ProbedLimit : public AdaptiveAlgorithm {
 public:
  [[nodiscard]] std::int64_t limit() const noexcept final {
    return window_.probing() ? window_.probe_limit() : clamp_limit(estimate_, min_, max_);
  }
  [[nodiscard]] std::int64_t min_rtt_ns() const noexcept final {
    const double ns = window_.min_rtt_ns();  // at most 2^63 (a mean of int64 RTTs): saturate there
    return ns >= 0x1.0p63 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(ns);
  }
  /// Whether a min-RTT probe runs now (the limit is lowered).
  [[nodiscard]] bool probing() const noexcept { return window_.probing(); }

 protected:
  ProbedLimit(std::int64_t initial, std::int64_t min, std::int64_t max, std::int64_t window_samples,
              std::chrono::nanoseconds window_max, const MinRttProbeOptions& probe)
      : estimate_(static_cast<double>(initial)), min_(min), max_(max), window_(window_samples, window_max, probe) {}

  /// Feeds one sample; a completed window's stats when the algorithm should move its limit.
  std::optional<WindowStats> feed(const LatencySample& sample) noexcept {
    return window_.feed(sanitised(sample), estimate_, min_, max_);
  }
  /// The min RTT, ns (> 0 once a window was returned).
  [[nodiscard]] double baseline_ns() const noexcept { return window_.min_rtt_ns(); }
  /// Moves the limit to estimate x (1 - weight) + next x weight, kept in [min, max].
  void move_to(double next, double weight) noexcept {
    estimate_ = clamp_estimate(estimate_ * (1 - weight) + next * weight, min_, max_);
  }

  double estimate_;  // the limit before rounding
  bool slow_start_ = true;

 private:
  std::int64_t min_;
  std::int64_t max_;
  ProbedWindow window_;
};

}  // namespace detail
}  // namespace ratelimit
