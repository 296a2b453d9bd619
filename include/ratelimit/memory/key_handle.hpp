#pragma once

/// @file
/// Deprecated: the lock protocol of joint checks is internal to `memory/` now (`MemoryLimiter` is a
/// `JointBackend`); `KeyHandle` is `detail::KeyHandle`. Removed in the next release.

#include "ratelimit/memory/detail/key_handle.hpp"

namespace ratelimit {

/// Deprecated alias of the internal `detail::KeyHandle`.
using KeyHandle [[deprecated("internal now: use check_layers or JointBackend::check_jointly")]] = detail::KeyHandle;

}  // namespace ratelimit
