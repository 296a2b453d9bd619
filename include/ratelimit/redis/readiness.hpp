#pragma once

/// @file
/// The retry loop of the limiters' `wait_ready` (include/ratelimit/redis/README.md "Readiness at start-up"): one
/// attempt after another until one succeeds or the timeout passes, then a `BackendError` that names the server and says
/// why.

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "ratelimit/error.hpp"
#include "ratelimit/redis/abi.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace detail {

/// Runs `attempt()` (returning `std::optional<BackendError>`: empty on success) until it succeeds or
/// `timeout` has passed since the call, pausing briefly between attempts (a reconnect backoff or an open
/// circuit breaker fails at once). Throws `std::invalid_argument` for `timeout` outside (0, 24 h], and
/// `BackendError` with the last failure's cause (an open breaker's only when nothing else failed), naming
/// `server`, when no attempt succeeded. May overrun `timeout` by one attempt.
template <class F>
void wait_until_ready(std::string_view server, std::chrono::milliseconds timeout, F&& attempt) {
  if (timeout.count() <= 0 || timeout > std::chrono::hours(24)) {
    throw std::invalid_argument("wait_ready: timeout must be in (0, 24 h], got " + std::to_string(timeout.count()) +
                                " ms");
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::optional<BackendError> last;
  for (;;) {
    std::optional<BackendError> failed = attempt();
    if (!failed) return;
    if (!last || failed->cause() != BackendErrorCause::circuit_open) last = std::move(failed);
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(20), deadline - now));
  }
  throw BackendError(last->cause(), "not ready within " + std::to_string(timeout.count()) + " ms at " +
                                        std::string(server) + "; the last failure: " + last->what());
}

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
