#pragma once

/// @file
/// Options of the in-memory backend.

#include <cstddef>

namespace ratelimit {

/// Options of `MemoryLimiter`; a plain aggregate, every field has a working default.
struct MemoryOptions {
  /// Hard cap on the number of keys held at once; >= 1. At the cap a new key evicts the least recently
  /// used of five sampled keys (approximate LRU). Evicting a key that is not full forgets its usage, so
  /// size this above the number of keys active within one reset period (window, or burst * T).
  std::size_t max_keys = 1'000'000;
  /// Longest key accepted, in bytes; a longer key throws `std::invalid_argument`. <= 2^31.
  std::size_t max_key_bytes = 512;
  /// Independently locked shards, rounded up to a power of two; 0 picks 64, fewer when `max_keys` is
  /// small (each shard holds at most its share of `max_keys`) or a sliding window log's longest log
  /// would not fit a shard's share of `max_bytes`. <= 65536.
  std::size_t shards = 0;
  /// Budget, in bytes, for what per-key state allocates beyond its slot: the entries of sliding window
  /// logs (counted in `table_bytes()`); policies with fixed-size state allocate nothing, so for them this
  /// is unused and `max_keys` alone bounds memory. Default 256 MiB; >= 1, and for `SlidingWindowLog` at
  /// least one key's longest log, `2 * (limit + 1) * 16` bytes, else the constructor throws. Split evenly
  /// over the shards (fewer shards when a share would hold less than one such log). Over its share, a
  /// shard evicts the least recently used of five sampled keys that hold entries (never the key just
  /// checked), as at `max_keys`. `SIZE_MAX` turns the budget off.
  std::size_t max_bytes = std::size_t{256} << 20;
};

}  // namespace ratelimit
