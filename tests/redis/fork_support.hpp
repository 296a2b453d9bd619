#pragma once
// A forked child that must exit by itself: waited for with a limit, killed past it.

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

namespace ratelimit_test {

/// Waits up to `limit` for `child` to exit; kills it (SIGKILL) past that. True when it exited by itself, with
/// its wait status in `status`.
inline bool exits_within(pid_t child, std::chrono::milliseconds limit, int& status) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (::waitpid(child, &status, WNOHANG) == child) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return false;
}

}  // namespace ratelimit_test
