#pragma once

/// @file
/// Which of several decisions (one per layer or policy of one request) binds the client most.

#include <cstddef>
#include <span>

#include "ratelimit/decision.hpp"

namespace ratelimit {

/// The index of the most restrictive decision in `decisions` (0 when it is empty).
///
/// - If any decision denies: among the denials, the one with the longest `retry_after`
///   (`Decision::never` beats every wait): the request can pass only after every denying layer admits
///   it, and quota only grows while no request comes, so that wait is exact for the whole request.
/// - Otherwise: the smallest `remaining`; on a tie the longest `reset_after`.
/// Ties otherwise go to the earliest entry. Pure; thread-safe.
[[nodiscard]] inline std::size_t most_restrictive(std::span<const Decision> decisions) noexcept {
  std::size_t best = 0;
  for (std::size_t i = 1; i < decisions.size(); ++i) {
    const Decision& d = decisions[i];
    const Decision& b = decisions[best];
    bool better = false;
    if (d.allowed != b.allowed) {
      better = !d.allowed;
    } else if (!d.allowed) {
      better = d.retry_after > b.retry_after;
    } else {
      better = d.remaining < b.remaining || (d.remaining == b.remaining && d.reset_after > b.reset_after);
    }
    if (better) best = i;
  }
  return best;
}

}  // namespace ratelimit
