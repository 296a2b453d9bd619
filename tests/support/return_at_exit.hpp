#pragma once

// Gives back the permits a test's acquire_async callbacks stored, on every way out of the test (a failed ASSERT
// included), while their limiter still lives. One definition: the test binaries may be built as unity builds.

#include <optional>
#include <tuple>
#include <utility>
#include <vector>

namespace ratelimit_test {

/// Declared right after a limiter, with the answers its callbacks write (`std::optional` or `std::vector` of
/// `PermitResult` or `Permit`) declared before it. Two lifetimes meet there: the limiter must outlive the
/// permits the answers hold, and the answers must outlive the limiter, whose destructor answers every waiter
/// still queued (`cancelled`) through its callback. So this empties the answers first, returning their permits;
/// a permit returned may grant another waiter, whose callback stores a new answer: repeated until all are empty.
template <class... Answers>
class ReturnAtExit {
 public:
  explicit ReturnAtExit(Answers&... answers) : answers_(answers...) {}
  ReturnAtExit(const ReturnAtExit&) = delete;
  ReturnAtExit& operator=(const ReturnAtExit&) = delete;
  ~ReturnAtExit() {
    while (std::apply([](auto&... a) { return (empty_out(a) + ...); }, answers_) > 0) {
    }
  }

 private:
  // Moves the answer out before it goes: a callback that its permit's release runs finds an empty answer to fill.
  // 1 if there was one to empty.
  template <class T>
  static int empty_out(std::optional<T>& answer) {
    if (!answer) return 0;
    (void)std::exchange(answer, std::nullopt);
    return 1;
  }
  template <class T>
  static int empty_out(std::vector<T>& answers) {
    if (answers.empty()) return 0;
    (void)std::exchange(answers, std::vector<T>{});
    return 1;
  }

  std::tuple<Answers&...> answers_;
};

}  // namespace ratelimit_test
