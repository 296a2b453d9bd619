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
  /// small (each shard holds at most its share of `max_keys`). <= 65536.
  std::size_t shards = 0;
};

}  // namespace ratelimit
