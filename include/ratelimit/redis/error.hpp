#pragma once

/// @file
/// `ratelimit::BackendError`: a storage backend could not answer.

#include <stdexcept>
#include <string>
#include <string_view>

namespace ratelimit {

/// Why a backend call failed. Mirrors hiredis's error codes, plus Redis error replies.
enum class BackendErrorCause {
  /// Connection refused, reset or closed, or no connection while reconnecting is backing off.
  io,
  /// A connect, a command or the wait for a pooled connection took longer than its timeout.
  timeout,
  /// The server's bytes or reply shape were not what the protocol or the script promise.
  protocol,
  /// Redis answered with an error reply (e.g. `OOM`, `WRONGTYPE`, `NOAUTH`, a script error).
  reply,
};

/// The cause's name: "io", "timeout", "protocol" or "reply".
[[nodiscard]] constexpr std::string_view to_string(BackendErrorCause cause) noexcept {
  switch (cause) {
    case BackendErrorCause::io: return "io";
    case BackendErrorCause::timeout: return "timeout";
    case BackendErrorCause::protocol: return "protocol";
    case BackendErrorCause::reply: return "reply";
  }
  return "unknown";
}

/// Thrown by a backend (under `OnError::raise`, or by the connection layer) when it cannot answer.
/// `what()` reads "redis <cause>: <detail>".
class BackendError : public std::runtime_error {
 public:
  BackendError(BackendErrorCause cause, const std::string& detail)
      : std::runtime_error("redis " + std::string(to_string(cause)) + ": " + detail), cause_(cause) {}

  /// The category of the failure.
  [[nodiscard]] BackendErrorCause cause() const noexcept { return cause_; }

 private:
  BackendErrorCause cause_;
};

}  // namespace ratelimit
