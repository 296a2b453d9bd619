#pragma once

/// @file
/// `RedisStats`: a `RedisLimiter`'s counters, with its route's (`RouteCounters`) and its fallback's.

#include <array>
#include <cstddef>
#include <cstdint>

#include "ratelimit/redis/abi.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {

/// A route's connection and routing counters, shared by the limiters on it (summed over a cluster's nodes).
struct RouteCounters {
  /// Connections opened (reconnects too) and broken connections dropped.
  std::uint64_t connects = 0;
  std::uint64_t dropped_connections = 0;
  /// Redis Cluster only: `MOVED` and `ASK` redirections followed, and slot-map loads (`CLUSTER SLOTS`).
  std::uint64_t moved_redirections = 0;
  std::uint64_t ask_redirections = 0;
  std::uint64_t slot_map_refreshes = 0;
  /// Times a server's circuit breaker opened, and the probes it let through.
  std::uint64_t breaker_opens = 0;
  std::uint64_t breaker_probes = 0;
  /// Calls refused at once at `max_in_flight` (also in the limiter's `failures`).
  std::uint64_t refused_calls = 0;
  /// Redis Sentinel only: master look-ups, and master changes followed.
  std::uint64_t master_discoveries = 0;
  std::uint64_t master_changes = 0;
};

/// Counters of a limiter's in-memory fallback (include/ratelimit/redis/README.md "Fallback during outages"); all zero
/// without it.
struct FallbackCounters {
  /// True while Redis is considered down: checks go to the fallback, but for one probe per probe period.
  bool fallback_active = false;
  /// Checks, peeks and refunds the fallback answered, whether Redis was asked first or not.
  std::uint64_t fallback_checks = 0;
  /// Times the fallback became active.
  std::uint64_t fallback_activations = 0;
};

/// Latency of a limiter's backend calls (a call, batch or async call, sending to reply or failure; joint layered
/// scripts are not timed: include/ratelimit/http/README.md "Metrics").
struct BackendLatency {
  /// Upper bounds of the buckets, in microseconds; a last, unbounded bucket follows (+Inf).
  static constexpr std::array<std::uint64_t, 12> kBoundsUs{100,    250,    500,    1'000,   2'500,   5'000,
                                                           10'000, 25'000, 50'000, 100'000, 250'000, 1'000'000};
  /// Calls per bucket (not cumulative): `buckets[i]` in (`kBoundsUs[i - 1]`, `kBoundsUs[i]`], the last over 1 s.
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

/// A snapshot of a limiter's counters. Each read atomically; the set is not one instant.
struct RedisStats : RouteCounters, FallbackCounters {
  /// Checks attempted: each `allow`, `peek`, `reset`, request of `allow_many`, and async call started.
  std::uint64_t calls = 0;
  /// Checks that Redis did not answer and `on_error` decided (or threw under `raise`); not those the fallback
  /// answered without asking Redis.
  std::uint64_t failures = 0;
  /// Failures by cause (`BackendErrorCause`); they sum to `failures`.
  std::uint64_t io_errors = 0;
  std::uint64_t timeouts = 0;
  std::uint64_t protocol_errors = 0;
  std::uint64_t reply_errors = 0;
  /// Checks the failure policy answered without I/O while the circuit breaker was open (cause `circuit_open`).
  std::uint64_t short_circuited = 0;
  /// `NOSCRIPT` replies answered with `EVAL`, one per request that met one (first use, restart, failover,
  /// `SCRIPT FLUSH`); with `use_functions`, each call that had the library loaded (`FUNCTION LOAD`).
  std::uint64_t script_reloads = 0;
  /// Latency of the backend calls (include/ratelimit/http/README.md "Metrics").
  BackendLatency latency{};
  /// Checks denied by the denial cache (`LimiterOptions::deny_cache`) without Redis (also in `calls`).
  std::uint64_t cached_denials = 0;
};

}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
