#pragma once

// A sleep the test controls, for the Shaping tests with threads: a caller's sleep blocks until the test releases
// it (one sleeper per release, or all once the gate is open), then moves the ManualClock to the sleep's end (its
// start + the delay, never back). No timed sleep: the test decides when each waiter wakes.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <vector>

#include <ratelimit/clock.hpp>

namespace shaping_test {

struct Gate {
  explicit Gate(ratelimit::ManualClock time) : clock(time) {}
  ratelimit::ManualClock clock;
  std::mutex mutex;
  std::condition_variable changed;
  bool open = false;
  int released = 0;
  int sleeping = 0;
  int finished = 0;                                             // callers done (finish())
  int most_sleeping = 0;                                        // the most callers asleep at once
  std::map<int, std::vector<std::chrono::nanoseconds>> sleeps;  // per caller, in order

  void sleep(int caller, std::chrono::nanoseconds delay) {
    std::unique_lock lock(mutex);
    const auto end = clock.now() + delay;
    sleeps[caller].push_back(delay);
    ++sleeping;
    most_sleeping = std::max(most_sleeping, sleeping);
    changed.notify_all();
    changed.wait(lock, [&] { return open || released > 0; });
    if (!open) --released;
    --sleeping;
    changed.notify_all();
    if (clock.now() < end) clock.set(end);
  }
  /// Blocks until at least `n` callers sleep.
  void wait_for_sleepers(int n) {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return sleeping >= n; });
  }
  /// Blocks until a caller sleeps (true) or `callers` have finished (false).
  bool wait_for_sleeper_unless_finished(int callers) {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return sleeping >= 1 || finished >= callers; });
    return sleeping >= 1;
  }
  /// A caller says it is done.
  void finish() {
    const std::lock_guard lock(mutex);
    ++finished;
    changed.notify_all();
  }
  /// Wakes one sleeper and blocks until it has woken.
  void release_one_and_wait() {
    std::unique_lock lock(mutex);
    ++released;
    changed.notify_all();
    changed.wait(lock, [&] { return released == 0; });
  }
  /// Wakes one sleeper (now or the next to sleep).
  void release_one() {
    const std::lock_guard lock(mutex);
    ++released;
    changed.notify_all();
  }
  /// Wakes every sleeper, now and later.
  void open_gate() {
    const std::lock_guard lock(mutex);
    open = true;
    changed.notify_all();
  }
};

}  // namespace shaping_test
