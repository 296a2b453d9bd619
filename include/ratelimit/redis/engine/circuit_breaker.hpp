#pragma once

/// @file
/// `CircuitBreaker`: stops sending to a server that keeps failing (include/ratelimit/redis/README.md "Circuit
/// breaker"); one per server's `ConnectionPool`, so a bad cluster node does not stop calls to healthy ones.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "ratelimit/clock.hpp"
#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/options.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace engine {

/// Where a breaker stands (include/ratelimit/redis/README.md "Circuit breaker").
enum class BreakerState {
  /// Calls go to the server; consecutive failures are counted.
  closed,
  /// Calls are refused at once, without I/O, until the open period ends.
  open,
  /// The open period ended and one probe call is on its way; other calls are refused until it ends.
  half_open,
};

/// Counters of one breaker (summed over a cluster's nodes in `RouteCounters`).
struct BreakerCounters {
  /// Times the breaker opened after `failure_threshold` consecutive failures (failed probes not counted).
  std::uint64_t opens = 0;
  /// Probes let through after an open period (each ends closed or open again).
  std::uint64_t probes = 0;
  /// Calls refused because the breaker was open or half-open.
  std::uint64_t refused = 0;
};

/// One server's circuit breaker: opens after `failure_threshold` consecutive failed round trips (io, timeout,
/// protocol), probes after an open period (`open_min`, doubling per failed probe up to `open_max`, less a jitter);
/// include/ratelimit/redis/README.md "Circuit breaker". Thread-safe; while closed, `admit` and a success take no
/// lock. `C` is a `Clock` (`ManualClock` in tests).
template <Clock C = std::chrono::steady_clock>
class CircuitBreaker {
 public:
  /// A permission to send one round trip or async call (or a refusal), from `admit`. Report the outcome with
  /// `succeeded` or `failed`; a probe destroyed without either lets the next call probe at once. Move-only;
  /// one owner at a time.
  class Ticket {
   public:
    Ticket(Ticket&& other) noexcept : breaker_(std::exchange(other.breaker_, nullptr)), kind_(other.kind_) {}
    Ticket& operator=(Ticket&&) = delete;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() {
      if (breaker_ != nullptr && kind_ == Kind::probe) breaker_->abandon_probe();
    }
    /// A pass that reports to no breaker (for a caller that has none): `succeeded` and `failed` do nothing.
    [[nodiscard]] static Ticket unguarded() noexcept { return Ticket(nullptr, Kind::pass); }
    /// True when the call may be sent; false when the breaker refused it.
    explicit operator bool() const noexcept { return kind_ != Kind::refused; }
    /// True when this call is the half-open probe.
    [[nodiscard]] bool probe() const noexcept { return kind_ == Kind::probe; }
    /// The server gave a usable reply (error replies such as `OOM` count: the server is alive).
    void succeeded() noexcept {
      if (auto* b = std::exchange(breaker_, nullptr)) b->on_success(kind_ == Kind::probe);
    }
    /// The round trip failed without a usable reply (io, timeout, protocol).
    void failed() noexcept {
      if (auto* b = std::exchange(breaker_, nullptr)) b->on_failure(kind_ == Kind::probe);
    }

   private:
    friend class CircuitBreaker;
    enum class Kind { pass, probe, refused };
    Ticket(CircuitBreaker* breaker, Kind kind) noexcept : breaker_(breaker), kind_(kind) {}
    CircuitBreaker* breaker_;
    Kind kind_;
  };

  /// Validates `options`; starts closed. Throws `std::invalid_argument` naming the field
  /// (`ConnectionOptions.breaker.open_min`, ...).
  explicit CircuitBreaker(CircuitBreakerOptions options = {}, C clock = {})
      : options_(validated(options)),
        clock_(std::move(clock)),
        period_(options_.open_min),
        rng_(0x9E3779B97F4A7C15ULL ^ reinterpret_cast<std::uintptr_t>(this)) {}

  CircuitBreaker(const CircuitBreaker&) = delete;
  CircuitBreaker& operator=(const CircuitBreaker&) = delete;

  /// A pass while closed, the probe when an open period has ended, else a refusal (counted). Never blocks on I/O.
  [[nodiscard]] Ticket admit() {
    if (state_.load(std::memory_order_acquire) == BreakerState::closed) return Ticket(this, Ticket::Kind::pass);
    const std::lock_guard lock(mutex_);
    const BreakerState s = state_.load(std::memory_order_relaxed);
    if (s == BreakerState::closed) return Ticket(this, Ticket::Kind::pass);
    if (s == BreakerState::open && now() >= open_until_) {
      state_.store(BreakerState::half_open, std::memory_order_release);
      probes_.fetch_add(1, std::memory_order_relaxed);
      return Ticket(this, Ticket::Kind::probe);
    }
    refused_.fetch_add(1, std::memory_order_relaxed);
    return Ticket(this, Ticket::Kind::refused);
  }

  /// The current state (a snapshot).
  [[nodiscard]] BreakerState state() const noexcept { return state_.load(std::memory_order_acquire); }
  /// The open period the breaker is in (or would start with next), before jitter.
  [[nodiscard]] std::chrono::milliseconds open_period() const {
    const std::lock_guard lock(mutex_);
    return period_;
  }
  /// Opens, probes and refusals so far (each read atomically).
  [[nodiscard]] BreakerCounters counters() const noexcept {
    return {opens_.load(std::memory_order_relaxed), probes_.load(std::memory_order_relaxed),
            refused_.load(std::memory_order_relaxed)};
  }
  [[nodiscard]] const CircuitBreakerOptions& options() const noexcept { return options_; }

 private:
  static CircuitBreakerOptions validated(CircuitBreakerOptions o) {
    auto bad = [](const char* field, const char* what) {
      throw std::invalid_argument(std::string("ConnectionOptions.breaker.") + field + ": " + what);
    };
    constexpr std::chrono::milliseconds kDay = std::chrono::hours(24);
    if (o.failure_threshold < 0 || o.failure_threshold > 1000) bad("failure_threshold", "must be in 0..1000");
    if (o.open_min.count() <= 0 || o.open_min > kDay) bad("open_min", "must be in (0, 24 h]");
    if (o.open_max < o.open_min || o.open_max > kDay) bad("open_max", "must be in [open_min, 24 h]");
    if (o.jitter_percent < 0 || o.jitter_percent > 100) bad("jitter_percent", "must be in 0..100");
    return o;
  }

  [[nodiscard]] std::int64_t now() { return ratelimit::detail::now_ns(clock_); }

  void on_success(bool probe) noexcept {
    if (!probe && failures_.load(std::memory_order_relaxed) == 0) return;  // the common case: no lock
    const std::lock_guard lock(mutex_);
    failures_.store(0, std::memory_order_relaxed);
    if (probe) {
      period_ = options_.open_min;
      state_.store(BreakerState::closed, std::memory_order_release);
    }
  }

  void on_failure(bool probe) noexcept {
    if (options_.failure_threshold == 0) return;
    const std::lock_guard lock(mutex_);
    if (probe) {
      period_ = std::min(period_ * 2, options_.open_max);
      open_locked();
      return;
    }
    // A call let through before the breaker opened, failing after: the open period already runs.
    if (state_.load(std::memory_order_relaxed) != BreakerState::closed) return;
    const int n = failures_.load(std::memory_order_relaxed) + 1;
    failures_.store(n, std::memory_order_relaxed);
    if (n >= options_.failure_threshold) {
      opens_.fetch_add(1, std::memory_order_relaxed);
      period_ = options_.open_min;
      open_locked();
    }
  }

  void abandon_probe() noexcept {
    const std::lock_guard lock(mutex_);
    if (state_.load(std::memory_order_relaxed) != BreakerState::half_open) return;
    open_until_ = now();  // the next call probes
    state_.store(BreakerState::open, std::memory_order_release);
  }

  /// Opens for `period_` less a random jitter; caller holds the mutex.
  void open_locked() noexcept {
    std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(period_).count();
    if (options_.jitter_percent > 0) {
      // splitmix64: enough to spread a fleet's probes, no global state.
      rng_ += 0x9E3779B97F4A7C15ULL;
      std::uint64_t z = rng_;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
      z ^= z >> 31;
      const auto span = static_cast<std::uint64_t>(ns / 100 * options_.jitter_percent);
      if (span > 0) ns -= static_cast<std::int64_t>(z % (span + 1));
    }
    open_until_ = now() + ns;
    failures_.store(0, std::memory_order_relaxed);
    state_.store(BreakerState::open, std::memory_order_release);
  }

  CircuitBreakerOptions options_;
  C clock_;
  mutable std::mutex mutex_;  // transitions and the fields below
  std::atomic<BreakerState> state_{BreakerState::closed};
  std::atomic<int> failures_{0};  // consecutive, while closed
  std::chrono::milliseconds period_;
  std::int64_t open_until_ = 0;  // clock ns
  std::uint64_t rng_;
  std::atomic<std::uint64_t> opens_{0};
  std::atomic<std::uint64_t> probes_{0};
  std::atomic<std::uint64_t> refused_{0};
};

}  // namespace engine
using engine::BreakerCounters;
using engine::BreakerState;
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
