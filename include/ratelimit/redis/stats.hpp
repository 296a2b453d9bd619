#pragma once

/// @file
/// `RedisStats`: what a `RedisLimiter` has done and how often Redis failed it.

#include <cstdint>

namespace ratelimit::redis {

/// A snapshot of a limiter's counters (each read atomically; the set is not one instant).
struct RedisStats {
  /// Checks attempted: `allow`, `peek`, `reset`, and every request of `allow_many`.
  std::uint64_t calls = 0;
  /// Checks that Redis did not answer and `on_error` decided (or that threw under `raise`).
  std::uint64_t failures = 0;
  /// Failures by cause (`BackendErrorCause`); they sum to `failures`.
  std::uint64_t io_errors = 0;
  std::uint64_t timeouts = 0;
  std::uint64_t protocol_errors = 0;
  std::uint64_t reply_errors = 0;
  /// `NOSCRIPT` replies answered by sending the script with `EVAL`, one per reply (a batch after a
  /// `SCRIPT FLUSH` counts each request that met it): the first use on each server, and again after a
  /// restart, failover or `SCRIPT FLUSH`.
  std::uint64_t script_reloads = 0;
  /// Connections opened (first connects and reconnects) and broken connections dropped, by the pool.
  std::uint64_t connects = 0;
  std::uint64_t dropped_connections = 0;
  /// Redis Cluster only (zero otherwise), counted by the shared `ClusterRouter`: `MOVED` and `ASK`
  /// redirections followed, and slot-map loads (`CLUSTER SLOTS`) done.
  std::uint64_t moved_redirections = 0;
  std::uint64_t ask_redirections = 0;
  std::uint64_t slot_map_refreshes = 0;
  /// Calls refused at once because their connection had `max_in_flight` commands outstanding (counted
  /// by the shared pool or router; also in `failures` of the limiter that made them).
  std::uint64_t refused_calls = 0;
};

}  // namespace ratelimit::redis
