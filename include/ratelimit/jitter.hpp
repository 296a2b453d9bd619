#pragma once

/// @file
/// `Jitter`: a bounded random extra wait, so that waiters of many processes do not wake at one instant.

#include <atomic>
#include <chrono>
#include <cstdint>

#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/detail/entropy.hpp"

namespace ratelimit {

/// Draws extra waits uniformly from `[0, max]` (include/ratelimit/README.md "Shaping"): `acquire` and
/// `FairAcquirer` add one to each wait they make, within what is left of the caller's `max_wait`.
///
/// A wait ending at the instant a limiter frees a slot is taken by every process whose waiters computed
/// the same instant (a window's start, one retry_after); a random extra wait spreads them. It never
/// admits more: it only waits longer. Within one process, `FairAcquirer` already wakes one waiter at a
/// time; jitter there trades some of the rate for fewer collisions with other processes.
///
/// Thread-safe and lock-free: one atomic splitmix64 sequence; a seed makes the sequence repeatable (tests).
/// Example:
///   ratelimit::MemoryLimiter<ratelimit::FixedWindow> outgoing({.limit = 100, .window = std::chrono::minutes(1)});
///   ratelimit::Jitter jitter(std::chrono::milliseconds(20));  // seeded from the operating system
///   const ratelimit::Decision d = ratelimit::acquire(outgoing, "partner-api", 1, std::chrono::seconds(2), jitter);
///   if (d) { /* call the partner API */ }
class Jitter {
 public:
  /// No jitter: `draw()` is always 0.
  Jitter() noexcept = default;

  /// Extra waits in `[0, max]`, seeded from the operating system's entropy. Throws
  /// `std::invalid_argument` naming `jitter` when `max` is negative, `std::runtime_error` when the
  /// system has no entropy.
  explicit Jitter(std::chrono::nanoseconds max) : Jitter(max, entropy_seed()) {}

  /// Extra waits in `[0, max]`, the sequence fixed by `seed` (tests, reproducible simulations). Throws
  /// `std::invalid_argument` naming `jitter` when `max` is negative.
  Jitter(std::chrono::nanoseconds max, std::uint64_t seed) : max_ns_(max.count()), state_(seed) {
    if (max_ns_ < 0) detail::invalid("jitter", "must be >= 0");
  }

  Jitter(const Jitter&) = delete;
  Jitter& operator=(const Jitter&) = delete;

  /// The largest extra wait.
  [[nodiscard]] std::chrono::nanoseconds max() const noexcept { return std::chrono::nanoseconds(max_ns_); }

  /// One extra wait, uniform in `[0, max]` (up to a bias below 2^-32 for spans under 2^32 ns). Thread-safe.
  [[nodiscard]] std::chrono::nanoseconds draw() noexcept {
    if (max_ns_ == 0) return std::chrono::nanoseconds::zero();
    std::uint64_t z = state_.fetch_add(0x9E3779B97F4A7C15ULL, std::memory_order_relaxed) + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;  // splitmix64's finalizer
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    const auto span = static_cast<std::uint64_t>(max_ns_) + 1;  // max_ns_ < 2^63: no wrap
    return std::chrono::nanoseconds(static_cast<std::int64_t>(z % span));
  }

 private:
  static std::uint64_t entropy_seed() {
    std::uint64_t seed = 0;
    detail::fill_with_entropy(&seed, 1);
    return seed;
  }

  std::int64_t max_ns_ = 0;
  std::atomic<std::uint64_t> state_{0};
};

}  // namespace ratelimit
