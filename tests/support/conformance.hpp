#pragma once

/// @file
/// The backend conformance suite: table-driven exact-value tests of include/ratelimit/README.md "Decisions", "Policy
/// formulas" and "Guarantees", run against any backend. Instantiate it with a Backend type:
///
/// ```cpp
/// struct MyBackend {
///   template <ratelimit::Policy P> static auto make(P policy, ratelimit::ManualClock clock);  // a limiter,
/// };                                                                   // by value or (unique/shared) pointer
/// using Backends = ::testing::Types<MyBackend>;
/// INSTANTIATE_TYPED_TEST_SUITE_P(My, Conformance, Backends);
/// ```
///
/// Every time, window and period in the tables is a whole number of microseconds and every emission
/// interval (and every floor(a*W/prev) of the sliding window counter) is exact in microseconds, so the
/// in-memory (ns) and Redis (us) backends must give identical decisions (include/ratelimit/README.md "Guarantees").
/// Each test uses a fresh unique key, so a shared server never mixes state between tests or runs. Expected values were
/// worked out by hand from include/ratelimit/README.md "Policy formulas"; the arithmetic is in the comments.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <ratelimit/ratelimit.hpp>

namespace ratelimit_test {

/// The limiter behind whatever `Backend::make` returned.
template <class T>
T& deref(T& limiter) {
  return limiter;
}
template <class T, class D>
T& deref(std::unique_ptr<T, D>& limiter) {
  return *limiter;
}
template <class T>
T& deref(std::shared_ptr<T>& limiter) {
  return *limiter;
}

/// A key no other test, run or process uses: `conformance:<test>:<random>:<counter>`.
inline std::string unique_key() {
  static const std::string nonce = [] {
    std::random_device entropy;
    return std::to_string(entropy()) + std::to_string(entropy());
  }();
  static int counter = 0;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string("conformance:") + (info ? info->name() : "?") + ":" + nonce + ":" + std::to_string(++counter);
}

namespace conformance {

inline constexpr std::int64_t kNever = -1;  // in a table: expect Decision::never

enum class Op { allow, peek, reset, refund };

/// One row: move the clock by `advance_us` (negative steps it back), then run `op` with `cost`, and
/// expect these fields (durations in microseconds).
struct Row {
  std::int64_t advance_us;
  Op op;
  std::int64_t cost;
  bool allowed;
  std::int64_t remaining;
  std::int64_t retry_us;
  std::int64_t reset_us;
};

/// allow(key, cost) after advancing the clock.
inline Row allow(std::int64_t advance_us, std::int64_t cost, bool allowed, std::int64_t remaining,
                 std::int64_t retry_us, std::int64_t reset_us) {
  return {advance_us, Op::allow, cost, allowed, remaining, retry_us, reset_us};
}
/// peek(key) after advancing the clock.
inline Row peek(std::int64_t advance_us, bool allowed, std::int64_t remaining, std::int64_t retry_us,
                std::int64_t reset_us) {
  return {advance_us, Op::peek, 1, allowed, remaining, retry_us, reset_us};
}
/// reset(key) after advancing the clock; nothing to expect.
inline Row reset(std::int64_t advance_us) { return {advance_us, Op::reset, 0, false, 0, 0, 0}; }
/// refund(key, cost) after advancing the clock: the state afterwards as a cost-0 check sees it.
inline Row refund(std::int64_t advance_us, std::int64_t cost, std::int64_t remaining, std::int64_t reset_us) {
  return {advance_us, Op::refund, cost, true, remaining, 0, reset_us};
}

inline std::chrono::nanoseconds expected_duration(std::int64_t us) {
  return us == kNever ? ratelimit::Decision::never : std::chrono::nanoseconds(std::chrono::microseconds(us));
}

/// Runs `rows` against a fresh limiter of `Backend` for `policy` and a fresh key, with a ManualClock
/// starting at its epoch. `limit` is the expected `Decision::limit`.
template <class Backend, ratelimit::Policy P>
void run_table(P policy, std::int64_t limit, const std::vector<Row>& rows) {
  ratelimit::ManualClock clock;
  auto holder = Backend::make(policy, clock);
  auto& limiter = deref(holder);
  static_assert(ratelimit::Limiter<std::remove_reference_t<decltype(limiter)>>);
  const std::string key = unique_key();
  std::int64_t t_us = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    t_us += row.advance_us;
    clock.advance(std::chrono::microseconds(row.advance_us));
    SCOPED_TRACE(::testing::Message() << "row " << i << " (t = " << t_us << " us, cost " << row.cost << ")");
    ratelimit::Decision d;
    switch (row.op) {
      case Op::reset:
        limiter.reset(key);
        continue;
      case Op::peek:
        d = limiter.peek(key);
        break;
      case Op::allow:
        d = row.cost == 1 ? limiter.allow(key) : limiter.allow(key, row.cost);  // both overloads
        break;
      case Op::refund:
        d = limiter.refund(key, row.cost);
        break;
    }
    EXPECT_EQ(d.allowed, row.allowed);
    EXPECT_EQ(static_cast<bool>(d), row.allowed);
    EXPECT_EQ(d.limit, limit);
    EXPECT_EQ(d.remaining, row.remaining);
    EXPECT_EQ(d.retry_after, expected_duration(row.retry_us));
    EXPECT_EQ(d.reset_after, expected_duration(row.reset_us));
  }
}

}  // namespace conformance

template <class Backend>
class Conformance : public ::testing::Test {};

TYPED_TEST_SUITE_P(Conformance);

using namespace std::chrono_literals;
using conformance::allow;
using conformance::kNever;
using conformance::peek;
using conformance::refund;
using conformance::reset;

// ---------------------------------------------------------------------------------------------------
// FixedWindow {L, W}: remaining = L - c; reset_after = (k_s+1)W - t if c > 0; retry = (k_s+1)W - t.

TYPED_TEST_P(Conformance, FixedWindowEdgesExhaustionAndCosts) {
  // L = 3, W = 1000 us.
  conformance::run_table<TypeParam>(ratelimit::FixedWindow{.limit = 3, .window = 1000us}, 3,
                                    {
                                        peek(0, true, 3, 0, 0),             // t=0: absent key is full
                                        allow(0, 1, true, 2, 0, 1000),      // r = 0: reset = 1*1000 - 0
                                        allow(0, 1, true, 1, 0, 1000),      //
                                        peek(0, true, 1, 0, 1000),          // peek consumes nothing
                                        peek(0, true, 1, 0, 1000),          //
                                        allow(0, 1, true, 0, 0, 1000),      // c = 3 = L
                                        allow(0, 1, false, 0, 1000, 1000),  // exhausted: retry = 1000 - 0
                                        allow(999, 1, false, 0, 1, 1),      // t=999, r = W-1: 1000 - 999
                                        peek(0, false, 0, 1, 1),            //
                                        allow(0, 0, true, 0, 0, 1),         // cost 0: allowed, state only
                                        allow(1, 1, true, 2, 0, 1000),      // t=1000, r = 0: new window
                                        allow(0, 2, true, 0, 0, 1000),      // weighted: c = 3
                                        allow(0, 4, false, 0, kNever, 1000),  // cost 4 > L: never
                                        allow(500, 3, false, 0, 500, 500),    // t=1500: cost = L, 2000-1500
                                        allow(500, 3, true, 0, 0, 1000),      // t=2000: cost = L passes
                                        allow(0, 4, false, 0, kNever, 1000),  //
                                        peek(3000, true, 3, 0, 0),            // t=5000: windows skipped
                                        allow(0, 0, true, 3, 0, 0),           // cost 0 on a full key
                                        allow(0, 4, false, 3, kNever, 0),     // never, nothing consumed
                                        allow(0, 1, true, 2, 0, 1000),        //
                                    });
}

TYPED_TEST_P(Conformance, FixedWindowWeightedAndReset) {
  // L = 10, W = 100 us.
  conformance::run_table<TypeParam>(ratelimit::FixedWindow{.limit = 10, .window = 100us}, 10,
                                    {
                                        allow(30, 4, true, 6, 0, 70),    // t=30: reset = 100 - 30
                                        allow(0, 4, true, 2, 0, 70),     //
                                        allow(10, 3, false, 2, 60, 60),  // t=40: 4+4+3 > 10, 100 - 40
                                        peek(0, true, 2, 0, 60),         // cost 1 would pass
                                        allow(0, 2, true, 0, 0, 60),     // c = 10
                                        peek(0, false, 0, 60, 60),       //
                                        reset(0),                        //
                                        peek(0, true, 10, 0, 0),         // full again
                                        allow(0, 10, true, 0, 0, 60),    // cost = L from full
                                        reset(0),                        //
                                        reset(0),                        // resetting an absent key
                                        allow(59, 1, true, 9, 0, 1),     // t=99: 100 - 99
                                    });
}

TYPED_TEST_P(Conformance, FixedWindowClockSteppingBack) {
  // L = 3, W = 1000 us. Effective time = max(t, latest admitted write).
  conformance::run_table<TypeParam>(
      ratelimit::FixedWindow{.limit = 3, .window = 1000us}, 3,
      {
          allow(500, 1, true, 2, 0, 500),     // t=500: write at 500
          allow(-300, 1, true, 1, 0, 500),    // t=200 -> 500: reset counts from 500
          allow(1000, 1, true, 2, 0, 800),    // t=1200: window 1, write at 1200
          allow(-300, 1, true, 1, 0, 800),    // t=900 -> 1200: still window 1 (not window 0)
          allow(0, 1, true, 0, 0, 800),       //
          allow(1000, 1, false, 0, 100, 100),  // t=1900: denied, writes nothing
          allow(50, 0, true, 0, 0, 50),       // t=1950: cost 0, writes nothing
          peek(0, false, 0, 50, 50),          // peek writes nothing
          allow(-650, 1, false, 0, 700, 700),  // t=1300 (1900 and 1950 wrote nothing): 2000-1300
          peek(-1300, false, 0, 800, 800),     // t=0 -> 1200
          allow(2000, 1, true, 2, 0, 1000),    // t=2000: next window
      });
}

// ---------------------------------------------------------------------------------------------------
// SlidingWindowLog {L, W}: window (t-W, t]; reset = newest + W - t; retry walks the entries oldest first.

TYPED_TEST_P(Conformance, SlidingWindowLogEdgesAndExhaustion) {
  // L = 3, W = 1000 us.
  conformance::run_table<TypeParam>(ratelimit::SlidingWindowLog{.limit = 3, .window = 1000us}, 3,
                                    {
                                        peek(0, true, 3, 0, 0),                 //
                                        allow(0, 1, true, 2, 0, 1000),          // t=0: entry (0,1)
                                        allow(100, 1, true, 1, 0, 1000),        // t=100: 100+1000-100
                                        allow(100, 1, true, 0, 0, 1000),        // t=200: c = 3
                                        allow(100, 1, false, 0, 700, 900),      // t=300: need 1 -> ts 0;
                                                                                // reset 200+1000-300
                                        allow(0, 2, false, 0, 800, 900),        // need 2 -> ts 100
                                        allow(0, 3, false, 0, 900, 900),        // cost = L: need 3 -> ts 200
                                        allow(0, 4, false, 0, kNever, 900),     // cost > L
                                        allow(0, 0, true, 0, 0, 900),           // cost 0 reports the state
                                        peek(699, false, 0, 1, 201),            // t=999: (0,1) in (-1,999]
                                        allow(1, 1, true, 0, 0, 1000),          // t=1000: (0,1) dropped
                                        allow(99, 1, false, 0, 1, 901),         // t=1099: (100,1) in (99,1099]
                                        allow(1, 1, true, 0, 0, 1000),          // t=1100: (100,1) dropped
                                        peek(2100, true, 3, 0, 0),              // t=3200: all gone
                                        allow(0, 1, true, 2, 0, 1000),          //
                                        allow(0, 1, true, 1, 0, 1000),          // same timestamp: 2 entries
                                        allow(0, 1, true, 0, 0, 1000),          //
                                        allow(0, 1, false, 0, 1000, 1000),      // need 1 -> ts 3200
                                        reset(0),                               //
                                        peek(0, true, 3, 0, 0),                 //
                                        allow(0, 3, true, 0, 0, 1000),          // cost = L from full
                                    });
}

TYPED_TEST_P(Conformance, SlidingWindowLogRetryWalkMixedCosts) {
  // L = 10, W = 1000 us. Entries (0,3) (10,2) (20,4) (30,1): prefix sums 3, 5, 9, 10.
  conformance::run_table<TypeParam>(ratelimit::SlidingWindowLog{.limit = 10, .window = 1000us}, 10,
                                    {
                                        allow(0, 3, true, 7, 0, 1000),        // t=0
                                        allow(10, 2, true, 5, 0, 1000),       // t=10
                                        allow(10, 4, true, 1, 0, 1000),       // t=20
                                        allow(10, 1, true, 0, 0, 1000),       // t=30: c = 10
                                        allow(10, 1, false, 0, 960, 990),     // t=40: need 1 -> ts 0;
                                                                              // reset 30+1000-40
                                        allow(0, 3, false, 0, 960, 990),      // need 3: 3 >= 3 at ts 0
                                        allow(0, 4, false, 0, 970, 990),      // need 4 -> ts 10
                                        allow(0, 5, false, 0, 970, 990),      // need 5 -> ts 10
                                        allow(0, 6, false, 0, 980, 990),      // need 6 -> ts 20
                                        allow(0, 9, false, 0, 980, 990),      // need 9 -> ts 20
                                        allow(0, 10, false, 0, 990, 990),     // need 10 -> ts 30
                                        allow(0, 11, false, 0, kNever, 990),  //
                                        allow(960, 3, true, 0, 0, 1000),      // t=1000: (0,3) gone, 7+3
                                        allow(0, 1, false, 0, 10, 1000),      // need 1 -> ts 10
                                        allow(0, 7, false, 0, 30, 1000),      // need 7: 2,6,7 -> ts 30
                                        allow(0, 8, false, 0, 1000, 1000),    // need 8: 2,6,7,10 -> ts 1000
                                        peek(10, true, 2, 0, 990),            // t=1010: (10,2) gone
                                    });
}

TYPED_TEST_P(Conformance, SlidingWindowLogClockSteppingBack) {
  // L = 2, W = 1000 us.
  conformance::run_table<TypeParam>(ratelimit::SlidingWindowLog{.limit = 2, .window = 1000us}, 2,
                                    {
                                        allow(500, 1, true, 1, 0, 1000),        // t=500: entry (500,1)
                                        allow(-400, 1, true, 0, 0, 1000),       // t=100 -> 500: (500,1)
                                        allow(1100, 1, false, 0, 300, 300),     // t=1200: 500+1000-1200
                                        allow(299, 0, true, 0, 0, 1),           // t=1499: writes nothing
                                        allow(-1499, 1, false, 0, 1000, 1000),  // t=0 -> 500
                                        peek(1499, false, 0, 1, 1),             // t=1499
                                        allow(1, 1, true, 1, 0, 1000),          // t=1500: (500,*) dropped
                                        allow(-1000, 1, true, 0, 0, 1000),      // t=500 -> 1500
                                    });
}

// ---------------------------------------------------------------------------------------------------
// SlidingWindowCounter {L, W}: allowed iff prev*(W-r) + (cur+n)*W <= L*W;
// remaining = max(0, floor((L*W - prev*(W-r))/W) - cur); reset = 2W-r if cur > 0, W-r if prev > 0, else 0;
// retry: a = L-cur-n; if prev > 0, a >= 0 and r1 = W - floor(a*W/prev) < W: r1 - r;
// else (W-r) + r2 with r2 = cur > 0 ? max(0, W - floor((L-n)*W/cur)) : 0.
// Every floor(a*W/prev) and floor((L-n)*W/cur) below is exact in us (see the note in the report: when it
// is not, a ns backend and a us backend give different retry_after).

TYPED_TEST_P(Conformance, SlidingWindowCounterFormulas) {
  // L = 10, W = 1000 us.
  conformance::run_table<TypeParam>(
      ratelimit::SlidingWindowCounter{.limit = 10, .window = 1000us}, 10,
      {
          peek(0, true, 10, 0, 0),               //
          allow(0, 4, true, 6, 0, 2000),         // t=0, r=0: cur 4; rem 10-4; reset 2W-0
          allow(500, 6, true, 0, 0, 1500),       // t=500: cur 10; reset 2000-500
          allow(0, 1, false, 0, 600, 1500),      // a = -1: r2 = 1000 - 9000/10 = 100; (1000-500)+100
          allow(0, 11, false, 0, kNever, 1500),  //
          allow(500, 1, false, 0, 100, 1000),    // t=1000, r=0: prev 10, cur 0: 10000+1000 > 10000;
                                                 // a = 9: r1 = 1000 - 9000/10 = 100 < W: 100-0;
                                                 // rem floor(0/1000) - 0; reset W-0 (prev only)
          allow(99, 1, false, 0, 1, 901),        // t=1099, r=99: 10*901+1000 > 10000; 100-99;
                                                 // rem floor(990/1000) = 0; reset 1000-99
          allow(1, 1, true, 0, 0, 1900),         // t=1100, r=100: 10*900+1000 = 10000: cur 1;
                                                 // rem floor(1000/1000) - 1; reset 2000-100
          allow(0, 1, false, 0, 100, 1900),      // a = 8: r1 = 1000 - 800 = 200: 200-100
          allow(899, 1, true, 7, 0, 1001),       // t=1999, r = W-1: 10*1 + 2*1000 <= 10000: cur 2;
                                                 // rem floor(9990/1000) - 2 = 7; reset 2000-999
          peek(1, true, 8, 0, 1000),             // t=2000, r=0: prev 2, cur 0: rem floor(8000/1000);
                                                 // reset W-0 (prev only)
          allow(0, 8, true, 0, 0, 2000),         // 2*1000 + 8*1000 = 10000: cur 8
          allow(250, 2, false, 0, 750, 1750),    // t=2250, r=250: a = 0: r1 = 1000 - 0 = W, not < W;
                                                 // r2 = 1000 - floor(8*1000/8) = 0: (1000-250)+0
          allow(0, 1, false, 0, 250, 1750),      // a = 1: r1 = 1000 - floor(1000/2) = 500: 500-250
          allow(250, 1, true, 0, 0, 1500),       // t=2500, r=500: 2*500 + 9*1000 = 10000: cur 9
          peek(500, true, 1, 0, 1000),           // t=3000, k = k_s+1: prev 9, cur 0: floor(1000/1000)
          peek(999, true, 9, 0, 1),              // t=3999, r = W-1: floor((10000 - 9*1)/1000) = 9
          peek(1, true, 10, 0, 0),               // t=4000, k = k_s+2: prev = cur = 0
      });
}

TYPED_TEST_P(Conformance, SlidingWindowCounterRetryBranchesWeighted) {
  // L = 4, W = 1000 us.
  conformance::run_table<TypeParam>(
      ratelimit::SlidingWindowCounter{.limit = 4, .window = 1000us}, 4,
      {
          allow(0, 4, true, 0, 0, 2000),         // t=0: cost = L from full
          allow(1000, 4, false, 0, 1000, 1000),  // t=1000, r=0: prev 4, cur 0; a = 0: r1 = W, not < W;
                                                 // cur = 0 so r2 = 0: (1000-0)+0
          allow(0, 1, false, 0, 250, 1000),      // a = 3: r1 = 1000 - floor(3000/4) = 250: 250-0
          allow(0, 2, false, 0, 500, 1000),      // a = 2: r1 = 1000 - floor(2000/4) = 500
          allow(0, 0, true, 0, 0, 1000),         // cost 0 reports the state
          allow(500, 2, true, 0, 0, 1500),       // t=1500, r=500: 4*500 + 2*1000 = 4000: cur 2;
                                                 // rem floor(2000/1000) - 2 = 0; reset 2000-500
          allow(0, 1, false, 0, 250, 1500),      // a = 1: r1 = 1000 - floor(1000/4) = 750: 750-500
          allow(0, 3, false, 0, 1000, 1500),     // a = -1: r2 = 1000 - floor(1*1000/2) = 500;
                                                 // (1000-500)+500
          allow(0, 5, false, 0, kNever, 1500),   //
          allow(250, 1, true, 0, 0, 1250),       // t=1750, r=750: 4*250 + 3*1000 = 4000: cur 3
          allow(0, 1, false, 0, 250, 1250),      // 4*250 + 4*1000 > 4000; a = 0: r1 = W; r2 = 1000 -
                                                 // floor(3*1000/3) = 0: (1000-750)+0
          peek(250, true, 1, 0, 1000),           // t=2000, r=0: prev 3, cur 0: 3000+1000 <= 4000;
                                                 // rem floor((4000-3000)/1000) - 0; reset W-0
          allow(0, 1, true, 0, 0, 2000),         // cur 1: rem 1 - 1; reset 2W-0
          reset(0),                              //
          peek(0, true, 4, 0, 0),                // full again
          allow(999, 4, true, 0, 0, 1001),       // t=2999, r = W-1: cost = L from full; 2000-999
      });
}

TYPED_TEST_P(Conformance, SlidingWindowCounterClockSteppingBack) {
  // L = 10, W = 1000 us.
  conformance::run_table<TypeParam>(
      ratelimit::SlidingWindowCounter{.limit = 10, .window = 1000us}, 10,
      {
          allow(1500, 5, true, 5, 0, 1500),     // t=1500, k=1, r=500: cur 5; reset 2000-500
          allow(-600, 5, true, 0, 0, 1500),     // t=900 -> 1500 (k=1, not k=0): cur 10
          peek(-800, false, 0, 600, 1500),      // t=100 -> 1500: a < 0, r2 = 1000 - 900 = 100;
                                                // (1000-500)+100
          allow(1900, 1, false, 0, 100, 1000),  // t=2000 (k=2, r=0): prev 10: a = 9, r1 = 100: 100-0
          allow(0, 0, true, 0, 0, 1000),        // cost 0 writes nothing
          allow(-500, 1, false, 0, 600, 1500),  // t=1500 -> 1500: k=1 again (2000 was not written)
          allow(600, 1, true, 0, 0, 1900),      // t=2100, r=100: 10*900 + 1000 = 10000; 2000-100
      });
}

// A refund (include/ratelimit/README.md "Refunds") takes n from cur, then what is left of n from prev: a unit of the
// previous window still weighs (W-r)/W, and the give-back is what the refunded request still costs. It records its
// write time (the effective time then) like any write.
TYPED_TEST_P(Conformance, SlidingWindowCounterRefundReachesThePreviousWindow) {
  // L = 4, W = 1000 us.
  conformance::run_table<TypeParam>(
      ratelimit::SlidingWindowCounter{.limit = 4, .window = 1000us}, 4,
      {
          allow(900, 2, true, 2, 0, 1100),  // t=900, r=900: cur 2; reset 2000-900
          refund(0, 1, 3, 1100),            // cur 1: the exact inverse of an admission of 1
          allow(0, 1, true, 2, 0, 1100),    // cur 2
          peek(200, true, 2, 0, 900),       // t=1100, r=100: prev 2, cur 0: floor((4000-1800)/1000)
          refund(0, 1, 3, 900),             // cur has none: prev 1: floor((4000-900)/1000) = 3
          refund(0, 5, 4, 0),               // prev 0: the key is full (deleted on Redis)
          allow(0, 2, true, 2, 0, 1900),    // t=1100: cur 2; reset 2000-100
          peek(900, true, 2, 0, 1000),      // t=2000, r=0: prev 2 weighs 2000: rem 2; reset W
          refund(100, 1, 3, 900),           // t=2100, r=100: prev 1: floor(3100/1000); written at 2100
          peek(-100, true, 3, 0, 900),      // t=2000 -> 2100, the refund's write: reset W-100
          allow(0, 3, true, 0, 0, 1900),    // t=2100 still: 900 + 3000 <= 4000: cur 3; reset 2000-100
          peek(1000, true, 1, 0, 1000),     // t=3000, r=0: prev 3: floor((4000-3000)/1000) = 1; reset W
      });
}

// ---------------------------------------------------------------------------------------------------
// Gcra {L, P, B}: T = ceil(P/L), tau = B*T; new_tat = max(TAT,t) + n*T; allowed iff new_tat - t <= tau;
// remaining = floor((t + tau - max(TAT,t))/T); retry = new_tat - t - tau; reset = max(0, TAT - t).

TYPED_TEST_P(Conformance, GcraBurstExhaustionAndCosts) {
  // L = 10, P = 1000 us -> T = 100 us; B = 3 -> tau = 300 us.
  conformance::run_table<TypeParam>(ratelimit::Gcra{.limit = 10, .period = 1000us, .burst = 3}, 3,
                                    {
                                        peek(0, true, 3, 0, 0),              //
                                        allow(0, 1, true, 2, 0, 100),        // TAT 100: (300-100)/100
                                        allow(0, 1, true, 1, 0, 200),        //
                                        allow(0, 1, true, 0, 0, 300),        // exactly B from idle
                                        allow(0, 1, false, 0, 100, 300),     // not B+1: 400-0-300
                                        peek(0, false, 0, 100, 300),         //
                                        allow(99, 1, false, 0, 1, 201),      // t=99: 400-99-300; 300-99
                                        allow(1, 1, true, 0, 0, 300),        // t=100: 400-100 <= 300
                                        allow(0, 0, true, 0, 0, 300),        // cost 0
                                        allow(0, 4, false, 0, kNever, 300),  // cost > B
                                        allow(50, 3, false, 0, 250, 250),    // t=150: 700-150-300
                                        allow(250, 3, true, 0, 0, 300),      // t=400: 700-400 <= 300
                                        peek(600, true, 3, 0, 0),            // t=1000: idle, full
                                        allow(1000, 2, true, 1, 0, 200),     // t=2000: TAT 2200
                                        allow(0, 2, false, 1, 100, 200),     // 2400-2000-300
                                        allow(50, 2, false, 1, 50, 150),     // t=2050: floor(150/100);
                                                                             // 2400-2050-300
                                        reset(0),                            //
                                        allow(0, 3, true, 0, 0, 300),        // cost = B from full
                                    });
}

TYPED_TEST_P(Conformance, GcraClockSteppingBack) {
  // L = 10, P = 1000 us -> T = 100 us; B = 3 -> tau = 300 us.
  conformance::run_table<TypeParam>(ratelimit::Gcra{.limit = 10, .period = 1000us, .burst = 3}, 3,
                                    {
                                        allow(1000, 1, true, 2, 0, 100),      // t=1000: TAT 1100
                                        allow(-500, 1, true, 1, 0, 200),      // t=500 -> 1000: TAT 1200
                                        allow(-500, 2, false, 1, 100, 200),   // t=0 -> 1000: 1400-1000-300
                                        allow(1100, 0, true, 2, 0, 100),      // t=1100: cost 0, no write
                                        peek(0, true, 2, 0, 100),             // 1200-1100+100 <= 300
                                        allow(-100, 2, false, 1, 100, 200),   // t=1000: as before (a write
                                                                              // at 1100 would admit it)
                                        allow(0, 1, true, 0, 0, 300),         // TAT 1300
                                        peek(-500, false, 0, 100, 300),       // t=500 -> 1000
                                        allow(900, 1, true, 2, 0, 100),       // t=1400 > TAT 1300: TAT 1500
                                    });
}

// ---------------------------------------------------------------------------------------------------
// TokenBucket {C, R, P}: one token every T = ceil(P/R); decides as Gcra{R, P, C}.

TYPED_TEST_P(Conformance, TokenBucketRefillAndCosts) {
  // C = 4, R = 5 per 1000 us -> T = 200 us (Gcra tau = 800 us).
  conformance::run_table<TypeParam>(
      ratelimit::TokenBucket{.capacity = 4, .refill_tokens = 5, .refill_period = 1000us}, 4,
      {
          peek(0, true, 4, 0, 0),              // starts full
          allow(0, 3, true, 1, 0, 600),        // 1 token left; full again after 3 * 200
          allow(0, 2, false, 1, 200, 600),     // one more token needed: at 200
          allow(0, 5, false, 1, kNever, 600),  // cost > C
          allow(199, 1, true, 0, 0, 601),      // t=199: 0 tokens; full at 800
          allow(0, 1, false, 0, 1, 601),       // next token at 200
          allow(1, 1, true, 0, 0, 800),        // t=200: refilled and taken; full at 200 + 4*200
          allow(400, 2, true, 0, 0, 800),      // t=600: tokens at 400 and 600 taken; full at 1400
          allow(0, 0, true, 0, 0, 800),        //
          allow(300, 1, true, 0, 0, 700),      // t=900: token at 800 taken; full at 1600
          peek(100, true, 1, 0, 600),          // t=1000: token at 1000
          allow(600, 4, true, 0, 0, 800),      // t=1600: full; cost = C
          reset(0),                            //
          peek(0, true, 4, 0, 0),              //
      });
}

TYPED_TEST_P(Conformance, TokenBucketClockSteppingBack) {
  // C = 2, R = 1 per 500 us -> T = 500 us (Gcra tau = 1000 us).
  conformance::run_table<TypeParam>(
      ratelimit::TokenBucket{.capacity = 2, .refill_tokens = 1, .refill_period = 500us}, 2,
      {
          allow(2000, 1, true, 1, 0, 500),     // t=2000: 1 token left
          allow(-2000, 1, true, 0, 0, 1000),   // t=0 -> 2000: 0 left; full at 3000
          allow(500, 1, false, 0, 500, 1000),  // t=500 -> 2000: next token at 2500
          allow(1700, 1, false, 0, 300, 800),  // t=2200
          allow(300, 1, true, 0, 0, 1000),     // t=2500: token taken; full at 3500
          peek(-2500, false, 0, 500, 1000),    // t=0 -> 2500
      });
}

// ---------------------------------------------------------------------------------------------------
// Peek (include/ratelimit/README.md "Decisions"): allowed and retry_after of a cost-1 request, remaining and
// reset_after as now; nothing consumed, nothing written (so it never moves the effective time of
// include/ratelimit/README.md "Guarantees").

TYPED_TEST_P(Conformance, PeekConsumesAndWritesNothing) {
  // L = 10, P = 1000 us -> T = 100 us; B = 2 -> tau = 200 us.
  conformance::run_table<TypeParam>(ratelimit::Gcra{.limit = 10, .period = 1000us, .burst = 2}, 2,
                                    {
                                        peek(0, true, 2, 0, 0),              // absent key
                                        allow(0, 2, true, 0, 0, 200),        // TAT 200
                                        peek(0, false, 0, 100, 200),         // cost 1: 300-0-200
                                        peek(0, false, 0, 100, 200),         //
                                        peek(150, true, 1, 0, 50),           // t=150: floor((150+200-200)/100)
                                        peek(0, true, 1, 0, 50),             //
                                        allow(-150, 1, false, 0, 100, 200),  // t=0: nothing was written
                                        allow(150, 1, true, 0, 0, 150),      // t=150: TAT 300
                                    });
}

// Keys are arbitrary bytes and distinct keys (and distinct policies on one key) never share state.
TYPED_TEST_P(Conformance, DistinctKeysAndPoliciesDoNotShareState) {
  ratelimit::ManualClock clock;
  auto fixed_holder = TypeParam::make(ratelimit::FixedWindow{.limit = 1, .window = 1000us}, clock);
  auto counter_holder = TypeParam::make(ratelimit::SlidingWindowCounter{.limit = 1, .window = 1000us}, clock);
  auto& fixed = deref(fixed_holder);
  auto& counter = deref(counter_holder);
  const std::string base = unique_key();
  const std::vector<std::string> keys = {base,
                                         base + "{",
                                         base + "}",
                                         base + "{x}",
                                         base + std::string("\0", 1),
                                         base + std::string("\0\0", 2),
                                         base + "\xff\xfe",
                                         base + ":",
                                         "{" + base + "}"};
  for (const auto& key : keys) {
    SCOPED_TRACE(::testing::PrintToString(key));
    EXPECT_TRUE(fixed.allow(key).allowed);
    EXPECT_FALSE(fixed.allow(key).allowed);
  }
  for (const auto& key : keys) {
    SCOPED_TRACE(::testing::PrintToString(key));
    EXPECT_TRUE(counter.allow(key).allowed);
    EXPECT_FALSE(counter.peek(key).allowed);
  }
  fixed.reset(keys[0]);
  EXPECT_TRUE(fixed.peek(keys[0]).allowed);
  EXPECT_FALSE(fixed.peek(keys[1]).allowed);
  EXPECT_FALSE(counter.peek(keys[0]).allowed);
}

REGISTER_TYPED_TEST_SUITE_P(Conformance, FixedWindowEdgesExhaustionAndCosts, FixedWindowWeightedAndReset,
                            FixedWindowClockSteppingBack, SlidingWindowLogEdgesAndExhaustion,
                            SlidingWindowLogRetryWalkMixedCosts, SlidingWindowLogClockSteppingBack,
                            SlidingWindowCounterFormulas, SlidingWindowCounterRetryBranchesWeighted,
                            SlidingWindowCounterClockSteppingBack, SlidingWindowCounterRefundReachesThePreviousWindow,
                            GcraBurstExhaustionAndCosts,
                            GcraClockSteppingBack, TokenBucketRefillAndCosts, TokenBucketClockSteppingBack,
                            PeekConsumesAndWritesNothing, DistinctKeysAndPoliciesDoNotShareState);

}  // namespace ratelimit_test
