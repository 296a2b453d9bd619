// FairAcquirer (include/ratelimit/README.md "Shaping"): the waiters of one key are served in arrival order, one
// check per wait (no herd), never more than the limiter admits; queues are dropped with their last waiter.
// Threads are made deterministic: each arrives only when the one before is queued, and the head's sleep is a gate
// the test opens; the sleeps advance a ManualClock.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <ratelimit/fair_acquirer.hpp>
#include <ratelimit/ratelimit.hpp>

#include "shaping_gate.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::FairAcquirer;
using ratelimit::FixedWindow;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;
using shaping_test::Gate;

thread_local int caller = -1;  // which test thread calls the limiter

/// A window limiter that records who was admitted, and how many checks were denied.
struct RecordingLimiter {
  RecordingLimiter(MemoryLimiter<FixedWindow, ManualClock>& limiter, ManualClock time) : inner(limiter), clock(time) {}
  MemoryLimiter<FixedWindow, ManualClock>& inner;
  ManualClock clock;
  std::mutex mutex;
  std::vector<int> admitted;
  std::vector<std::int64_t> admitted_at_ms;
  std::vector<std::int64_t> denied_at_ms;
  int denied = 0;

  Decision allow(std::string_view key, std::int64_t cost = 1) {
    const std::lock_guard lock(mutex);
    const Decision d = inner.allow(key, cost);
    if (d.allowed) {
      admitted.push_back(caller);
      admitted_at_ms.push_back(clock.now().time_since_epoch() / 1ms);
    } else {
      ++denied;
      denied_at_ms.push_back(clock.now().time_since_epoch() / 1ms);
    }
    return d;
  }
  Decision peek(std::string_view key) { return inner.peek(key); }
  void reset(std::string_view key) { inner.reset(key); }
  std::size_t admissions() {
    const std::lock_guard lock(mutex);
    return admitted.size();
  }
};
static_assert(ratelimit::Limiter<RecordingLimiter> && !ratelimit::ReservingLimiter<RecordingLimiter>);

class ShapingFairAcquire : public ::testing::Test {
 protected:
  ManualClock clock;
  // One request per 100 ms window.
  MemoryLimiter<FixedWindow, ManualClock> window{FixedWindow{.limit = 1, .window = 100ms}, {}, clock};
  RecordingLimiter limiter{window, clock};
  FairAcquirer<RecordingLimiter, ManualClock> fair{limiter, clock};
  Gate gate{clock};

  /// Starts caller `id`, which acquires `key` with `max_wait`; stores its decision in `results[id]`.
  void start(std::vector<std::thread>& threads, std::map<int, Decision>& results, std::mutex& results_mutex, int id,
             std::chrono::nanoseconds max_wait) {
    threads.emplace_back([this, &results, &results_mutex, id, max_wait] {
      caller = id;
      const Decision d =
          fair.acquire("k", 1, max_wait, [this](std::chrono::nanoseconds delay) { gate.sleep(caller, delay); });
      {
        const std::lock_guard lock(results_mutex);
        results[id] = d;
      }
      gate.finish();
    });
  }

  /// Waits (yielding, no timed sleep) until `n` callers are queued on "k".
  void wait_until_queued(std::size_t n) {
    while (fair.waiting("k") < n) std::this_thread::yield();
  }
};

TEST_F(ShapingFairAcquire, WakesInFifoOrderOneCheckPerWait) {
  ASSERT_TRUE(window.allow("k"));  // the window is full: every caller must wait
  constexpr int kCallers = 5;
  std::vector<std::thread> threads;
  std::map<int, Decision> results;
  std::mutex results_mutex;
  start(threads, results, results_mutex, 0, 1h);
  gate.wait_for_sleepers(1);  // the head was denied and sleeps
  for (int id = 1; id < kCallers; ++id) {
    start(threads, results, results_mutex, id, 1h);
    wait_until_queued(static_cast<std::size_t>(id) + 1);
  }
  // One sleep at a time, the clock standing still in between: waiters woken together (a herd) would all check at
  // that time, be denied together and sleep together. The yields give such waiters time to show up. At most 3
  // releases per caller: a herd may need more, and fails below instead of hanging.
  for (int releases = 0; releases < 3 * kCallers && gate.wait_for_sleeper_unless_finished(kCallers); ++releases) {
    for (int i = 0; i < 20'000; ++i) std::this_thread::yield();
    gate.release_one_and_wait();
  }
  gate.open_gate();
  for (std::thread& t : threads) t.join();

  EXPECT_EQ(limiter.admitted, (std::vector<int>{0, 1, 2, 3, 4})) << "not served in arrival order";
  // One denial and one 100 ms sleep each, one waiter at a time.
  EXPECT_EQ(limiter.denied_at_ms, (std::vector<std::int64_t>{0, 100, 200, 300, 400}))
      << "waiters checked the limiter together";
  EXPECT_EQ(gate.most_sleeping, 1) << "waiters slept together";
  EXPECT_EQ(clock.now().time_since_epoch(), kCallers * 100ms);
  EXPECT_EQ(limiter.admitted_at_ms, (std::vector<std::int64_t>{100, 200, 300, 400, 500}));
  for (const auto& [id, d] : results) EXPECT_TRUE(d.allowed) << "caller " << id;
  EXPECT_EQ(fair.keys(), 0U) << "the key's queue outlived its last waiter";
}

TEST_F(ShapingFairAcquire, NeverAdmitsMoreThanTheLimiter) {
  MemoryLimiter<FixedWindow, ManualClock> two{FixedWindow{.limit = 2, .window = 100ms}, {}, clock};
  RecordingLimiter recorder{two, clock};
  FairAcquirer<RecordingLimiter, ManualClock> queue{recorder, clock};
  std::vector<std::thread> threads;
  for (int id = 0; id < 7; ++id) {
    threads.emplace_back([&, id] {
      caller = id;
      EXPECT_TRUE(queue.acquire("k", 1, 1h, [&](std::chrono::nanoseconds delay) { clock.advance(delay); }).allowed);
    });
  }
  for (std::thread& t : threads) t.join();
  std::map<std::int64_t, int> per_window;
  for (const std::int64_t ms : recorder.admitted_at_ms) ++per_window[ms / 100];
  for (const auto& [w, n] : per_window) EXPECT_LE(n, 2) << "window " << w;
  EXPECT_EQ(recorder.admitted.size(), 7U);
  EXPECT_EQ(queue.keys(), 0U);
}

TEST_F(ShapingFairAcquire, AQueuedWaiterPastItsDeadlineLeavesWithoutChecking) {
  ASSERT_TRUE(window.allow("k"));
  std::vector<std::thread> threads;
  std::map<int, Decision> results;
  std::mutex results_mutex;
  start(threads, results, results_mutex, 0, 1h);
  gate.wait_for_sleepers(1);
  start(threads, results, results_mutex, 1, 50ms);  // its deadline passes while the head sleeps 100 ms
  wait_until_queued(2);
  start(threads, results, results_mutex, 2, 1h);
  wait_until_queued(3);
  gate.open_gate();
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(results[0].allowed);
  EXPECT_FALSE(results[1].allowed);
  EXPECT_TRUE(results[2].allowed);
  EXPECT_EQ(limiter.admitted, (std::vector<int>{0, 2}));
  EXPECT_EQ(limiter.denied, 2) << "the waiter past its deadline checked the limiter";
  EXPECT_EQ(fair.keys(), 0U);
}

TEST_F(ShapingFairAcquire, AThrowingWaitLeavesTheQueue) {
  ASSERT_TRUE(window.allow("k"));
  EXPECT_THROW((void)fair.acquire("k", 1, 1h, [](std::chrono::nanoseconds) { throw std::runtime_error("cancelled"); }),
               std::runtime_error);
  EXPECT_EQ(fair.keys(), 0U);
  EXPECT_EQ(fair.waiting("k"), 0U);
}

TEST_F(ShapingFairAcquire, ANegativeMaxWaitThrowsNamingIt) {
  try {
    (void)fair.acquire("k", 1, -1ns, [](std::chrono::nanoseconds) {});
    FAIL() << "a negative max_wait was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("max_wait", 0), 0U) << e.what();
  }
  EXPECT_EQ(limiter.denied, 0);
  EXPECT_TRUE(limiter.admitted.empty());
}

TEST_F(ShapingFairAcquire, MaxWaitZeroTriesOnce) {
  EXPECT_TRUE(fair.acquire("k", 1, 0ns, [](std::chrono::nanoseconds) { FAIL() << "slept"; }).allowed);
  const Decision d = fair.acquire("k", 1, 0ns, [](std::chrono::nanoseconds) { FAIL() << "slept"; });
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 100ms);
}

}  // namespace
