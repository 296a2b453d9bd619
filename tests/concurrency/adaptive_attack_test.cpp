// Edge cases of ConcurrencyLimiter with an adaptive limit found by attacking it
// (include/ratelimit/concurrency/README.md "Adaptive limits in the limiter"): races between a queued waiter and
// a rise of the limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ratelimit/concurrency.hpp>

#include "../support/return_at_exit.hpp"

namespace {
namespace attack {  // own names in a unity build

using namespace std::chrono_literals;
using ratelimit::AdaptiveAlgorithm;
using ratelimit::ConcurrencyLimiter;
using ratelimit::ConcurrencyOptions;
using ratelimit::LatencySample;
using ratelimit::ManualClock;
using ratelimit::PermitResult;
using ratelimit::PermitStatus;
using ratelimit_test::ReturnAtExit;

/// A clock standing still that runs a hook once, inside its `nth` reading on the thread that armed it: a test
/// stops a limiter at a chosen point of an operation (under a shard's lock) and acts on another thread there.
class HookClock {
 public:
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<HookClock, duration>;

  HookClock() : state_(std::make_shared<State>()) {}
  [[nodiscard]] time_point now() const {
    State& s = *state_;
    if (s.armed.load() && s.thread == std::this_thread::get_id() && --s.calls_left == 0) {
      s.armed.store(false);
      s.hook();
    }
    return time_point(duration(s.now_ns.load()));
  }
  /// Runs `hook` inside the `nth` (>= 1) reading of the clock on the calling thread from now on.
  void arm(int nth, std::function<void()> hook) {
    state_->thread = std::this_thread::get_id();
    state_->calls_left = nth;
    state_->hook = std::move(hook);
    state_->armed.store(true);
  }
  void advance(duration d) { state_->now_ns.fetch_add(d.count()); }

 private:
  struct State {
    std::atomic<std::int64_t> now_ns{0};
    std::atomic<bool> armed{false};
    std::thread::id thread{};
    int calls_left = 0;
    std::function<void()> hook;
  };
  std::shared_ptr<State> state_;
};
static_assert(ratelimit::Clock<HookClock>);

/// An algorithm whose limit starts at `initial` and takes `after` at the first sample.
class JumpLimit final : public AdaptiveAlgorithm {
 public:
  JumpLimit(std::int64_t initial, std::int64_t after) : limit_(initial), after_(after) {}
  [[nodiscard]] std::string_view name() const noexcept override { return "jump"; }
  [[nodiscard]] std::int64_t limit() const noexcept override { return limit_; }
  std::int64_t on_sample(const LatencySample&) override { return limit_ = after_; }
  [[nodiscard]] std::unique_ptr<AdaptiveAlgorithm> clone() const override { return std::make_unique<JumpLimit>(*this); }

 private:
  std::int64_t limit_, after_;
};

// A waiter queues under the limit it read at the start of its acquisition; a release of another key that raises
// the limit meanwhile (between that reading and the waiter's entry in the queue, on another shard) looks for
// waiters to grant and finds none yet. The waiter must still be granted at once: the limit in force fits it.
TEST(AdaptiveAttack, RiseDuringAnEnqueueOnAnotherShardGrantsTheNewWaiter) {
  for (int attempt = 0; attempt < 20; ++attempt) {  // until "x" and "y" fall on different shards
    std::optional<PermitResult> answer;             // outlives the limiter: its destructor may answer the waiter
    std::future<void> release;
    HookClock clock;
    ConcurrencyOptions o;
    o.permits = 10;
    o.queue_limit = 10;
    o.shards = 64;
    o.adaptive = std::make_shared<JumpLimit>(1, 5);
    ConcurrencyLimiter<HookClock> limiter(o, clock);
    // Before the limiter goes, on every way out of the attempt (`continue`, a failed ASSERT), a permit granted
    // to the waiter goes back: the limiter must outlive its permits. With both keys on one shard the release
    // also grants the waiter, once the hook lets go of the lock.
    const ReturnAtExit return_answer{answer};
    PermitResult y = limiter.try_acquire("y");
    ASSERT_TRUE(y);
    bool other_shard = false;
    // The acquisition reads the clock once for its deadline, then once under the shard's lock, after it read
    // the limit (1) and before it queues: there, another thread releases y (the limit rises to 5).
    clock.arm(2, [&] {
      release = std::async(std::launch::async, [&] { y.permit.release(); });
      other_shard = release.wait_for(2s) == std::future_status::ready;  // same shard: blocked on the lock
    });
    limiter.acquire_async("x", 3, 1h, [&](PermitResult r) { answer = std::move(r); });
    release.wait();
    if (!other_shard) continue;
    ASSERT_EQ(limiter.limit(), 5);
    ASSERT_TRUE(answer.has_value()) << "the waiter of 3 units stays queued under a limit of 5 with nothing in "
                                       "flight; queued units: "
                                    << limiter.queued("x");
    EXPECT_EQ(answer->status, PermitStatus::acquired);
    EXPECT_EQ(answer->limit, 5);
    return;
  }
  GTEST_SKIP() << "x and y shared a shard in every attempt";
}

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// A permit held for INT64_MAX ns (a clock moved that far) gives a probed algorithm a min RTT of 2^63 ns as a
// double; its conversion to int64 must saturate, not wrap to a negative min RTT in `stats()`.
TEST(AdaptiveAttack, MinRttOfAnRttOfInt64MaxStaysPositive) {
  ManualClock clock;
  ConcurrencyOptions o;
  o.permits = 100;
  o.adaptive = std::make_shared<ratelimit::GradientLimit>(ratelimit::GradientOptions{.window_samples = 1});
  ConcurrencyLimiter<ManualClock> limiter(o, clock);
  PermitResult r = limiter.try_acquire("k");
  ASSERT_TRUE(r);
  clock.advance(std::chrono::nanoseconds(kMax));
  r.permit.release();
  EXPECT_EQ(limiter.stats().min_rtt.count(), kMax);
}

// With `permits` up to INT64_MAX two keys may each hold nearly INT64_MAX units: the units in flight over all keys
// in `stats()` saturate at INT64_MAX (no signed overflow, no wrapped negative count), on one shard or two.
TEST(AdaptiveAttack, StatsInFlightSaturatesWhenKeysTogetherHoldMoreThanInt64Max) {
  for (const std::size_t shards : {std::size_t{1}, std::size_t{65536}}) {
    ManualClock clock;
    ConcurrencyOptions o;
    o.permits = kMax;
    o.shards = shards;
    o.adaptive = std::make_shared<ratelimit::AimdLimit>(
        ratelimit::AimdOptions{.initial_limit = kMax, .min_limit = 1, .max_limit = kMax});
    ConcurrencyLimiter<ManualClock> limiter(o, clock);
    PermitResult a = limiter.try_acquire("a", kMax - 1);
    PermitResult b = limiter.try_acquire("b", kMax - 1);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(limiter.stats().in_flight, kMax) << shards << " shard(s)";
    a.permit.release();
    EXPECT_EQ(limiter.stats().in_flight, kMax - 1) << shards << " shard(s)";
  }
}

// Callbacks that release their permit at once, behind a long queue, while the limit rises with every release: each
// release grants the next waiter, whose callback releases again. All are granted, once each, without the
// stack growing with the queue (an optimised build overflowed it at 30,000 such waiters).
TEST(AdaptiveAttack, CallbacksReleasingInlineBehindALongQueueDoNotOverflowTheStack) {
  constexpr int kWaiters = 40'000;  // every release scans the queue: quadratic, a few seconds
  ManualClock clock;
  ConcurrencyOptions o;
  o.permits = 1000;
  o.queue_limit = kWaiters;
  o.adaptive = std::make_shared<ratelimit::AimdLimit>(
      ratelimit::AimdOptions{.initial_limit = 1, .latency_threshold = 1ms, .window_samples = 1});
  ConcurrencyLimiter<ManualClock> limiter(o, clock);
  PermitResult first = limiter.try_acquire("k");
  ASSERT_TRUE(first);
  std::vector<int> order;
  order.reserve(kWaiters);
  for (int i = 0; i < kWaiters; ++i) {
    limiter.acquire_async("k", 1, 1h, [&order, i](PermitResult r) {
      if (r) order.push_back(i);
      r.permit.release();
    });
  }
  first.permit.release();
  ASSERT_EQ(order.size(), static_cast<std::size_t>(kWaiters));
  std::sort(order.begin(), order.end());
  for (int i = 0; i < kWaiters; ++i) ASSERT_EQ(order[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(limiter.stats().in_flight, 0);
  EXPECT_EQ(limiter.stats().queued, 0);
}

}  // namespace attack
}  // namespace
