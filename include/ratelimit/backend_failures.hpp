#pragma once

/// @file
/// A per-thread count of backend failures that a limiter answered with its failure policy, so that a
/// caller (a layered check) can tell a failure decision from a quota decision without a field in
/// `Decision`.

#include <cstdint>

namespace ratelimit::detail {

/// Backend failures met on the calling thread so far (each counted once, whatever the failure policy
/// made of it). A backend bumps it on the thread that made the call; a caller compares it before and
/// after a call. Thread-safe by being per thread.
[[nodiscard]] inline std::uint64_t& thread_backend_failures() noexcept {
  thread_local std::uint64_t failures = 0;
  return failures;
}

}  // namespace ratelimit::detail
