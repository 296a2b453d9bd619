#pragma once

/// @file
/// `RedisStats`: what a `RedisLimiter` has done and how often Redis failed it; `RouteCounters`: the part
/// counted by its route (pools, cluster router), shared by every limiter on that route.

#include <array>
#include <cstddef>
#include <cstdint>

#include "ratelimit/redis/abi.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {

/// A route's connection and routing counters (summed over a cluster's nodes; cluster ones are zero on a
/// single server). Each read atomically; the set is not one instant.
struct RouteCounters {
  /// Connections opened (first connects and reconnects) and broken connections dropped, by the pool.
  std::uint64_t connects = 0;
  std::uint64_t dropped_connections = 0;
  /// Redis Cluster only: `MOVED` and `ASK` redirections followed, and slot-map loads (`CLUSTER SLOTS`).
  std::uint64_t moved_redirections = 0;
  std::uint64_t ask_redirections = 0;
  std::uint64_t slot_map_refreshes = 0;
  /// Circuit breaker (include/ratelimit/redis/README.md "Circuit breaker"): times a server's breaker opened, and probes
  /// it let through.
  std::uint64_t breaker_opens = 0;
  std::uint64_t breaker_probes = 0;
  /// Calls refused at once because their connection had `max_in_flight` commands outstanding (also in
  /// `failures` of the limiter that made them).
  std::uint64_t refused_calls = 0;
  /// Redis Sentinel only: times the sentinels were asked for the master, and master changes followed.
  std::uint64_t master_discoveries = 0;
  std::uint64_t master_changes = 0;
};

/// Counters of a limiter's in-memory fallback (`FailurePolicy::fallback`, include/ratelimit/redis/README.md "Fallback
/// during outages"), each read atomically; all zero (and false) without it.
struct FallbackCounters {
  /// True while Redis is considered down: checks go to the fallback, but for one probe per probe period.
  bool fallback_active = false;
  /// Checks (and peeks, refunds) answered by the fallback, whether Redis was asked first or not.
  std::uint64_t fallback_checks = 0;
  /// Times the fallback became active (a Redis call failed while Redis was considered up).
  std::uint64_t fallback_activations = 0;
};

/// Latency of a limiter's backend calls (each script call, batch or joint check: from sending to its
/// reply or failure), as a histogram with fixed bucket bounds. Each read atomically; not one instant.
struct BackendLatency {
  /// Upper bounds of the buckets, in microseconds; a last, unbounded bucket follows (+Inf).
  static constexpr std::array<std::uint64_t, 12> kBoundsUs{100,    250,    500,    1'000,   2'500,   5'000,
                                                           10'000, 25'000, 50'000, 100'000, 250'000, 1'000'000};
  /// Calls per bucket (not cumulative): `buckets[i]` took at most `kBoundsUs[i]` and more than the bound
  /// before; the last one more than 1 s.
  std::array<std::uint64_t, kBoundsUs.size() + 1> buckets{};
  /// Sum of all calls' latencies, microseconds.
  std::uint64_t sum_us = 0;
  /// The bucket of a call of `us` microseconds.
  [[nodiscard]] static constexpr std::size_t bucket_of(std::uint64_t us) noexcept {
    std::size_t i = 0;
    while (i < kBoundsUs.size() && us > kBoundsUs[i]) ++i;
    return i;
  }
};

/// A snapshot of a limiter's counters, and of its route's (`RouteCounters`, shared with the limiters on
/// the same pool or router). Each read atomically; the set is not one instant.
struct RedisStats : RouteCounters, FallbackCounters {
  /// Checks attempted: `allow`, `peek`, `reset`, every request of `allow_many`, and every async call
  /// started (`check_async`, ...).
  std::uint64_t calls = 0;
  /// Checks that Redis did not answer and `on_error` decided (or that threw under `raise`). Checks the
  /// fallback answered without asking Redis (its probe gate closed) are not failures: see `fallback_checks`.
  std::uint64_t failures = 0;
  /// Failures by cause (`BackendErrorCause`); they sum to `failures`.
  std::uint64_t io_errors = 0;
  std::uint64_t timeouts = 0;
  std::uint64_t protocol_errors = 0;
  std::uint64_t reply_errors = 0;
  /// Checks answered by the failure policy at once, without I/O, because the server's circuit breaker was
  /// open (cause `circuit_open`).
  std::uint64_t short_circuited = 0;
  /// `NOSCRIPT` replies answered by sending the script with `EVAL`, one per reply (a batch after a
  /// `SCRIPT FLUSH` counts each request that met it): the first use on each server, and again after a
  /// restart, failover or `SCRIPT FLUSH`. With `use_functions`, also each call that found the Functions
  /// library missing and had it loaded (`FUNCTION LOAD`; the first use, `FUNCTION FLUSH`).
  std::uint64_t script_reloads = 0;
  /// Latency of the backend calls (include/ratelimit/http/README.md "Metrics").
  BackendLatency latency{};
  /// Checks denied by the denial cache (`LimiterOptions::deny_cache`) without Redis (also in `calls`).
  std::uint64_t cached_denials = 0;
};

}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
