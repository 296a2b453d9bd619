#pragma once

// Joins a test's threads on every way out of the test (a failed ASSERT included): a std::thread destroyed while
// joinable calls std::terminate, which hides the failure's message. One definition: unity builds.

#include <functional>
#include <thread>
#include <utility>
#include <vector>

namespace ratelimit_test {

/// Declared after the threads (and after all they use): on the way out it runs `unblock`, which must make every
/// thread end in bounded time (a stop flag, a manual clock moved past the threads' deadlines), then joins the
/// threads still joinable. Where the test joined them itself, it only runs `unblock`.
class JoinAtExit {
 public:
  JoinAtExit(std::thread& thread, std::function<void()> unblock)
      : unblock_(std::move(unblock)), join_([&thread] { join(thread); }) {}
  JoinAtExit(std::vector<std::thread>& threads, std::function<void()> unblock)
      : unblock_(std::move(unblock)), join_([&threads] {
          for (std::thread& t : threads) join(t);
        }) {}
  JoinAtExit(const JoinAtExit&) = delete;
  JoinAtExit& operator=(const JoinAtExit&) = delete;
  ~JoinAtExit() {
    unblock_();
    join_();
  }

 private:
  static void join(std::thread& t) {
    if (t.joinable()) t.join();
  }

  std::function<void()> unblock_;
  std::function<void()> join_;
};

}  // namespace ratelimit_test
