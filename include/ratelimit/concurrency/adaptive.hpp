#pragma once

/// @file
/// Adaptive concurrency algorithms: `AdaptiveAlgorithm` moves a concurrency limit from latency samples
/// (`AimdLimit`, `GradientLimit`, `VegasLimit`); include/ratelimit/concurrency/README.md "Adaptive algorithms".

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
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

namespace detail {

/// Throws `std::invalid_argument` "<field>: <why>" unless `ok`.
inline void adaptive_require(bool ok, const char* field, const char* why) {
  if (!ok) throw std::invalid_argument(std::string(field) + ": " + why);
}

/// Checks the bounds every algorithm shares; `type` names the options struct ("AimdOptions").
inline void check_adaptive_bounds(const std::string& type, std::int64_t initial, std::int64_t min, std::int64_t max) {
  adaptive_require(min >= 1, (type + ".min_limit").c_str(), "must be >= 1");
  adaptive_require(max >= min, (type + ".max_limit").c_str(), "must be >= min_limit");
  adaptive_require(initial >= min && initial <= max, (type + ".initial_limit").c_str(),
                   "must be in [min_limit, max_limit]");
}

/// Checks the sample window every algorithm shares.
inline void check_adaptive_window(const std::string& type, std::int64_t samples, std::chrono::nanoseconds max_time) {
  adaptive_require(samples >= 1, (type + ".window_samples").c_str(), "must be >= 1");
  adaptive_require(max_time.count() > 0, (type + ".window_max").c_str(), "must be > 0");
}

/// `x` rounded down into [min, max]; NaN gives `min`. Exact at the ends (no double overflow into int64).
[[nodiscard]] inline std::int64_t clamp_limit(double x, std::int64_t min, std::int64_t max) noexcept {
  if (!(x > static_cast<double>(min))) return min;
  if (x >= static_cast<double>(max)) return max;
  const auto floor = static_cast<std::int64_t>(x);  // x < max <= 2^63: fits
  return floor < min ? min : (floor > max ? max : floor);
}

/// `x` kept in [min, max] as a double (the fractional limit the algorithms move).
[[nodiscard]] inline double clamp_estimate(double x, std::int64_t min, std::int64_t max) noexcept {
  if (!(x > static_cast<double>(min))) return static_cast<double>(min);
  if (x > static_cast<double>(max)) return static_cast<double>(max);
  return x;
}

/// A sample window of fixed size: the mean RTT, the largest in-flight count and the drops of the samples
/// since the window opened. It closes after `samples` samples or `max_ns` nanoseconds (with at least one
/// sample), whichever first (Netflix concurrency-limits `WindowedLimit`, with an average sample window).
/// Sums are doubles: exact below 2^53 ns in total (104 days), rounded to 53 bits beyond.
class SampleWindow {
 public:
  SampleWindow(std::int64_t samples, std::int64_t max_ns) noexcept : samples_(samples), max_ns_(max_ns) {}

  /// Adds one sample (already sanitised); true when the window is now complete.
  bool add(std::int64_t now_ns, std::int64_t rtt_ns, std::int64_t in_flight, bool dropped) noexcept {
    if (count_ == 0) start_ns_ = now_ns;
    ++count_;
    rtt_sum_ += static_cast<double>(rtt_ns);
    in_flight_sum_ += static_cast<double>(in_flight);
    if (in_flight > max_in_flight_) max_in_flight_ = in_flight;
    if (dropped) ++drops_;
    // Subtraction in unsigned: a clock stepped far back or forth must not overflow.
    const auto elapsed = static_cast<std::uint64_t>(now_ns) - static_cast<std::uint64_t>(start_ns_);
    return count_ >= samples_ || (now_ns >= start_ns_ && elapsed >= static_cast<std::uint64_t>(max_ns_));
  }
  [[nodiscard]] double mean_rtt_ns() const noexcept { return count_ ? rtt_sum_ / static_cast<double>(count_) : 0.0; }
  [[nodiscard]] double mean_in_flight() const noexcept {
    return count_ ? in_flight_sum_ / static_cast<double>(count_) : 0.0;
  }
  [[nodiscard]] std::int64_t max_in_flight() const noexcept { return max_in_flight_; }
  [[nodiscard]] std::int64_t drops() const noexcept { return drops_; }
  [[nodiscard]] std::int64_t count() const noexcept { return count_; }
  void reset() noexcept {
    count_ = 0;
    drops_ = 0;
    max_in_flight_ = 0;
    rtt_sum_ = 0;
    in_flight_sum_ = 0;
  }

 private:
  std::int64_t samples_;
  std::int64_t max_ns_;
  std::int64_t start_ns_ = 0;
  std::int64_t count_ = 0;
  std::int64_t drops_ = 0;
  std::int64_t max_in_flight_ = 0;
  double rtt_sum_ = 0;
  double in_flight_sum_ = 0;
};

/// Slow start (TCP's) ends at the first window whose gradient (tolerance x min RTT / RTT) falls below this:
/// 0.9 is about two standard deviations of a 500-sample mean of exponential service times.
inline constexpr double kSlowStartExit = 0.9;

/// The sample with out-of-range fields moved into range (rtt >= 0, in_flight >= 1).
[[nodiscard]] inline LatencySample sanitised(LatencySample s) noexcept {
  if (s.rtt_ns < 0) s.rtt_ns = 0;
  if (s.in_flight < 1) s.in_flight = 1;
  return s;
}

}  // namespace detail

/// Options of `AimdLimit`; a plain aggregate.
struct AimdOptions {
  /// The limit before any sample, in units; in [min_limit, max_limit].
  std::int64_t initial_limit = 20;
  /// The limit never goes below this; >= 1.
  std::int64_t min_limit = 1;
  /// The limit never goes above this; >= min_limit.
  std::int64_t max_limit = 1000;
  /// A window whose mean RTT exceeds this is overload (the limit is cut); > 0. Set it from the service's
  /// latency target (for example 1.5 x its unloaded mean).
  std::chrono::nanoseconds latency_threshold = std::chrono::milliseconds(100);
  /// The cut: limit x backoff_ratio; in (0, 1).
  double backoff_ratio = 0.9;
  /// Units added per window without overload while the limit is used (in flight >= half of it); >= 0.
  double additive_increase = 1.0;
  /// Samples per window; >= 1.
  std::int64_t window_samples = 500;
  /// A window closes at this age even with fewer samples; > 0.
  std::chrono::nanoseconds window_max = std::chrono::seconds(1);
};

/// Additive increase, multiplicative decrease (Netflix concurrency-limits `AIMDLimit`, over a sample
/// window as its `WindowedLimit`): per window, a drop or a mean RTT over `latency_threshold` multiplies
/// the limit by `backoff_ratio`; otherwise, if the window used at least half the limit, it adds
/// `additive_increase`. The limit is a double kept in [min_limit, max_limit]; `limit()` rounds it down.
/// Needs an absolute latency threshold: simple, predictable, but the limit saws between the knee and
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
        window_(options_.window_samples, options_.window_max.count()) {}

  [[nodiscard]] std::string_view name() const noexcept override { return "aimd"; }
  [[nodiscard]] std::int64_t limit() const noexcept override {
    return detail::clamp_limit(estimate_, options_.min_limit, options_.max_limit);
  }
  std::int64_t on_sample(const LatencySample& raw) override {
    const LatencySample s = detail::sanitised(raw);
    if (!window_.add(s.now_ns, s.rtt_ns, s.in_flight, s.outcome == PermitOutcome::dropped)) return limit();
    const bool overload =
        window_.drops() > 0 || window_.mean_rtt_ns() > static_cast<double>(options_.latency_threshold.count());
    if (overload) {
      estimate_ *= options_.backoff_ratio;
    } else if (static_cast<double>(window_.max_in_flight()) * 2 >= estimate_) {
      estimate_ += options_.additive_increase;
    }
    estimate_ = detail::clamp_estimate(estimate_, options_.min_limit, options_.max_limit);
    window_.reset();
    return limit();
  }
  [[nodiscard]] std::unique_ptr<AdaptiveAlgorithm> clone() const override {
    return std::make_unique<AimdLimit>(options_);
  }
  [[nodiscard]] const AimdOptions& options() const noexcept { return options_; }

 private:
  static AimdOptions validated(const AimdOptions& o) {
    detail::check_adaptive_bounds("AimdOptions", o.initial_limit, o.min_limit, o.max_limit);
    detail::check_adaptive_window("AimdOptions", o.window_samples, o.window_max);
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

/// Options of `GradientLimit`; a plain aggregate.
/// How an algorithm measures the unloaded RTT (Envoy's adaptive concurrency filter, "minRTT calculation"):
/// every `interval` (+ jitter) the limit drops to limit x `ratio` until `samples` samples granted at or under
/// that limit and completed after 7 x the old min RTT (the first completions are the short requests) were
/// averaged; their mean is the new min RTT. The algorithm's first window (at `initial_limit`) gives a rough
/// one, and a first probe at the limit then in force (not lowered) follows at once. A plain aggregate.
struct MinRttProbeOptions {
  /// Time between probes, on the samples' clock; > 0.
  std::chrono::nanoseconds interval = std::chrono::seconds(10);
  /// Each interval is lengthened by up to this fraction, drawn from `seed` (so a fleet's probes spread); in [0, 1].
  double jitter = 0.15;
  /// While probing, the limit is limit x ratio (rounded down, at least min_limit); in (0, 1). It must bring
  /// the load under the service's capacity, so keep 1 / ratio above the queueing the algorithm allows.
  double ratio = 0.9;
  /// Samples a probe averages; >= 1. The mean of n samples of a service time with coefficient of variation
  /// v is off by about v / sqrt(n).
  std::int64_t samples = 2000;
  /// A probe ends at this age (after its settling time) even with fewer samples (with none, the old min RTT
  /// stays); > 0.
  std::chrono::nanoseconds max = std::chrono::seconds(1);
  /// Seed of the jitter.
  std::uint64_t seed = 1;
};

namespace detail {

/// Checks `MinRttProbeOptions`; `field` names it ("VegasOptions.probe").
inline void check_probe(const std::string& field, const MinRttProbeOptions& o) {
  adaptive_require(o.interval.count() > 0, (field + ".interval").c_str(), "must be > 0");
  adaptive_require(o.jitter >= 0 && o.jitter <= 1, (field + ".jitter").c_str(), "must be in [0, 1]");
  adaptive_require(o.ratio > 0 && o.ratio < 1, (field + ".ratio").c_str(), "must be in (0, 1)");
  adaptive_require(o.samples >= 1, (field + ".samples").c_str(), "must be >= 1");
  adaptive_require(o.max.count() > 0, (field + ".max").c_str(), "must be > 0");
}

/// The min-RTT probe of `MinRttProbeOptions`: fixed state, deterministic for a seed.
class MinRttProbe {
 public:
  explicit MinRttProbe(const MinRttProbeOptions& options) noexcept : options_(options), rng_(options.seed) {}

  [[nodiscard]] bool probing() const noexcept { return probing_; }
  /// The limit while probing.
  [[nodiscard]] std::int64_t limit() const noexcept { return limit_; }
  /// The unloaded RTT, ns; 0 before the first measurement.
  [[nodiscard]] double min_rtt_ns() const noexcept { return min_rtt_; }

  /// The first, rough measurement (an algorithm's first window, whose first completions were the short
  /// requests): a probe at the limit then in force follows at once.
  void first_window(double rtt_ns, std::int64_t now_ns) noexcept {
    min_rtt_ = rtt_ns < 1 ? 1.0 : rtt_ns;
    next_ns_ = now_ns;
    first_ = true;
  }

  /// Offers a sample; true when the probe took it (running, or due and started now with the limit
  /// `estimate` x ratio in [min, max]): the algorithm's own window must not see it.
  bool take(const LatencySample& s, double estimate, std::int64_t min, std::int64_t max) noexcept {
    if (!probing_) {
      if (min_rtt_ == 0 || s.now_ns < next_ns_) return false;
      probing_ = true;
      start_ns_ = s.now_ns;
      count_ = 0;
      sum_ = 0;
      limit_ = clamp_limit(first_ ? estimate : estimate * options_.ratio, min, max);
      first_ = false;
      return true;
    }
    // Granted under the probe's limit, and done after the settling time: the first completions of a
    // probe are its short requests (the long ones still run), so averaging them would underestimate.
    const double settle_ns = kSettleRtts * min_rtt_;
    const auto settle = static_cast<std::uint64_t>(settle_ns < 0x1.0p62 ? settle_ns : 0x1.0p62);
    const auto since = static_cast<std::uint64_t>(s.now_ns) - static_cast<std::uint64_t>(start_ns_);
    if (s.in_flight <= limit_ && s.now_ns >= start_ns_ && since >= settle) {
      ++count_;
      sum_ += static_cast<double>(s.rtt_ns);
    }
    const bool late = s.now_ns < start_ns_ || since >= static_cast<std::uint64_t>(options_.max.count()) + settle;
    if (count_ < options_.samples && !late) return true;
    if (count_ > 0) {
      const double mean = sum_ / static_cast<double>(count_);
      min_rtt_ = mean < 1 ? 1.0 : mean;
    }
    probing_ = false;
    schedule(s.now_ns);
    return true;
  }

 private:
  // Completions the probe leaves out at its start, in min RTTs: with exponential service times the mean of
  // the rest is then short by about 7 e^-7 (0.6 %).
  static constexpr double kSettleRtts = 7;

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
  std::int64_t next_ns_ = 0;
  bool probing_ = false;
  bool first_ = false;
  std::int64_t limit_ = 1;
  std::int64_t start_ns_ = 0;
  std::int64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace detail

/// Options of `GradientLimit`; a plain aggregate.
struct GradientOptions {
  /// The limit before any sample, in units; in [min_limit, max_limit]. The first window measures the
  /// unloaded RTT, so keep it below the service's capacity.
  std::int64_t initial_limit = 20;
  /// The limit never goes below this; >= 1.
  std::int64_t min_limit = 1;
  /// The limit never goes above this; >= min_limit.
  std::int64_t max_limit = 1000;
  /// RTT inflation over the min RTT taken as no queueing (1.1: 10 %); in [1, 2].
  double tolerance = 1.05;
  /// Units added to the limit per window: the queue it settles at, and how fast it grows; >= 0.
  double queue_allowance = 2.0;
  /// Weight of a window's new limit against the old one; in (0, 1].
  double smoothing = 0.5;
  /// Samples per window; >= 1.
  std::int64_t window_samples = 500;
  /// A window closes at this age even with fewer samples; > 0.
  std::chrono::nanoseconds window_max = std::chrono::seconds(1);
  /// The min-RTT probe.
  MinRttProbeOptions probe;
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
class GradientLimit final : public AdaptiveAlgorithm {
 public:
  explicit GradientLimit(GradientOptions options = {})
      : options_(validated(options)),
        estimate_(static_cast<double>(options_.initial_limit)),
        window_(options_.window_samples, options_.window_max.count()),
        probe_(options_.probe) {}

  [[nodiscard]] std::string_view name() const noexcept override { return "gradient"; }
  [[nodiscard]] std::int64_t limit() const noexcept override {
    return probe_.probing() ? probe_.limit() : detail::clamp_limit(estimate_, options_.min_limit, options_.max_limit);
  }
  std::int64_t on_sample(const LatencySample& raw) override {
    const LatencySample s = detail::sanitised(raw);
    if (probe_.take(s, estimate_, options_.min_limit, options_.max_limit)) {
      window_.reset();
      return limit();
    }
    if (!window_.add(s.now_ns, s.rtt_ns, s.in_flight, s.outcome == PermitOutcome::dropped)) return limit();
    const double rtt = window_.mean_rtt_ns() < 1 ? 1.0 : window_.mean_rtt_ns();
    if (probe_.min_rtt_ns() == 0) {
      probe_.first_window(rtt, s.now_ns);
    } else if (window_.drops() > 0 || static_cast<double>(window_.max_in_flight()) * 2 >= estimate_) {
      adjust(rtt);
    }
    window_.reset();
    return limit();
  }
  [[nodiscard]] std::int64_t min_rtt_ns() const noexcept override {
    return static_cast<std::int64_t>(probe_.min_rtt_ns());
  }
  [[nodiscard]] std::unique_ptr<AdaptiveAlgorithm> clone() const override {
    return std::make_unique<GradientLimit>(options_);
  }
  [[nodiscard]] const GradientOptions& options() const noexcept { return options_; }
  /// Whether a min-RTT probe runs now (the limit is lowered).
  [[nodiscard]] bool probing() const noexcept { return probe_.probing(); }

 private:
  static GradientOptions validated(const GradientOptions& o) {
    detail::check_adaptive_bounds("GradientOptions", o.initial_limit, o.min_limit, o.max_limit);
    detail::check_adaptive_window("GradientOptions", o.window_samples, o.window_max);
    detail::adaptive_require(o.tolerance >= 1 && o.tolerance <= 2, "GradientOptions.tolerance", "must be in [1, 2]");
    detail::adaptive_require(o.queue_allowance >= 0 && std::isfinite(o.queue_allowance),
                             "GradientOptions.queue_allowance", "must be finite and >= 0");
    detail::adaptive_require(o.smoothing > 0 && o.smoothing <= 1, "GradientOptions.smoothing", "must be in (0, 1]");
    detail::check_probe("GradientOptions.probe", o.probe);
    return o;
  }

  /// One used window's move of the limit, from its mean RTT (ns, >= 1).
  void adjust(double rtt) noexcept {
    double gradient = options_.tolerance * probe_.min_rtt_ns() / rtt;
    gradient = window_.drops() > 0 ? 0.5 : (gradient < 0.5 ? 0.5 : (gradient > 2 ? 2.0 : gradient));
    slow_start_ = slow_start_ && gradient >= detail::kSlowStartExit;
    const double next = slow_start_ ? estimate_ * 2 : estimate_ * gradient + options_.queue_allowance;
    const double weight = slow_start_ ? 1.0 : options_.smoothing;
    estimate_ =
        detail::clamp_estimate(estimate_ * (1 - weight) + next * weight, options_.min_limit, options_.max_limit);
  }

  GradientOptions options_;
  double estimate_;
  bool slow_start_ = true;
  detail::SampleWindow window_;
  detail::MinRttProbe probe_;
};

/// Options of `VegasLimit`; a plain aggregate.
struct VegasOptions {
  /// The limit before any sample, in units; in [min_limit, max_limit]. The first window measures the
  /// unloaded RTT, so keep it below the service's capacity.
  std::int64_t initial_limit = 20;
  /// The limit never goes below this; >= 1.
  std::int64_t min_limit = 1;
  /// The limit never goes above this; >= min_limit.
  std::int64_t max_limit = 1000;
  /// An estimated queue (units) under alpha x log10(limit) grows the limit; > 0.
  double alpha = 2.0;
  /// An estimated queue (units) over beta x log10(limit) cuts the limit; >= alpha.
  double beta = 4.0;
  /// Weight of a window's new limit against the old one; in (0, 1].
  double smoothing = 0.5;
  /// A window with a drop multiplies the limit by this; in (0, 1).
  double drop_backoff = 0.9;
  /// Samples per window; >= 1.
  std::int64_t window_samples = 500;
  /// A window closes at this age even with fewer samples; > 0.
  std::chrono::nanoseconds window_max = std::chrono::seconds(1);
  /// The min-RTT probe.
  MinRttProbeOptions probe;
};

/// TCP Vegas's queue estimate (Netflix concurrency-limits `VegasLimit`) with min-RTT probing (Envoy's
/// adaptive concurrency filter). Per window: queue = mean in flight x (1 - min_rtt / mean RTT), the units
/// waiting inside the service; with L = log10(limit) (at least 1): queue <= L grows the limit by beta x L,
/// queue < alpha x L by L, queue > beta x L cuts it by the excess over (alpha + beta) / 2 x L at once (the
/// estimate is in units, so one window corrects it; Netflix cuts by L); a drop multiplies it by
/// `drop_backoff`; smoothed by `smoothing`. A window using less than half the limit leaves it. Slow start
/// (TCP's): until the first window with a drop or a queue of alpha x L or more, each used window doubles it. Saturated,
/// the limit settles between capacity + alpha x L and capacity + beta x L. Doubles; deterministic for a seed.
/// Not thread-safe (see `AdaptiveAlgorithm`). Throws `std::invalid_argument` naming the field for bad options.
/// Example:
///   ratelimit::VegasLimit vegas({.initial_limit = 10, .probe = {.interval = std::chrono::seconds(30)}});
///   vegas.on_sample({.now_ns = 0, .rtt_ns = 2'000'000, .in_flight = 10});
class VegasLimit final : public AdaptiveAlgorithm {
 public:
  explicit VegasLimit(VegasOptions options = {})
      : options_(validated(options)),
        estimate_(static_cast<double>(options_.initial_limit)),
        window_(options_.window_samples, options_.window_max.count()),
        probe_(options_.probe) {}

  [[nodiscard]] std::string_view name() const noexcept override { return "vegas"; }
  [[nodiscard]] std::int64_t limit() const noexcept override {
    return probe_.probing() ? probe_.limit() : detail::clamp_limit(estimate_, options_.min_limit, options_.max_limit);
  }
  std::int64_t on_sample(const LatencySample& raw) override {
    const LatencySample s = detail::sanitised(raw);
    if (probe_.take(s, estimate_, options_.min_limit, options_.max_limit)) {
      window_.reset();
      return limit();
    }
    if (!window_.add(s.now_ns, s.rtt_ns, s.in_flight, s.outcome == PermitOutcome::dropped)) return limit();
    const double rtt = window_.mean_rtt_ns() < 1 ? 1.0 : window_.mean_rtt_ns();
    if (probe_.min_rtt_ns() == 0) {
      probe_.first_window(rtt, s.now_ns);
    } else {
      adjust(rtt);
    }
    window_.reset();
    return limit();
  }
  [[nodiscard]] std::int64_t min_rtt_ns() const noexcept override {
    return static_cast<std::int64_t>(probe_.min_rtt_ns());
  }
  [[nodiscard]] std::unique_ptr<AdaptiveAlgorithm> clone() const override {
    return std::make_unique<VegasLimit>(options_);
  }
  [[nodiscard]] const VegasOptions& options() const noexcept { return options_; }
  /// Whether a min-RTT probe runs now (the limit is lowered).
  [[nodiscard]] bool probing() const noexcept { return probe_.probing(); }

 private:
  static VegasOptions validated(const VegasOptions& o) {
    detail::check_adaptive_bounds("VegasOptions", o.initial_limit, o.min_limit, o.max_limit);
    detail::check_adaptive_window("VegasOptions", o.window_samples, o.window_max);
    detail::adaptive_require(o.alpha > 0 && std::isfinite(o.alpha), "VegasOptions.alpha", "must be finite and > 0");
    detail::adaptive_require(o.beta >= o.alpha && std::isfinite(o.beta), "VegasOptions.beta",
                             "must be finite and >= alpha");
    detail::adaptive_require(o.smoothing > 0 && o.smoothing <= 1, "VegasOptions.smoothing", "must be in (0, 1]");
    detail::adaptive_require(o.drop_backoff > 0 && o.drop_backoff < 1, "VegasOptions.drop_backoff",
                             "must be in (0, 1)");
    detail::check_probe("VegasOptions.probe", o.probe);
    return o;
  }

  /// One window's move of the limit, from its mean RTT (ns, >= 1).
  void adjust(double rtt) noexcept {
    double next = estimate_;
    if (window_.drops() > 0) {
      next = estimate_ * options_.drop_backoff;
    } else if (static_cast<double>(window_.max_in_flight()) * 2 >= estimate_) {
      const double lg = estimate_ > 10 ? std::log10(estimate_) : 1.0;
      const double min_rtt = probe_.min_rtt_ns();
      const double queue = rtt > min_rtt ? window_.mean_in_flight() * (1 - min_rtt / rtt) : 0.0;
      slow_start_ = slow_start_ && queue < options_.alpha * lg;
      if (slow_start_) {
        estimate_ = detail::clamp_estimate(estimate_ * 2, options_.min_limit, options_.max_limit);
        return;
      }
      if (queue <= lg) {
        next = estimate_ + options_.beta * lg;
      } else if (queue < options_.alpha * lg) {
        next = estimate_ + lg;
      } else if (queue > options_.beta * lg) {
        next = estimate_ - (queue - (options_.alpha + options_.beta) / 2 * lg);
      }
    }
    estimate_ = detail::clamp_estimate(estimate_ * (1 - options_.smoothing) + next * options_.smoothing,
                                       options_.min_limit, options_.max_limit);
  }

  VegasOptions options_;
  double estimate_;
  bool slow_start_ = true;
  detail::SampleWindow window_;
  detail::MinRttProbe probe_;
};

}  // namespace ratelimit
