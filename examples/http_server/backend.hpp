// examples/http_server: the simulated backend of /backend (a service of fixed capacity that slows down when
// overloaded) and the latency record of its answers, read by bench/adaptive_wrk.sh through /__backend/stats.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>

namespace example {

/// A backend of fixed capacity: up to `capacity` requests at once each take `service`; above it every
/// request slows in proportion (service x in_service / capacity: contention, so admitting more than the
/// capacity only adds latency). The slowdown a request gets is fixed by the count when it starts (one
/// sleep, not processor sharing). Thread-safe.
class SimulatedBackend {
 public:
  /// `capacity` >= 1 requests at full speed, each taking `service` (> 0).
  SimulatedBackend(std::int64_t capacity, std::chrono::microseconds service) : capacity_(capacity), service_(service) {}

  /// Serves one request: sleeps its service time under the contention now. Thread-safe.
  void serve() {
    const std::int64_t n = in_service_.fetch_add(1, std::memory_order_relaxed) + 1;
    std::this_thread::sleep_for(service_ * std::max(n, capacity_) / capacity_);
    in_service_.fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  const std::int64_t capacity_;
  const std::chrono::microseconds service_;
  std::atomic<std::int64_t> in_service_{0};
};

/// Latencies of served requests in 100 us buckets up to 10 s (longer ones in the last bucket): enough for a
/// p99 and a count within an SLO. Thread-safe (relaxed counters; `reset` while recording may lose a few).
class LatencyRecord {
 public:
  static constexpr std::int64_t kBucketUs = 100;
  static constexpr std::size_t kBuckets = 100'000;

  /// Counts one answer of `latency` (>= 0).
  void add(std::chrono::microseconds latency) noexcept {
    const auto b = static_cast<std::size_t>(std::max<std::int64_t>(0, latency.count()) / kBucketUs);
    (*buckets_)[std::min(b, kBuckets - 1)].fetch_add(1, std::memory_order_relaxed);
  }
  /// Forgets every count (after a warm-up).
  void reset() noexcept {
    for (auto& b : *buckets_) b.store(0, std::memory_order_relaxed);
  }
  /// Answers counted.
  [[nodiscard]] std::uint64_t count() const noexcept { return below(kBuckets); }
  /// Answers within `slo` (bucket upper bounds at or below it).
  [[nodiscard]] std::uint64_t within(std::chrono::microseconds slo) const noexcept {
    return below(static_cast<std::size_t>(std::clamp<std::int64_t>(slo.count() / kBucketUs, 0, kBuckets)));
  }
  /// The `q` quantile (0 < q <= 1) in ms, as the upper bound of its bucket; 0 when empty.
  [[nodiscard]] double quantile_ms(double q) const noexcept {
    const std::uint64_t n = count();
    if (n == 0) return 0;
    const auto rank = static_cast<std::uint64_t>(q * static_cast<double>(n) + 0.999999);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < kBuckets; ++i) {
      seen += (*buckets_)[i].load(std::memory_order_relaxed);
      if (seen >= rank) return static_cast<double>((static_cast<std::int64_t>(i) + 1) * kBucketUs) / 1000.0;
    }
    return static_cast<double>(kBuckets) * kBucketUs / 1000.0;
  }

 private:
  [[nodiscard]] std::uint64_t below(std::size_t buckets) const noexcept {
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < buckets; ++i) n += (*buckets_)[i].load(std::memory_order_relaxed);
    return n;
  }
  std::unique_ptr<std::array<std::atomic<std::uint64_t>, kBuckets>> buckets_ =
      std::make_unique<std::array<std::atomic<std::uint64_t>, kBuckets>>();
};

}  // namespace example
