// ConcurrencyLimiter with an adaptive limit (include/ratelimit/concurrency/README.md "Adaptive limits in the
// limiter"): released permits feed the algorithm, a risen limit grants waiters at once, a fallen one revokes nothing,
// never more than the limit in force is granted, shadow mode enforces `permits`, bad input is refused by name.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ratelimit/concurrency.hpp>
#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>

#include "../support/join_at_exit.hpp"
#include "../support/return_at_exit.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::AdaptiveAlgorithm;
using ratelimit::ConcurrencyLimiter;
using ratelimit::ConcurrencyOptions;
using ratelimit::LatencySample;
using ratelimit::ManualClock;
using ratelimit::PermitOutcome;
using ratelimit::PermitResult;
using ratelimit::PermitStatus;
using ratelimit_test::JoinAtExit;
using ratelimit_test::ReturnAtExit;

/// What the test's algorithm saw, shared by the prototype and the limiter's clone.
struct Seen {
  std::mutex mutex;
  std::vector<LatencySample> samples;
};

/// A scripted algorithm: +1 per fast success, halved on a slow sample or a drop, within [min, max].
class StepLimit final : public AdaptiveAlgorithm {
 public:
  StepLimit(std::int64_t initial, std::int64_t min, std::int64_t max, std::chrono::nanoseconds slow,
            std::shared_ptr<Seen> seen = std::make_shared<Seen>())
      : limit_(initial), min_(min), max_(max), slow_ns_(slow.count()), seen_(std::move(seen)) {}
  [[nodiscard]] std::string_view name() const noexcept override { return "step"; }
  [[nodiscard]] std::int64_t limit() const noexcept override { return limit_; }
  std::int64_t on_sample(const LatencySample& s) override {
    {
      std::lock_guard lock(seen_->mutex);
      seen_->samples.push_back(s);
    }
    const bool bad = s.outcome == PermitOutcome::dropped || s.rtt_ns > slow_ns_;
    limit_ = bad ? std::max(min_, limit_ / 2) : std::min(max_, limit_ + 1);
    return limit_;
  }
  [[nodiscard]] std::int64_t min_rtt_ns() const noexcept override { return 1000; }
  [[nodiscard]] std::unique_ptr<AdaptiveAlgorithm> clone() const override { return std::make_unique<StepLimit>(*this); }
  [[nodiscard]] const std::shared_ptr<Seen>& seen() const { return seen_; }

 private:
  std::int64_t limit_, min_, max_, slow_ns_;
  std::shared_ptr<Seen> seen_;
};

ConcurrencyOptions adaptive(std::shared_ptr<const AdaptiveAlgorithm> algorithm, std::int64_t permits = 1000,
                            std::int64_t queue_limit = 0) {
  ConcurrencyOptions o;
  o.permits = permits;
  o.queue_limit = queue_limit;
  o.adaptive = std::move(algorithm);
  return o;
}

/// Holds a permit `for_time` on the manual clock, then releases it with `outcome`.
void hold_and_release(ManualClock& clock, PermitResult& r, std::chrono::nanoseconds for_time,
                      PermitOutcome outcome = PermitOutcome::succeeded) {
  clock.advance(for_time);
  r.permit.release(outcome);
}

TEST(AdaptiveLimiter, ReleaseGivesTheAlgorithmLatencyInFlightAndOutcome) {
  ManualClock clock;
  auto step = std::make_shared<StepLimit>(4, 1, 10, 10ms);
  ConcurrencyLimiter<ManualClock> limiter(adaptive(step), clock);
  PermitResult a = limiter.try_acquire("k");
  clock.advance(1ms);
  PermitResult b = limiter.try_acquire("other", 2);  // a second key counts in the limiter's in flight
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  EXPECT_EQ(b.limit, 4);
  hold_and_release(clock, b, 3ms, PermitOutcome::failed);
  hold_and_release(clock, a, 2ms);
  const auto& samples = step->seen()->samples;
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].rtt_ns, 3'000'000);
  EXPECT_EQ(samples[0].in_flight, 3);  // 1 of k and 2 of other, at other's grant
  EXPECT_EQ(samples[0].outcome, PermitOutcome::failed);
  EXPECT_EQ(samples[0].now_ns, 4'000'000);
  EXPECT_EQ(samples[1].rtt_ns, 6'000'000);
  EXPECT_EQ(samples[1].in_flight, 1);
  EXPECT_EQ(limiter.limit(), 6);  // two fast samples: 4 + 1 + 1
  const ratelimit::ConcurrencyStats st = limiter.stats();
  EXPECT_EQ(st.succeeded, 1u);
  EXPECT_EQ(st.failed, 1u);
  EXPECT_EQ(st.min_rtt, 1us);
  EXPECT_EQ(st.in_flight, 0);
}

TEST(AdaptiveLimiter, LimitRisesUnderLowLatencyAndQueuedWaitersAreGrantedAtOnce) {
  ManualClock clock;
  auto step = std::make_shared<StepLimit>(2, 1, 10, 10ms);
  std::vector<PermitResult> k_answers, b_answers;
  ConcurrencyLimiter<ManualClock> limiter(adaptive(step, 1000, 10), clock);
  const ReturnAtExit return_answers{k_answers, b_answers};
  PermitResult k1 = limiter.try_acquire("k");
  PermitResult k2 = limiter.try_acquire("k");
  PermitResult b1 = limiter.try_acquire("b");
  PermitResult b2 = limiter.try_acquire("b");
  ASSERT_TRUE(k1 && k2 && b1 && b2);
  EXPECT_EQ(limiter.try_acquire("k").status, PermitStatus::busy);
  for (int i = 0; i < 2; ++i) {
    limiter.acquire_async("k", 1, 1s, [&](PermitResult r) { k_answers.push_back(std::move(r)); });
  }
  limiter.acquire_async("b", 1, 1s, [&](PermitResult r) { b_answers.push_back(std::move(r)); });
  EXPECT_EQ(limiter.queued("k"), 2);
  EXPECT_EQ(limiter.stats().queued, 3);

  // A fast release of k: the limit rises to 3, so both of k's waiters fit (1 held + 2), and b's waiter too
  // (another key, granted by the rise, not by a release of its own).
  hold_and_release(clock, k1, 1ms);
  EXPECT_EQ(limiter.limit(), 3);
  ASSERT_EQ(k_answers.size(), 2u);
  for (const PermitResult& r : k_answers) {
    EXPECT_EQ(r.status, PermitStatus::acquired);
    EXPECT_LE(r.in_flight, r.limit);
  }
  EXPECT_EQ(k_answers[1].in_flight, 3);
  EXPECT_EQ(k_answers[1].limit, 3);
  ASSERT_EQ(b_answers.size(), 1u);
  EXPECT_EQ(b_answers[0].status, PermitStatus::acquired);
  EXPECT_EQ(b_answers[0].in_flight, 3);
  EXPECT_EQ(limiter.in_flight("k"), 3);
  EXPECT_EQ(limiter.stats().queued, 0);
}

TEST(AdaptiveLimiter, RiseGrantsBlockedCallersInQueueOrder) {
  ManualClock clock;
  ConcurrencyLimiter<ManualClock> limiter(adaptive(std::make_shared<StepLimit>(1, 1, 10, 10ms), 1000, 10), clock);
  PermitResult held_k = limiter.try_acquire("k");
  PermitResult held_other = limiter.try_acquire("other");
  ASSERT_TRUE(held_k && held_other);
  std::vector<PermitResult> granted(2);  // by waiter; kept held, so that the count below sees them
  std::vector<std::thread> waiters;
  // A failed ASSERT leaves a waiter blocked on a clock that stands still: past its deadline, it returns.
  const JoinAtExit join_waiters(waiters, [&] { clock.advance(10s); });
  for (std::size_t i = 0; i < 2; ++i) {
    waiters.emplace_back([&, i] {
      granted[i] = limiter.acquire("k", 1, 10s, [](ratelimit::PermitWait& w, std::chrono::nanoseconds) {
        w.wait_for(1ms);  // the manual clock does not move: wait for the grant only
      });
    });
    while (limiter.queued("k") != static_cast<std::int64_t>(i) + 1) std::this_thread::yield();  // queued 0, then 1
  }
  // Fast releases of another key: 1 -> 2 grants waiter 0 alone; 2 -> 3 grants waiter 1.
  hold_and_release(clock, held_other, 1ms);
  EXPECT_EQ(limiter.queued("k"), 1);
  PermitResult again = limiter.try_acquire("other");
  ASSERT_TRUE(again);
  hold_and_release(clock, again, 1ms);
  for (auto& t : waiters) t.join();
  ASSERT_TRUE(granted[0] && granted[1]);
  EXPECT_EQ(granted[0].in_flight, 2);  // the grant order: the oldest first
  EXPECT_EQ(granted[0].limit, 2);
  EXPECT_EQ(granted[1].in_flight, 3);
  EXPECT_EQ(granted[1].limit, 3);
  EXPECT_EQ(limiter.in_flight("k"), 3);
}

TEST(AdaptiveLimiter, LimitFallsUnderHighLatencyAndDropsButNothingHeldIsRevoked) {
  ManualClock clock;
  ConcurrencyLimiter<ManualClock> limiter(adaptive(std::make_shared<StepLimit>(8, 2, 10, 10ms)), clock);
  std::vector<PermitResult> held;
  for (int i = 0; i < 8; ++i) held.push_back(limiter.try_acquire("k"));
  for (const PermitResult& r : held) ASSERT_TRUE(r);
  hold_and_release(clock, held[0], 50ms);  // slow: 8 -> 4
  EXPECT_EQ(limiter.limit(), 4);
  EXPECT_EQ(limiter.in_flight("k"), 7);  // the 7 held stay held
  PermitResult refused = limiter.try_acquire("k");
  EXPECT_EQ(refused.status, PermitStatus::busy);
  EXPECT_EQ(refused.limit, 4);
  held[1].permit.release(PermitOutcome::dropped);  // a drop: 4 -> 2, however fast
  EXPECT_EQ(limiter.limit(), 2);
  for (std::size_t i = 2; i < 7; ++i) hold_and_release(clock, held[i], 50ms);  // slow: stays at its floor, 2
  EXPECT_EQ(limiter.limit(), 2);
  EXPECT_EQ(limiter.in_flight("k"), 1);
  PermitResult one = limiter.try_acquire("k");
  EXPECT_TRUE(one);  // 1 held < 2
  EXPECT_EQ(limiter.try_acquire("k").status, PermitStatus::busy);
  EXPECT_EQ(limiter.stats().dropped, 1u);
}

TEST(AdaptiveLimiter, AimdStaysWithinItsBoundsAndPermitsCapsIt) {
  ManualClock clock;
  ratelimit::AimdOptions o;
  o.initial_limit = 4;
  o.min_limit = 2;
  o.max_limit = 12;
  o.latency_threshold = 20ms;
  o.window_samples = 1;  // a decision per sample
  ConcurrencyLimiter<ManualClock> limiter(adaptive(std::make_shared<ratelimit::AimdLimit>(o), 8), clock);
  std::int64_t highest = 0;
  for (int round = 0; round < 200; ++round) {  // fast and busy: the limit climbs, capped by permits = 8
    std::vector<PermitResult> held;
    for (PermitResult r = limiter.try_acquire("k"); r; r = limiter.try_acquire("k")) held.push_back(std::move(r));
    for (PermitResult& r : held) hold_and_release(clock, r, 1ms);
    highest = std::max(highest, limiter.stats().adaptive_limit);
    EXPECT_LE(limiter.limit(), 8);
  }
  EXPECT_EQ(limiter.limit(), 8);
  EXPECT_GT(limiter.stats().adaptive_limit, 8);  // the algorithm went beyond the ceiling ...
  EXPECT_LE(highest, 12);                        // ... never beyond its own bound
  for (int round = 0; round < 200; ++round) {    // slow: the limit falls to its floor and stays
    PermitResult r = limiter.try_acquire("k");
    ASSERT_TRUE(r);
    hold_and_release(clock, r, 100ms);
    EXPECT_GE(limiter.stats().adaptive_limit, 2);
  }
  EXPECT_EQ(limiter.limit(), 2);
}

TEST(AdaptiveLimiter, ShadowEnforcesPermitsAndReportsTheLimitItWouldUse) {
  ManualClock clock;
  std::vector<std::pair<std::int64_t, std::int64_t>> changes;
  ConcurrencyOptions o = adaptive(std::make_shared<StepLimit>(2, 1, 10, 10ms), 3);
  o.adaptive_shadow = true;
  o.on_limit_change = [&](std::int64_t from, std::int64_t to) { changes.emplace_back(from, to); };
  ConcurrencyLimiter<ManualClock> limiter(o, clock);
  EXPECT_EQ(limiter.limit(), 3);  // permits, not the algorithm's 2
  for (int i = 0; i < 5; ++i) {
    PermitResult r = limiter.try_acquire("k");
    ASSERT_TRUE(r);
    hold_and_release(clock, r, 1ms);
  }
  const ratelimit::ConcurrencyStats st = limiter.stats();
  EXPECT_TRUE(st.shadow);
  EXPECT_EQ(st.adaptive_limit, 7);
  EXPECT_EQ(st.limit, 3);
  std::vector<PermitResult> held;
  for (int i = 0; i < 3; ++i) held.push_back(limiter.try_acquire("k"));
  EXPECT_EQ(limiter.try_acquire("k").status, PermitStatus::busy);  // 3 enforced though 7 would pass
  ASSERT_EQ(changes.size(), 5u);
  EXPECT_EQ(changes.front(), std::make_pair(std::int64_t{2}, std::int64_t{3}));
  EXPECT_EQ(changes.back(), std::make_pair(std::int64_t{6}, std::int64_t{7}));
}

TEST(AdaptiveLimiter, LayeredRefusalReturnsThePermitWithoutASample) {
  ManualClock clock;
  auto step = std::make_shared<StepLimit>(2, 1, 10, 10ms);
  ratelimit::MemoryLimiter<ratelimit::FixedWindow, ManualClock> rate{
      ratelimit::FixedWindow{.limit = 1, .window = 1min}, {}, clock};
  ratelimit::LimiterLayer<ratelimit::MemoryLimiter<ratelimit::FixedWindow, ManualClock>> rate_layer{rate, "rate"};
  ConcurrencyLimiter<ManualClock> running(adaptive(step), clock);
  ratelimit::ConcurrencyLayer running_layer("running", running);
  ratelimit::AdmittedRequest first = ratelimit::check_layers({{&rate_layer, "u"}}, {{&running_layer, "u"}});
  ASSERT_TRUE(first);
  const ratelimit::AdmittedRequest second = ratelimit::check_layers({{&rate_layer, "u"}}, {{&running_layer, "u"}});
  EXPECT_FALSE(second);  // over the rate: its permit went back unused
  EXPECT_EQ(running.in_flight("u"), 1);
  EXPECT_TRUE(step->seen()->samples.empty());
  EXPECT_EQ(running.stats().unused, 1u);
  clock.advance(2ms);
  first.permits.at(0).release(PermitOutcome::succeeded);  // the admitted request reports its outcome
  ASSERT_EQ(step->seen()->samples.size(), 1u);
  EXPECT_EQ(step->seen()->samples[0].rtt_ns, 2'000'000);
}

TEST(AdaptiveLimiter, BadInputIsRefusedByName) {
  ManualClock clock;
  auto step = std::make_shared<StepLimit>(4, 1, 10, 10ms);
  ConcurrencyLimiter<ManualClock> limiter(adaptive(step), clock);
  PermitResult r = limiter.try_acquire("k");
  ASSERT_TRUE(r);
  try {
    r.permit.release(static_cast<PermitOutcome>(7));
    FAIL() << "an outcome outside the enum was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("outcome:", 0), 0u) << e.what();
  }
  EXPECT_FALSE(r.permit.held());  // the units went back ...
  EXPECT_EQ(limiter.in_flight("k"), 0);
  EXPECT_TRUE(step->seen()->samples.empty());  // ... without a sample
  EXPECT_EQ(limiter.stats().unused, 1u);

  const auto throws_naming = [&](ConcurrencyOptions o, const std::string& field) {
    try {
      ConcurrencyLimiter<ManualClock> bad(std::move(o), clock);
      ADD_FAILURE() << "accepted, expected " << field;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(field + ":", 0), 0u) << e.what();
    }
  };
  throws_naming(adaptive(step, 3), "ConcurrencyOptions.permits");  // below the initial limit 4
  ConcurrencyOptions shadow_alone;
  shadow_alone.adaptive_shadow = true;
  throws_naming(shadow_alone, "ConcurrencyOptions.adaptive_shadow");
  ConcurrencyOptions shadow_low = adaptive(step, 3);  // in shadow, permits is what is enforced: any >= 1
  shadow_low.adaptive_shadow = true;
  EXPECT_NO_THROW(ConcurrencyLimiter<ManualClock>(shadow_low, clock));
}

TEST(AdaptiveLimiter, SixteenThreadsNeverHoldMoreThanTheLimitInForce) {
  ManualClock clock;
  constexpr std::int64_t kCeiling = 12;
  ConcurrencyLimiter<ManualClock> limiter(adaptive(std::make_shared<StepLimit>(4, 1, 16, 3ms), kCeiling, 64), clock);
  const char* const keys[] = {"a", "b"};
  std::atomic<std::int64_t> held[2] = {0, 0};  // the test's own count of permits held per key
  std::atomic<std::int64_t> most_held{0}, grants{0}, over_limit{0}, releases{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(static_cast<std::uint32_t>(t));
      for (int i = 0; i < 400; ++i) {
        const std::size_t k = random() % 2;
        PermitResult r =
            random() % 4 == 0
                ? limiter.try_acquire(keys[k])
                : limiter.acquire(keys[k], 1, 20ms,
                                  [](ratelimit::PermitWait& w, std::chrono::nanoseconds) { w.wait_for(200us); });
        if (!r) {
          clock.advance(100us);  // let deadlines pass
          continue;
        }
        grants.fetch_add(1);
        if (r.in_flight > r.limit || r.limit > kCeiling) over_limit.fetch_add(1);  // both read under the lock
        const std::int64_t now_held = held[k].fetch_add(1) + 1;
        std::int64_t seen = most_held.load();
        while (now_held > seen && !most_held.compare_exchange_weak(seen, now_held)) {
        }
        // Hold it while others run.
        for (auto y = static_cast<int>(random() % 8); y > 0; --y) std::this_thread::yield();
        clock.advance(std::chrono::microseconds(random() % 400));
        held[k].fetch_sub(1);
        const auto outcome = static_cast<PermitOutcome>(random() % 3);
        r.permit.release(outcome);
        releases.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(over_limit.load(), 0);
  EXPECT_LE(most_held.load(), kCeiling);
  EXPECT_GT(grants.load(), 1000);
  const ratelimit::ConcurrencyStats st = limiter.stats();
  EXPECT_EQ(st.in_flight, 0);
  EXPECT_EQ(st.queued, 0);
  EXPECT_EQ(static_cast<std::int64_t>(st.succeeded + st.failed + st.dropped), releases.load());
  EXPECT_GE(st.adaptive_limit, 1);
  EXPECT_LE(st.adaptive_limit, 16);
}

}  // namespace
