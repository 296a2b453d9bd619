// Counts what the test binary allocates through operator new while counting is on (tests/support/
// count_new.cpp replaces the global operator new of the binary it is linked into; it changes nothing else).
#pragma once

#include <atomic>
#include <cstddef>

namespace test_support {

/// False under ThreadSanitizer, whose runtime defines operator new itself (a second definition does not
/// link): there nothing is counted, and tests that need the counts skip.
extern const bool can_count_new;
extern std::atomic<bool> counting_new;
extern std::atomic<std::size_t> new_calls;
extern std::atomic<std::size_t> new_bytes;

/// Counts the operator new calls and bytes of one scope.
class CountNew {
 public:
  CountNew() {
    new_calls = 0;
    new_bytes = 0;
    counting_new = true;
  }
  ~CountNew() { counting_new = false; }
  CountNew(const CountNew&) = delete;
  CountNew& operator=(const CountNew&) = delete;
  [[nodiscard]] std::size_t calls() const { return new_calls.load(); }
  [[nodiscard]] std::size_t bytes() const { return new_bytes.load(); }
};

}  // namespace test_support
