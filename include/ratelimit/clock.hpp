#pragma once

/// @file
/// The clock a limiter reads, and `ManualClock` for tests and simulations.

#include "ratelimit/detail/requirements.hpp"  // first: says so when the language version is too old

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <memory>

namespace ratelimit {

/// A source of time: `clock.now()` returns a `std::chrono::time_point` whose duration converts to
/// nanoseconds. `std::chrono::steady_clock`, `system_clock` and `ManualClock` all qualify.
/// Windows are aligned to the clock's epoch (include/ratelimit/README.md "Policy formulas").
template <class C>
concept Clock = std::copy_constructible<C> && requires(C& clock) {
  typename C::time_point;
  { clock.now() } -> std::same_as<typename C::time_point>;
  std::chrono::duration_cast<std::chrono::nanoseconds>(clock.now().time_since_epoch());
};

/// A clock that moves only when told to; for tests, simulations and replays of recorded traffic.
///
/// Starts at its epoch (time 0). Copies share one time, so a test can keep a copy and move the time
/// of the limiter that holds another. Thread-safe: `now`, `set` and `advance` may race freely.
class ManualClock {
 public:
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<ManualClock, duration>;
  static constexpr bool is_steady = false;

  ManualClock() : now_ns_(std::make_shared<std::atomic<std::int64_t>>(0)) {}

  /// The current time. Thread-safe.
  [[nodiscard]] time_point now() const noexcept {
    return time_point(duration(now_ns_->load(std::memory_order_acquire)));
  }
  /// Moves the time to `time` (forwards or backwards, for clock-step tests). Thread-safe.
  void set(time_point time) noexcept { now_ns_->store(time.time_since_epoch().count(), std::memory_order_release); }
  /// Moves the time by `delta` (may be negative). Thread-safe. The sum wraps around (two's complement,
  /// as atomic arithmetic does) if it leaves `std::int64_t`: keep the time within +/-292 years of the epoch.
  void advance(duration delta) noexcept { now_ns_->fetch_add(delta.count(), std::memory_order_acq_rel); }

 private:
  std::shared_ptr<std::atomic<std::int64_t>> now_ns_;
};

static_assert(Clock<ManualClock>);
static_assert(Clock<std::chrono::steady_clock>);
static_assert(Clock<std::chrono::system_clock>);

namespace detail {
/// Nanoseconds since the clock's epoch.
template <Clock C>
[[nodiscard]] std::int64_t now_ns(C& clock) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock.now().time_since_epoch()).count();
}
}  // namespace detail

}  // namespace ratelimit
