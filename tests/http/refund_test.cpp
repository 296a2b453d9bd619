// Refunds (include/ratelimit/README.md "Refunds"): exact tables worked by hand, then random sequences against
// deliberately simple reference models written differently from the library (a credit bucket instead
// of a TAT, per-window count maps, an unmerged request log).
#include <gtest/gtest.h>

#include <ratelimit/ratelimit.hpp>

#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;

namespace {

void expect_state(const Decision& d, std::int64_t remaining, std::chrono::nanoseconds reset_after) {
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.retry_after, 0ns);
  EXPECT_EQ(d.remaining, remaining);
  EXPECT_EQ(d.reset_after, reset_after);
}

}  // namespace

TEST(Refund, FixedWindowTable) {
  ManualClock clock;
  MemoryLimiter limiter(ratelimit::FixedWindow{.limit = 5, .window = 10s}, {}, clock);
  clock.advance(1s);
  EXPECT_EQ(limiter.allow("k", 3).remaining, 2);
  expect_state(limiter.refund("k", 1), 3, 9s);  // c = 3 - 1 = 2
  expect_state(limiter.refund("k", 5), 5, 0s);  // c = max(0, 2 - 5) = 0: never past full
  EXPECT_EQ(limiter.size(), 0u);                // a full key is reclaimed
  expect_state(limiter.refund("absent", 2), 5, 0s);
  EXPECT_EQ(limiter.size(), 0u);  // refunding an absent key inserts nothing
  // Consumption of an earlier window is gone already: refunding it gives nothing extra.
  EXPECT_TRUE(limiter.allow("k", 4));
  clock.advance(10s);  // t = 11 s, next window
  expect_state(limiter.refund("k", 4), 5, 0s);
  EXPECT_TRUE(limiter.allow("k", 5));
  EXPECT_FALSE(limiter.allow("k", 1));
}

TEST(Refund, GcraTable) {
  ManualClock clock;
  MemoryLimiter limiter(ratelimit::Gcra{.limit = 10, .period = 10s, .burst = 5}, {}, clock);  // T = 1 s, tau = 5 s
  EXPECT_EQ(limiter.allow("k", 3).remaining, 2);  // TAT = 3 s
  clock.advance(500ms);
  // TAT = max(3 s - 1 s, 0.5 s) = 2 s: remaining floor((0.5 + 5 - 2) / 1) = 3, reset 1.5 s.
  expect_state(limiter.refund("k", 1), 3, 1500ms);
  // TAT = max(2 s - 2 s, 0.5 s) = 0.5 s = t: full.
  expect_state(limiter.refund("k", 2), 5, 0s);
  EXPECT_EQ(limiter.size(), 0u);
  // Huge costs do not overflow: n*T is never formed when it exceeds the backlog.
  EXPECT_TRUE(limiter.allow("k", 5));
  expect_state(limiter.refund("k", std::numeric_limits<std::int64_t>::max()), 5, 0s);
}

TEST(Refund, TokenBucketIsItsGcra) {
  ManualClock clock;
  MemoryLimiter limiter(ratelimit::TokenBucket{.capacity = 4, .refill_tokens = 2, .refill_period = 2s}, {}, clock);
  EXPECT_EQ(limiter.allow("k", 4).remaining, 0);  // T = 1 s, TAT = 4 s
  clock.advance(1500ms);
  expect_state(limiter.refund("k", 1), 2, 1500ms);  // TAT = 3 s: floor((1.5 + 4 - 3) / 1) = 2
}

TEST(Refund, SlidingWindowCounterTable) {
  ManualClock clock;
  MemoryLimiter limiter(ratelimit::SlidingWindowCounter{.limit = 10, .window = 10s}, {}, clock);
  clock.set(ManualClock::time_point(5s));
  EXPECT_TRUE(limiter.allow("k", 4));  // window 0: cur = 4
  clock.set(ManualClock::time_point(12s));
  // window 1, r = 2 s: prev = 4, cur = 3 after; remaining floor((100 - 4*8) / 10) - 3 = 3.
  EXPECT_EQ(limiter.allow("k", 3).remaining, 3);
  // The refund takes the current window's 3, then 2 of the previous window's 4 (include/ratelimit/README.md "Refunds"):
  // cur = 0, prev = 2: remaining floor((100 - 2*8) / 10) = 8, reset W - r = 8 s.
  expect_state(limiter.refund("k", 5), 8, 8s);
  EXPECT_EQ(limiter.size(), 1u);  // prev still weighs: not full
}

TEST(Refund, SlidingWindowLogTable) {
  ManualClock clock;
  MemoryLimiter limiter(ratelimit::SlidingWindowLog{.limit = 5, .window = 10s}, {}, clock);
  clock.set(ManualClock::time_point(1s));
  EXPECT_TRUE(limiter.allow("k", 2));
  clock.set(ManualClock::time_point(2s));
  EXPECT_TRUE(limiter.allow("k", 2));
  clock.set(ManualClock::time_point(3s));
  EXPECT_TRUE(limiter.allow("k", 1));
  clock.set(ManualClock::time_point(3500ms));
  // Newest first: (3 s, 1) goes, then 1 of (2 s, 2): entries (1 s, 2), (2 s, 1).
  expect_state(limiter.refund("k", 2), 2, 8500ms);  // reset = 2 + 10 - 3.5
  const Decision d = limiter.allow("k", 3);           // count 3 + 3 > 5, need 1: oldest entry at 1 s
  EXPECT_FALSE(d);
  EXPECT_EQ(d.retry_after, 7500ms);
  expect_state(limiter.refund("k", 100), 5, 0s);
  EXPECT_EQ(limiter.size(), 0u);
}

// A refund writes the state at its time t (include/ratelimit/README.md "Refunds"): when the clock then steps back, time
// stands at t, not at the newest entry left, as for a fixed window.
TEST(Refund, SlidingWindowLogRefundRecordsItsWriteTime) {
  ManualClock clock;
  MemoryLimiter limiter(ratelimit::SlidingWindowLog{.limit = 2, .window = 1s}, {}, clock);
  EXPECT_TRUE(limiter.allow("k"));
  clock.set(ManualClock::time_point(500ms));
  EXPECT_TRUE(limiter.allow("k"));
  expect_state(limiter.refund("k", 1), 1, 500ms);  // (0, 1) left: 0 + 1 s - 500 ms
  clock.set(ManualClock::time_point(100ms));         // steps back: t = max(100 ms, 500 ms)
  expect_state(limiter.allow("k", 0), 1, 500ms);
  EXPECT_EQ(limiter.peek("k").reset_after, 500ms);
  // The next admitted request is an entry at 500 ms; (0, 1) leaves at 1 s.
  const Decision d = limiter.allow("k");
  EXPECT_TRUE(d);
  EXPECT_EQ(d.reset_after, 1s);
  clock.set(ManualClock::time_point(1s));
  EXPECT_EQ(limiter.allow("k", 0).remaining, 1);
  EXPECT_EQ(limiter.allow("k", 0).reset_after, 500ms);
}

TEST(Refund, CostZeroReportsAndBadInputThrows) {
  ManualClock clock;
  MemoryLimiter limiter(ratelimit::FixedWindow{.limit = 5, .window = 10s}, {.max_key_bytes = 4}, clock);
  EXPECT_TRUE(limiter.allow("k", 2));
  expect_state(limiter.refund("k", 0), 3, 10s);
  try {
    (void)limiter.refund("k", -1);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("cost:", 0), 0u) << e.what();
  }
  try {
    (void)limiter.refund("toolong", 1);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("key:", 0), 0u) << e.what();
  }
}

// ---- Reference models: straightforward, one key, monotonic time in nanoseconds. ----
namespace {

std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

struct FixedWindowModel {
  std::int64_t limit, window;
  std::map<std::int64_t, std::int64_t> count;  // window index -> admitted units
  std::int64_t& now(std::int64_t t) { return count[floor_div(t, window)]; }
  bool allow(std::int64_t t, std::int64_t n) {
    std::int64_t& c = now(t);
    if (c + n > limit) return false;
    c += n;
    return true;
  }
  void refund(std::int64_t t, std::int64_t n) { now(t) = std::max<std::int64_t>(0, now(t) - n); }
  std::int64_t remaining(std::int64_t t) { return limit - now(t); }
};

struct CreditBucketModel {  // GCRA seen as a bucket of credit in ns: full = tau, a request costs n*T
  std::int64_t burst, interval;
  std::int64_t credit = -1, last = 0;
  void refill(std::int64_t t) {
    if (credit < 0) credit = burst * interval;
    credit = std::min(burst * interval, credit + (t - last));
    last = t;
  }
  bool allow(std::int64_t t, std::int64_t n) {
    refill(t);
    if (credit < n * interval) return false;
    credit -= n * interval;
    return true;
  }
  void refund(std::int64_t t, std::int64_t n) {
    refill(t);
    credit = std::min(burst * interval, credit + n * interval);
  }
  std::int64_t remaining(std::int64_t t) {
    refill(t);
    return credit / interval;
  }
};

struct WindowCounterModel {
  std::int64_t limit, window;
  std::map<std::int64_t, std::int64_t> count;
  bool allow(std::int64_t t, std::int64_t n) {
    const std::int64_t k = floor_div(t, window), r = t - k * window;
    if (count[k - 1] * (window - r) + (count[k] + n) * window > limit * window) return false;
    count[k] += n;
    return true;
  }
  // From the current window first, the rest from the previous one (include/ratelimit/README.md "Refunds").
  void refund(std::int64_t t, std::int64_t n) {
    const std::int64_t k = floor_div(t, window);
    const std::int64_t from_current = std::min(n, count[k]);
    count[k] -= from_current;
    count[k - 1] = std::max<std::int64_t>(0, count[k - 1] - (n - from_current));
  }
  std::int64_t remaining(std::int64_t t) {
    const std::int64_t k = floor_div(t, window), r = t - k * window;
    const std::int64_t room = (limit * window - count[k - 1] * (window - r)) / window;
    return std::max<std::int64_t>(0, room - count[k]);
  }
};

struct LogModel {
  std::int64_t limit, window;
  std::vector<std::pair<std::int64_t, std::int64_t>> log;  // (time, cost), never merged
  std::int64_t live(std::int64_t t) const {
    std::int64_t sum = 0;
    for (const auto& [at, c] : log) {
      if (at > t - window) sum += c;
    }
    return sum;
  }
  bool allow(std::int64_t t, std::int64_t n) {
    std::erase_if(log, [&](const auto& e) { return e.first <= t - window; });  // time only grows here
    if (live(t) + n > limit) return false;
    if (n > 0) log.emplace_back(t, n);
    return true;
  }
  void refund(std::int64_t t, std::int64_t n) {
    for (auto it = log.rbegin(); it != log.rend() && n > 0; ++it) {
      if (it->first <= t - window) break;
      const std::int64_t take = std::min(n, it->second);
      it->second -= take;
      n -= take;
    }
  }
  std::int64_t remaining(std::int64_t t) const { return limit - live(t); }
};

template <class Policy, class Model>
void compare_random(Policy policy, Model model, unsigned seed) {
  ManualClock clock;
  MemoryLimiter limiter(policy, {}, clock);
  std::mt19937_64 rng(seed);
  std::int64_t t = 0;
  for (int step = 0; step < 20000; ++step) {
    t += static_cast<std::int64_t>(rng() % 13) * 250'000'000;  // 0..3 s in 250 ms steps: same-tick cases too
    clock.set(ManualClock::time_point(std::chrono::nanoseconds(t)));
    const auto n = static_cast<std::int64_t>(rng() % 5);
    if (rng() % 3 == 0) {
      const Decision d = limiter.refund("k", n);
      model.refund(t, n);
      ASSERT_EQ(d.remaining, model.remaining(t)) << "refund step " << step;
      ASSERT_LE(d.remaining, d.limit);
    } else {
      const Decision d = limiter.allow("k", n);
      const bool expected = model.allow(t, n);
      ASSERT_EQ(d.allowed, expected) << "allow step " << step;
      ASSERT_EQ(d.remaining, model.remaining(t)) << "allow step " << step;
    }
  }
}

}  // namespace

TEST(RefundReference, FixedWindow) {
  compare_random(ratelimit::FixedWindow{7, 10s}, FixedWindowModel{7, 10'000'000'000, {}}, 1);
}
TEST(RefundReference, Gcra) {
  compare_random(ratelimit::Gcra{.limit = 6, .period = 12s, .burst = 4}, CreditBucketModel{4, 2'000'000'000}, 2);
}
TEST(RefundReference, TokenBucket) {
  compare_random(ratelimit::TokenBucket{.capacity = 9, .refill_tokens = 3, .refill_period = 4s},
                 CreditBucketModel{9, 1'333'333'334}, 3);
}
TEST(RefundReference, SlidingWindowCounter) {
  compare_random(ratelimit::SlidingWindowCounter{8, 10s}, WindowCounterModel{8, 10'000'000'000, {}}, 4);
}
TEST(RefundReference, SlidingWindowLog) {
  compare_random(ratelimit::SlidingWindowLog{8, 10s}, LogModel{8, 10'000'000'000, {}}, 5);
}
