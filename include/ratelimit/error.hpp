#pragma once

/// @file
/// Backend failures, for every backend: `BackendError` (what a failing backend throws), its causes, and
/// `FailurePolicy` (what a check answers instead when a backend cannot).

#include <stdexcept>
#include <string>
#include <string_view>

namespace ratelimit {

/// What a check returns when its backend cannot answer (refused, timed out, error reply, malformed reply).
/// A decision made this way says so: `CheckResult::outcome` is `Outcome::failure_policy`.
enum class FailurePolicy {
  /// Admit: the decision a fresh key would get (a cost above the limit is still denied, `never`).
  fail_open,
  /// Deny: `allowed = false`, `remaining = 0`, `retry_after = reset_after =` the backend's failure wait.
  fail_closed,
  /// Throw `ratelimit::BackendError` with the cause.
  raise,
  /// Answer from an in-memory limiter holding this process's share of the quota (the policy divided by the
  /// number of processes sharing it), until the backend answers again: the Redis rate limiters
  /// (include/ratelimit/redis/README.md
  /// "Fallback during outages"). Backends without a fallback answer as for `fail_open`.
  fallback,
};

/// Why a backend call failed. Mirrors hiredis's error codes, plus Redis error replies.
enum class BackendErrorCause {
  /// Connection refused, reset or closed, or no connection while reconnecting is backing off.
  io,
  /// A connect, a command or the wait for a pooled connection took longer than its timeout.
  timeout,
  /// The server's bytes or reply shape were not what the protocol or the script promise.
  protocol,
  /// The server answered with an error reply (e.g. Redis `OOM`, `WRONGTYPE`, `NOAUTH`, a script error).
  reply,
  /// Not sent: the backend's circuit breaker is open after consecutive failures (include/ratelimit/redis/README.md
  /// "Circuit breaker").
  circuit_open,
};

/// The cause's name: "io", "timeout", "protocol", "reply" or "circuit_open".
[[nodiscard]] constexpr std::string_view to_string(BackendErrorCause cause) noexcept {
  switch (cause) {
    case BackendErrorCause::io: return "io";
    case BackendErrorCause::timeout: return "timeout";
    case BackendErrorCause::protocol: return "protocol";
    case BackendErrorCause::reply: return "reply";
    case BackendErrorCause::circuit_open: return "circuit_open";
  }
  return "unknown";
}

/// Thrown by a backend (under `FailurePolicy::raise`, or by its connection layer) when it cannot answer.
/// `what()` reads "<backend> <cause>: <detail>", e.g. "redis timeout: ...".
class BackendError : public std::runtime_error {
 public:
  /// `backend`: the backend's name in `what()` ("redis" by default, the only remote backend today).
  BackendError(BackendErrorCause cause, const std::string& detail, std::string_view backend = "redis")
      : std::runtime_error(std::string(backend) + " " + std::string(to_string(cause)) + ": " + detail), cause_(cause) {}

  /// The category of the failure.
  [[nodiscard]] BackendErrorCause cause() const noexcept { return cause_; }

  /// A copy whose text shares no storage with this one. Copies of a `std::runtime_error` share their text
  /// through a reference count kept inside libstdc++, where ThreadSanitizer cannot see it; an error handed
  /// to other threads is copied this way, so that each thread frees only what it alone holds.
  [[nodiscard]] BackendError unshared() const { return BackendError(cause_, Text{what()}); }

 private:
  struct Text {
    const char* what;
  };
  BackendError(BackendErrorCause cause, Text text) : std::runtime_error(std::string(text.what)), cause_(cause) {}

  BackendErrorCause cause_;
};

}  // namespace ratelimit
