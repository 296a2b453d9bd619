// Shaper (include/ratelimit/README.md "Shaping"): nginx limit_req's burst and delay on GCRA. The three outcomes at
// their boundaries, exactly (last passed, first delayed, last delayed, first refused, in requests and in time),
// nginx's own arithmetic replayed side by side, cancelling a delayed slot, and bad rules named by field.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>

#include <ratelimit/ratelimit.hpp>
#include <ratelimit/shaper.hpp>

namespace ratelimit {
// GoogleTest prints an outcome by name.
inline void PrintTo(ShapeOutcome outcome, std::ostream* out) { *out << to_string(outcome); }
}  // namespace ratelimit

namespace {

using namespace std::chrono_literals;
using ratelimit::Gcra;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;
using ratelimit::ShapeOutcome;
using ratelimit::Shaper;
using ratelimit::ShapingRule;

using Limiter = MemoryLimiter<Gcra, ManualClock>;

// rate=10r/s burst=5 delay=2: T = 100 ms, the limiter's GCRA burst 3 (tau 300 ms), max_delay 300 ms.
constexpr ShapingRule kRule{.limit = 10, .period = 1s, .burst = 5, .delay = 2};

class ShapingShaper : public ::testing::Test {
 protected:
  ManualClock clock;
  Limiter limiter{kRule.gcra(), {}, clock};
  Shaper<Limiter> shaper{limiter, kRule};
};

TEST_F(ShapingShaper, MapsTheRuleOntoGcra) {
  EXPECT_EQ(kRule.gcra(), (Gcra{.limit = 10, .period = 1s, .burst = 3}));
  EXPECT_EQ(shaper.max_delay(), 300ms);
}

TEST_F(ShapingShaper, OutcomesAtTheirBoundariesInRequests) {
  // At one instant from idle: delay + 1 = 3 pass, burst - delay = 3 are delayed by T, 2T, 3T, the rest refused.
  for (int k = 0; k <= 2; ++k) {
    const ratelimit::Shaped s = shaper.shape("k");
    EXPECT_EQ(s.outcome, ShapeOutcome::passed) << "request " << k;
    EXPECT_EQ(s.delay, 0ns);
    EXPECT_TRUE(s.reservation.ok());
  }
  for (int k = 3; k <= 5; ++k) {
    const ratelimit::Shaped s = shaper.shape("k");
    EXPECT_EQ(s.outcome, ShapeOutcome::delayed) << "request " << k;
    EXPECT_EQ(s.delay, (k - 2) * 100ms) << "request " << k;
    EXPECT_EQ(s.retry_after, 0ns);
  }
  for (int k = 6; k <= 7; ++k) {
    const ratelimit::Shaped s = shaper.shape("k");
    EXPECT_EQ(s.outcome, ShapeOutcome::refused) << "request " << k;
    EXPECT_FALSE(s);
    EXPECT_FALSE(s.reservation.ok());
    EXPECT_EQ(s.delay, 0ns);
    EXPECT_EQ(s.retry_after, 100ms) << "request " << k << ": a refusal books nothing";
  }
}

TEST_F(ShapingShaper, OutcomesAtTheirBoundariesInTime) {
  for (int k = 0; k < 6; ++k) ASSERT_TRUE(shaper.shape("k"));  // TAT = 600 ms
  clock.advance(99ms);
  const ratelimit::Shaped refused = shaper.shape("k");  // needs 301 ms
  EXPECT_EQ(refused.outcome, ShapeOutcome::refused);
  EXPECT_EQ(refused.retry_after, 1ms);
  clock.advance(1ms);
  const ratelimit::Shaped last_delayed = shaper.shape("k");  // needs exactly max_delay
  EXPECT_EQ(last_delayed.outcome, ShapeOutcome::delayed);
  EXPECT_EQ(last_delayed.delay, 300ms);
  // TAT 700 ms: a request passes once TAT + T - tau <= t, at 500 ms; 1 ns before, it waits 1 ns.
  clock.set(ManualClock::time_point(500ms - 1ns));
  const ratelimit::Shaped first_delayed = shaper.shape("k", 1);
  EXPECT_EQ(first_delayed.outcome, ShapeOutcome::delayed);
  EXPECT_EQ(first_delayed.delay, 1ns);
  ratelimit::Shaped booked = shaper.shape("k");  // TAT 900 ms now
  EXPECT_EQ(booked.delay, 100ms + 1ns);
  clock.set(ManualClock::time_point(700ms));
  EXPECT_EQ(shaper.shape("k").outcome, ShapeOutcome::passed) << "last passed: TAT 900 + T - tau = 700 ms";
  EXPECT_EQ(shaper.shape("k").delay, 100ms) << "first delayed after it";
}

TEST_F(ShapingShaper, CancellingADelayedRequestGivesItsSlotToTheNext) {
  for (int k = 0; k < 5; ++k) ASSERT_TRUE(shaper.shape("k"));
  ratelimit::Shaped last = shaper.shape("k");
  ASSERT_EQ(last.delay, 300ms);
  EXPECT_EQ(shaper.shape("k").outcome, ShapeOutcome::refused);
  last.reservation.cancel();  // the client went away while delayed
  const ratelimit::Shaped next = shaper.shape("k");
  EXPECT_EQ(next.outcome, ShapeOutcome::delayed);
  EXPECT_EQ(next.delay, 300ms);
}

TEST_F(ShapingShaper, CostsAboveDelayPlusOneAreNeverAdmitted) {
  const ratelimit::Shaped s = shaper.shape("k", 4);
  EXPECT_EQ(s.outcome, ShapeOutcome::refused);
  EXPECT_EQ(s.retry_after, ratelimit::Decision::never);
  EXPECT_EQ(shaper.shape("k", 3).outcome, ShapeOutcome::passed);
  EXPECT_EQ(shaper.shape("k", 3).delay, 300ms);
}

TEST(ShapingShaperModes, NodelayAndNoBurst) {
  ManualClock clock;
  const ShapingRule nodelay{.limit = 10, .period = 1s, .burst = 3, .delay = 3};
  Limiter a(nodelay.gcra(), {}, clock);
  Shaper<Limiter> pass_or_refuse(a, nodelay);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(pass_or_refuse.shape("k").outcome, ShapeOutcome::passed) << k;
  EXPECT_EQ(pass_or_refuse.shape("k").retry_after, 100ms);
  const ShapingRule plain{.limit = 10, .period = 1s, .burst = 0, .delay = 0};
  Limiter b(plain.gcra(), {}, clock);
  Shaper<Limiter> rate_only(b, plain);
  EXPECT_EQ(rate_only.max_delay(), 0ns);
  EXPECT_EQ(rate_only.shape("k").outcome, ShapeOutcome::passed);
  EXPECT_EQ(rate_only.shape("k").outcome, ShapeOutcome::refused);
}

/// nginx's limit_req arithmetic (ngx_http_limit_req_module.c): excess in thousandths of a request, decaying by the
/// rate per elapsed millisecond; refused when above burst, delayed by (excess - delay) / rate when above delay.
struct NginxLimitReq {
  std::int64_t rate_milli_per_s, burst, delay;  // rate in thousandths of a request per second
  std::int64_t excess = 0, last_ms = 0;
  bool seen = false;
  /// -1: refused (503/429); else the delay in ms.
  std::int64_t request(std::int64_t now_ms) {
    std::int64_t e = 0;
    if (seen) {
      e = std::max<std::int64_t>(0, excess - rate_milli_per_s * (now_ms - last_ms) / 1000 + 1000);
      if (e > burst * 1000) return -1;
    }
    seen = true;
    excess = e;
    last_ms = now_ms;
    return e <= delay * 1000 ? 0 : (e - delay * 1000) * 1000 / rate_milli_per_s;
  }
};

TEST(ShapingShaperNginx, AgreesWithNginxArithmeticOnRandomArrivals) {
  for (const auto& [burst, delay] : {std::pair{5, 2}, std::pair{12, 8}, std::pair{0, 0}, std::pair{4, 0}}) {
    ManualClock clock;
    const ShapingRule rule{.limit = 10, .period = 1s, .burst = burst, .delay = delay};
    Limiter limiter(rule.gcra(), {}, clock);
    Shaper<Limiter> shaper(limiter, rule);
    NginxLimitReq nginx{.rate_milli_per_s = 10'000, .burst = burst, .delay = delay};
    std::mt19937 random(static_cast<unsigned>(burst * 100 + delay));
    std::uniform_int_distribution<int> fast_ms(0, 60);   // about 30 per second: the burst fills up
    std::uniform_int_distribution<int> slow_ms(0, 300);  // about 7 per second: it drains
    std::int64_t now_ms = 0;
    std::map<ShapeOutcome, int> seen;
    for (int i = 0; i < 3000; ++i) {
      now_ms += i % 7 == 0 ? 0 : ((i / 100) % 2 == 0 ? fast_ms(random) : slow_ms(random));  // some at once
      clock.set(ManualClock::time_point(std::chrono::milliseconds(now_ms)));
      const std::int64_t expected = nginx.request(now_ms);
      const ratelimit::Shaped s = shaper.shape("k");
      if (expected < 0) {
        ASSERT_EQ(s.outcome, ShapeOutcome::refused) << "request " << i << " at " << now_ms << " ms, burst " << burst;
      } else {
        ASSERT_EQ(s.outcome, expected == 0 ? ShapeOutcome::passed : ShapeOutcome::delayed)
            << "request " << i << " at " << now_ms << " ms, burst " << burst;
        ASSERT_EQ(s.delay, std::chrono::milliseconds(expected)) << "request " << i;
      }
      ++seen[s.outcome];
    }
    EXPECT_GT(seen[ShapeOutcome::passed], 50);
    EXPECT_GT(seen[ShapeOutcome::refused], 50);
    if (burst > delay) {
      EXPECT_GT(seen[ShapeOutcome::delayed], 50);
    }
  }
}

/// Expects `make` to throw std::invalid_argument whose message starts with `field`.
template <class F>
void expect_names(F make, const std::string& field) {
  try {
    make();
    ADD_FAILURE() << "accepted; expected an error naming " << field;
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind(field, 0), 0U) << e.what();
  }
}

TEST(ShapingShaperInput, BadRulesNameTheirField) {
  expect_names([] { (void)ShapingRule{.limit = 10, .period = 1s, .burst = 5, .delay = -1}.gcra(); },
               "ShapingRule.delay");
  expect_names([] { (void)ShapingRule{.limit = 10, .period = 1s, .burst = -1, .delay = 0}.gcra(); },
               "ShapingRule.burst");
  expect_names([] { (void)ShapingRule{.limit = 10, .period = 1s, .burst = 2, .delay = 3}.gcra(); },
               "ShapingRule.burst");
  expect_names([] { (void)ShapingRule{.limit = 0, .period = 1s, .burst = 2, .delay = 1}.gcra(); }, "ShapingRule.limit");
  expect_names([] { (void)ShapingRule{.limit = 10, .period = -1s, .burst = 2, .delay = 1}.gcra(); },
               "ShapingRule.period");
  expect_names([] { (void)ShapingRule{.limit = 1, .period = 1s, .burst = INT64_MAX / 2, .delay = 1}.gcra(); },
               "ShapingRule.burst");
  // At the end of int64, `burst + 1` and `delay + 1` must not wrap into a rule that passes, or a message about
  // a negative delay.
  expect_names([] { (void)ShapingRule{.limit = 5, .period = 1s, .burst = INT64_MAX, .delay = 1}.gcra(); },
               "ShapingRule.burst");
  expect_names([] { (void)ShapingRule{.limit = 5, .period = 1s, .burst = INT64_MAX, .delay = INT64_MAX}.gcra(); },
               "ShapingRule.delay: the policy's longest wait");
  ManualClock clock;
  Limiter other(Gcra{.limit = 10, .period = 1s, .burst = 5}, {}, clock);
  expect_names([&] { Shaper<Limiter> s(other, kRule); }, "ShapingRule");
  Limiter right(kRule.gcra(), {}, clock);
  Shaper<Limiter> shaper(right, kRule);
  expect_names([&] { (void)shaper.shape("k", -1); }, "cost");
}

}  // namespace
