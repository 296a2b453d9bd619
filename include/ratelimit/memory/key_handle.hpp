#pragma once

/// @file
/// `KeyHandle`: where a key of a `MemoryLimiter` lives, for checks that hold several keys' locks at once.

#include <cstdint>

#include "ratelimit/detail/spin_lock.hpp"

namespace ratelimit {

/// A key located in a `MemoryLimiter`'s store, with the time of the check, from `MemoryLimiter::locate`.
///
/// Used by all-or-nothing checks over several limiters (`check_layers`): the caller collects the
/// handles, takes every distinct `*lock` once in ascending address order (a global order over all
/// stores, so concurrent checks cannot deadlock), calls the limiters' `*_locked` functions, and unlocks.
/// A handle holds no lock itself and stays valid while its limiter lives; the key string must outlive it.
struct KeyHandle {
  /// The store's hash of the key (picks the shard and the slot).
  std::uint64_t hash = 0;
  /// The time of the check, in nanoseconds of the limiter's clock since its epoch.
  std::int64_t now_ns = 0;
  /// The lock of the key's shard.
  detail::SpinLock* lock = nullptr;
};

}  // namespace ratelimit
