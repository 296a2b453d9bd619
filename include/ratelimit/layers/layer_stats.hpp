#pragma once

/// @file
/// Per-layer counters, cheap enough to leave on: relaxed atomic increments, one cache line.

#include <atomic>
#include <cstdint>

namespace ratelimit {

/// A snapshot of a layer's counters (each counts requests, not cost units).
struct LayerCounters {
  /// Requests this layer admitted and that passed every layer (their consumption was kept).
  std::uint64_t allowed = 0;
  /// Requests this layer denied: over quota, in a penalty, or on the deny list.
  std::uint64_t denied = 0;
  /// Requests this layer, in shadow mode, would have denied (they were not denied by it).
  std::uint64_t shadow_denied = 0;
  /// Requests this layer admitted but another layer denied; their consumption was given back.
  std::uint64_t rolled_back = 0;
  /// Explicit refunds (`refund_layers`) applied to this layer.
  std::uint64_t refunded = 0;
  /// Backend calls that failed (threw); always 0 for the in-memory backend.
  std::uint64_t backend_errors = 0;

  friend bool operator==(const LayerCounters&, const LayerCounters&) = default;
};

/// The live counters of one layer. Thread-safe: relaxed atomics, so a snapshot taken while requests
/// run is a consistent-enough view (each counter exact, not a cross-counter atomic snapshot).
class LayerStats {
 public:
  /// Counts one request this layer admitted and kept. Called by `check_layers`. Thread-safe.
  void add_allowed() noexcept { allowed_.fetch_add(1, std::memory_order_relaxed); }
  /// Counts one request this layer denied (quota, penalty or deny list). Thread-safe.
  void add_denied() noexcept { denied_.fetch_add(1, std::memory_order_relaxed); }
  /// Counts one would-be denial of a layer in shadow mode. Thread-safe.
  void add_shadow_denied() noexcept { shadow_denied_.fetch_add(1, std::memory_order_relaxed); }
  /// Counts one admission given back because another layer denied the request. Thread-safe.
  void add_rolled_back() noexcept { rolled_back_.fetch_add(1, std::memory_order_relaxed); }
  /// Counts one `refund_layers` give-back. Thread-safe.
  void add_refunded() noexcept { refunded_.fetch_add(1, std::memory_order_relaxed); }
  /// Counts one backend failure met by this layer. Thread-safe.
  void add_backend_error() noexcept { backend_errors_.fetch_add(1, std::memory_order_relaxed); }

  /// The counters now. Thread-safe.
  [[nodiscard]] LayerCounters snapshot() const noexcept {
    return LayerCounters{
        allowed_.load(std::memory_order_relaxed),       denied_.load(std::memory_order_relaxed),
        shadow_denied_.load(std::memory_order_relaxed), rolled_back_.load(std::memory_order_relaxed),
        refunded_.load(std::memory_order_relaxed),      backend_errors_.load(std::memory_order_relaxed)};
  }

 private:
  alignas(64) std::atomic<std::uint64_t> allowed_{0};
  std::atomic<std::uint64_t> denied_{0};
  std::atomic<std::uint64_t> shadow_denied_{0};
  std::atomic<std::uint64_t> rolled_back_{0};
  std::atomic<std::uint64_t> refunded_{0};
  std::atomic<std::uint64_t> backend_errors_{0};
};

}  // namespace ratelimit
