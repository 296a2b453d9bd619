#pragma once

// The function of the test's shared library (redis_shared_library.cpp).

namespace separate_shared {

/// A RedisLimiter<Gcra> made inside the shared library, with nothing listening and `fail_closed`: true when its
/// check says the failure policy answered and denied.
bool fail_closed_denies();

}  // namespace separate_shared
