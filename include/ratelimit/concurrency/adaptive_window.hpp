#pragma once

/// @file
/// What the adaptive algorithms share (internal): option checks, the clamp of a limit, and the sample window
/// (include/ratelimit/concurrency/README.md "Adaptive algorithms").

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "ratelimit/concurrency/adaptive_algorithm.hpp"

namespace ratelimit::detail {

/// Throws `std::invalid_argument` "<field>: <why>" unless `ok`.
inline void adaptive_require(bool ok, const std::string& field, const char* why) {
  if (!ok) throw std::invalid_argument(field + ": " + why);
}

/// Checks the bounds and the window every algorithm has; `type` names the options struct ("AimdOptions").
inline void check_adaptive_common(const std::string& type, std::int64_t initial, std::int64_t min, std::int64_t max,
                                  std::int64_t window_samples, std::chrono::nanoseconds window_max) {
  adaptive_require(min >= 1, type + ".min_limit", "must be >= 1");
  adaptive_require(max >= min, type + ".max_limit", "must be >= min_limit");
  adaptive_require(initial >= min && initial <= max, type + ".initial_limit", "must be in [min_limit, max_limit]");
  adaptive_require(window_samples >= 1, type + ".window_samples", "must be >= 1");
  adaptive_require(window_max.count() > 0, type + ".window_max", "must be > 0");
}

/// `x` rounded down into [min, max]; NaN gives `min`. Exact at the ends (no double overflow into int64).
[[nodiscard]] inline std::int64_t clamp_limit(double x, std::int64_t min, std::int64_t max) noexcept {
  if (!(x > static_cast<double>(min))) return min;
  if (x >= static_cast<double>(max)) return max;
  const auto floor = static_cast<std::int64_t>(x);  // x < max <= 2^63: fits
  return floor < min ? min : (floor > max ? max : floor);
}

/// `x` kept in [min, max] as a double (the fractional limit the algorithms move); NaN gives `min`.
[[nodiscard]] inline double clamp_estimate(double x, std::int64_t min, std::int64_t max) noexcept {
  if (!(x > static_cast<double>(min))) return static_cast<double>(min);
  if (x > static_cast<double>(max)) return static_cast<double>(max);
  return x;
}

/// The sample with out-of-range fields moved into range (rtt >= 0, in_flight >= 1).
[[nodiscard]] inline LatencySample sanitised(LatencySample s) noexcept {
  if (s.rtt_ns < 0) s.rtt_ns = 0;
  if (s.in_flight < 1) s.in_flight = 1;
  return s;
}

/// What a completed window saw.
struct WindowStats {
  double mean_rtt_ns;  // >= 1
  double mean_in_flight;
  std::int64_t max_in_flight;
  std::int64_t drops;
};

/// A sample window: it closes after `samples` samples or `max_ns` nanoseconds (with at least one sample),
/// whichever first (Netflix concurrency-limits `WindowedLimit`, with an average sample window). Sums are
/// doubles: exact below 2^53 ns in total (104 days), rounded to 53 bits beyond. Fixed size.
class SampleWindow {
 public:
  SampleWindow(std::int64_t samples, std::chrono::nanoseconds max) noexcept : samples_(samples), max_ns_(max.count()) {}

  /// Adds one sanitised sample; when that completes the window, returns its stats and starts the next.
  std::optional<WindowStats> add(const LatencySample& s) noexcept {
    if (count_ == 0) start_ns_ = s.now_ns;
    ++count_;
    rtt_sum_ += static_cast<double>(s.rtt_ns);
    in_flight_sum_ += static_cast<double>(s.in_flight);
    if (s.in_flight > max_in_flight_) max_in_flight_ = s.in_flight;
    if (s.outcome == PermitOutcome::dropped) ++drops_;
    // In unsigned: a clock stepped far back or forth must not overflow.
    const auto elapsed = static_cast<std::uint64_t>(s.now_ns) - static_cast<std::uint64_t>(start_ns_);
    if (count_ < samples_ && (s.now_ns < start_ns_ || elapsed < static_cast<std::uint64_t>(max_ns_))) return {};
    const double n = static_cast<double>(count_);
    const WindowStats stats{rtt_sum_ / n < 1 ? 1.0 : rtt_sum_ / n, in_flight_sum_ / n, max_in_flight_, drops_};
    reset();
    return stats;
  }
  /// Forgets the samples of the open window.
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

}  // namespace ratelimit::detail
