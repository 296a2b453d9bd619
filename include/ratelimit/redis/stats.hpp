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
  /// `NOSCRIPT` replies answered by sending the script with `EVAL` (after a restart, failover or
  /// `SCRIPT FLUSH`).
  std::uint64_t script_reloads = 0;
  /// Connections opened (first connects and reconnects) and broken connections dropped, by the pool.
  std::uint64_t connects = 0;
  std::uint64_t dropped_connections = 0;
};

}  // namespace ratelimit::redis
