#pragma once

/// @file
/// `detail::KeyHandle`: where a key of a `MemoryLimiter` lives, for the joint check that holds several
/// keys' locks at once (`memory/joint_check.hpp`). Internal.

#include <cstdint>

#include "ratelimit/detail/spin_lock.hpp"

namespace ratelimit::detail {

/// A key located in a `MemoryLimiter`'s store, with the time of the check. Holds no lock itself and
/// stays valid while its limiter lives; the key string must outlive it.
struct KeyHandle {
  /// The store's hash of the key (picks the shard and the slot).
  std::uint64_t hash = 0;
  /// The time of the check, in nanoseconds of the limiter's clock since its epoch.
  std::int64_t now_ns = 0;
  /// The lock of the key's shard.
  SpinLock* lock = nullptr;
};

}  // namespace ratelimit::detail
