// acquire on a reserving limiter (include/ratelimit/README.md "Shaping"): each caller books its slot in arrival
// order and sleeps once, exactly until it (no herd); a slot past max_wait books nothing; a booked slot cannot be
// taken by another caller; a wait that throws gives the slot back.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <ratelimit/ratelimit.hpp>

#include "shaping_gate.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::Gcra;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;
using shaping_test::Gate;

class ShapingAcquire : public ::testing::Test {
 protected:
  ManualClock clock;
  // T = 100 ms, burst 1.
  MemoryLimiter<Gcra, ManualClock> limiter{Gcra{.limit = 10, .period = 1s, .burst = 1}, {}, clock};
};

TEST_F(ShapingAcquire, WakesInArrivalOrderEachOnceAtItsOwnSlot) {
  ASSERT_TRUE(limiter.allow("k"));  // full: the next slot is at 100 ms
  constexpr int kCallers = 5;
  Gate gate(clock);
  std::vector<std::thread> threads;
  std::vector<Decision> results(kCallers);
  for (int id = 0; id < kCallers; ++id) {
    threads.emplace_back([&, id] {
      results[static_cast<std::size_t>(id)] = ratelimit::acquire(
          limiter, "k", 1, 1h, [&](std::chrono::nanoseconds delay) { gate.sleep(id, delay); }, clock);
    });
    gate.wait_for_sleepers(id + 1);  // the next arrives once this one sleeps
  }
  gate.open_gate();
  for (std::thread& t : threads) t.join();
  for (int id = 0; id < kCallers; ++id) {
    EXPECT_TRUE(results[static_cast<std::size_t>(id)].allowed) << "caller " << id;
    // Caller i's slot is (i + 1) T after the start; one sleep each (a herd sleeps T, checks together, sleeps again).
    EXPECT_EQ(gate.sleeps[id], (std::vector<std::chrono::nanoseconds>{(id + 1) * 100ms})) << "caller " << id;
  }
  EXPECT_EQ(clock.now().time_since_epoch(), 500ms);
  EXPECT_FALSE(limiter.allow("k")) << "more admitted than the limiter's rate";
}

TEST_F(ShapingAcquire, ABookedSlotCannotBeTakenByAnotherCaller) {
  ASSERT_TRUE(limiter.allow("k"));
  std::vector<std::chrono::nanoseconds> delays;
  auto waiter_with_thief = [&](std::chrono::nanoseconds delay) {
    delays.push_back(delay);
    clock.advance(delay);
    EXPECT_FALSE(limiter.allow("k")) << "another caller took the slot acquire was waiting for";
  };
  const Decision d = ratelimit::acquire(limiter, "k", 1, 250ms, waiter_with_thief, clock);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(delays, (std::vector<std::chrono::nanoseconds>{100ms}));
}

TEST_F(ShapingAcquire, ASlotPastMaxWaitBooksNothing) {
  ASSERT_TRUE(limiter.allow("k"));
  const Decision d = ratelimit::acquire(
      limiter, "k", 1, 99ms, [](std::chrono::nanoseconds) { FAIL() << "slept"; }, clock);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 100ms);
  ratelimit::Reservation next = limiter.reserve("k", 1, 1s);
  EXPECT_EQ(next.delay(), 100ms) << "the refused acquire booked a slot";
  // Over the burst: never, at once.
  const Decision never = ratelimit::acquire(
      limiter, "k", 2, 1h, [](std::chrono::nanoseconds) {}, clock);
  EXPECT_FALSE(never.allowed);
  EXPECT_EQ(never.retry_after, Decision::never);
}

TEST_F(ShapingAcquire, AThrowingWaitGivesTheSlotBack) {
  ASSERT_TRUE(limiter.allow("k"));
  EXPECT_THROW((void)ratelimit::acquire(
                   limiter, "k", 1, 1s, [](std::chrono::nanoseconds) { throw std::runtime_error("cancelled"); }, clock),
               std::runtime_error);
  EXPECT_EQ(limiter.reserve("k", 1, 1s).delay(), 100ms) << "the cancelled slot was not given back";
}

TEST_F(ShapingAcquire, JitterIsAddedWithinMaxWait) {
  ratelimit::Jitter jitter(80ms, 5);
  for (int i = 0; i < 20; ++i) {
    clock.set(ManualClock::time_point(std::chrono::seconds(10 * i)));
    ASSERT_TRUE(limiter.allow("k"));
    std::chrono::nanoseconds waited{0};
    const Decision d = ratelimit::acquire(
        limiter, "k", 1, 150ms, jitter, [&](std::chrono::nanoseconds w) { waited = w; }, clock);
    EXPECT_TRUE(d.allowed);
    EXPECT_GE(waited, 100ms);
    EXPECT_LE(waited, 150ms);
  }
}

TEST_F(ShapingAcquire, ANegativeMaxWaitThrowsNamingItAndBooksNothing) {
  try {
    (void)ratelimit::acquire(
        limiter, "k", 1, -1ns, [](std::chrono::nanoseconds) {}, clock);
    FAIL() << "a negative max_wait was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("max_wait", 0), 0U) << e.what();
  }
  EXPECT_TRUE(limiter.allow("k"));
}

}  // namespace
