// Reserve, cancel and settle on RedisLimiter (include/ratelimit/redis/README.md "Reservations and settling"): exact
// against the formulas of include/ratelimit/README.md "Reservations" and "Settling after the response" at a 1 us tick
// (ManualClock, client time), their boundaries, bad input, and what a Redis fault does to each.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis.hpp>

#include "redis_server.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::FailurePolicy;
using ratelimit::ManualClock;
using ratelimit::Reservation;
using ratelimit::redis::RedisLimiter;

// T = 100 ms, B = 3, tau = 300 ms.
constexpr ratelimit::Gcra kGcra{.limit = 10, .period = 1s, .burst = 3};
constexpr auto kT = 100ms;

/// The invalid_argument `f` throws names `field`.
template <class F>
void expect_invalid(F&& f, const std::string& field) {
  try {
    f();
    ADD_FAILURE() << "no std::invalid_argument naming " << field;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

class ReserveRedis : public testing::Test {
 protected:
  void SetUp() override {
    RATELIMIT_REQUIRE_REDIS();
    ratelimit_test::at(clock_, 1000s);
  }
  template <class P>
  RedisLimiter<P, ManualClock> limiter(P policy) {
    return RedisLimiter<P, ManualClock>(policy, ratelimit_test::client_options(*ratelimit_test::shared_redis()),
                                        clock_);
  }
  ManualClock clock_;
};

TEST_F(ReserveRedis, BooksSlotsOneEmissionIntervalApart) {
  auto l = limiter(kGcra);
  for (int i = 0; i < 3; ++i) {  // the burst: no wait
    const Reservation r = l.reserve("k");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.delay(), 0ns);
  }
  const Reservation fourth = l.reserve("k");
  ASSERT_TRUE(fourth.ok());
  EXPECT_EQ(fourth.delay(), kT);
  // The cost-0 view after the booking: the backlog 4T is beyond tau, so nothing remains and a check waits T.
  EXPECT_FALSE(fourth.decision().allowed);
  EXPECT_EQ(fourth.decision().remaining, 0);
  EXPECT_EQ(fourth.decision().retry_after, kT);
  EXPECT_EQ(fourth.decision().reset_after, 4 * kT);
  const Reservation fifth = l.reserve("k", 2);
  ASSERT_TRUE(fifth.ok());
  EXPECT_EQ(fifth.delay(), 3 * kT);
  // A check waits for the booked slots too.
  const Decision d = l.allow("k");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 4 * kT);
  clock_.advance(4 * kT);
  EXPECT_TRUE(l.allow("k").allowed);
}

TEST_F(ReserveRedis, CostAboveTheBurstIsRefusedWithNeverAndBooksNothing) {
  auto l = limiter(kGcra);
  const Reservation r = l.reserve("k", 4);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.delay(), Decision::never);
  EXPECT_EQ(l.peek("k").remaining, 3);
}

TEST_F(ReserveRedis, MaxDelayBoundary) {
  auto l = limiter(kGcra);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(l.reserve("k").ok());
  const Reservation short_of = l.reserve("k", 1, kT - 1us);
  EXPECT_FALSE(short_of.ok());
  EXPECT_EQ(short_of.delay(), kT);                           // what it would have needed
  EXPECT_EQ(short_of.decision().reset_after, 3 * kT);        // nothing written
  const Reservation within = l.reserve("k", 1, kT + 999ns);  // a rest below 1 us is dropped
  ASSERT_TRUE(within.ok());
  EXPECT_EQ(within.delay(), kT);
  const Reservation zero = l.reserve("k", 1, 0ns);
  EXPECT_FALSE(zero.ok());
  EXPECT_EQ(zero.delay(), 2 * kT);
  EXPECT_TRUE(l.reserve("other", 1, 0ns).ok());  // a full key: no delay, booked with max_delay 0
}

TEST_F(ReserveRedis, CancelLatestReturnsItsSlotToTheNextBooking) {
  auto l = limiter(kGcra);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(l.reserve("k").ok());
  Reservation fourth = l.reserve("k");
  ASSERT_EQ(fourth.delay(), kT);
  clock_.advance(10ms);
  fourth.cancel();
  const Reservation next = l.reserve("k");
  EXPECT_EQ(next.delay(), kT - 10ms);  // the fourth's slot
  fourth.cancel();                     // a second cancel does nothing
  EXPECT_EQ(l.reserve("k").delay(), 2 * kT - 10ms);
}

TEST_F(ReserveRedis, CancelGivesBackOnlyWhatLaterBookingsDidNotTake) {
  auto l = limiter(kGcra);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(l.reserve("k").ok());
  Reservation a = l.reserve("k", 2);  // TAT 5T, acts at 2T
  ASSERT_EQ(a.delay(), 2 * kT);
  ASSERT_EQ(l.reserve("k").delay(), 3 * kT);  // TAT 6T: took T of a's 2T
  a.cancel();                                 // restores 2T - T
  EXPECT_EQ(l.reserve("k").delay(), 3 * kT);
}

TEST_F(ReserveRedis, CancelOnceTheTimeToActHasComeDoesNothing) {
  auto l = limiter(kGcra);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(l.reserve("k").ok());
  Reservation r = l.reserve("k");
  clock_.advance(kT);  // act_at reached
  r.cancel();
  EXPECT_EQ(l.peek("k").reset_after, 3 * kT);
  Reservation now = l.reserve("k2");  // delay 0: acts at once, nothing to give back
  now.cancel();
  EXPECT_EQ(l.peek("k2").reset_after, kT);
}

TEST_F(ReserveRedis, CancelOfAnEvictedKeyDoesNothing) {
  auto l = limiter(kGcra);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(l.reserve("k").ok());
  Reservation r = l.reserve("k");
  ASSERT_TRUE(l.reset("k"));
  r.cancel();
  EXPECT_EQ(l.peek("k").reset_after, 0ns);
  EXPECT_EQ(l.stats().failures, 0u);
}

TEST_F(ReserveRedis, TokenBucketBooksAsGcra) {
  auto l = limiter(ratelimit::TokenBucket{.capacity = 2, .refill_tokens = 1, .refill_period = 50ms});
  EXPECT_EQ(l.reserve("k", 2).delay(), 0ns);
  EXPECT_EQ(l.reserve("k").delay(), 50ms);
  Reservation r = l.reserve("k");
  EXPECT_EQ(r.delay(), 100ms);
  r.cancel();
  EXPECT_EQ(l.reserve("k").delay(), 100ms);
}

TEST_F(ReserveRedis, BadInputNamesTheField) {
  auto l = limiter(kGcra);
  expect_invalid([&] { (void)l.reserve("k", -1); }, "cost");
  expect_invalid([&] { (void)l.reserve("k", 1, -1ns); }, "max_delay");
  expect_invalid([&] { (void)l.settle("k", -1, 0); }, "charged");
  expect_invalid([&] { (void)l.settle("k", 0, -1); }, "actual");
  expect_invalid([&] { (void)l.settle("k", 0, 1, -1); }, "max_debt");
  expect_invalid([&] { (void)l.settle(std::string(10'000, 'k'), 0, 1); }, "key");
}

// The window policies do not book ahead (include/ratelimit/README.md "Reservations"): reserve does not compile.
template <class L>
concept Reserves = requires(L& l) {
  l.reserve("k");
};
static_assert(Reserves<RedisLimiter<ratelimit::Gcra>>);
static_assert(Reserves<RedisLimiter<ratelimit::TokenBucket>>);
static_assert(!Reserves<RedisLimiter<ratelimit::FixedWindow>>);
static_assert(!Reserves<RedisLimiter<ratelimit::SlidingWindowLog>>);
static_assert(!Reserves<RedisLimiter<ratelimit::SlidingWindowCounter>>);

using SettleRedis = ReserveRedis;

TEST_F(SettleRedis, GcraOverDebitsBeyondTheBurst) {
  auto l = limiter(kGcra);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(l.allow("k").allowed);
  EXPECT_EQ(l.allow("k").retry_after, kT);  // full: the next waits T
  const Decision d = l.settle("k", 1, 6);   // 5 units owed
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 8 * kT);
  EXPECT_EQ(d.retry_after, 5 * kT);
  EXPECT_EQ(l.allow("k").retry_after, 6 * kT);  // 5 emission intervals beyond T
}

TEST_F(SettleRedis, GcraUnderRefundsAndEqualChangesNothing) {
  auto l = limiter(kGcra);
  ASSERT_TRUE(l.allow("k", 3).allowed);
  const Decision same = l.settle("k", 3, 3);
  EXPECT_EQ(same.remaining, 0);
  EXPECT_EQ(same.reset_after, 3 * kT);
  const Decision under = l.settle("k", 3, 1);
  EXPECT_TRUE(under.allowed);
  EXPECT_EQ(under.remaining, 2);
  EXPECT_EQ(under.reset_after, kT);
}

TEST_F(SettleRedis, MaxDebtClampsTheDebt) {
  auto l = limiter(kGcra);
  ASSERT_TRUE(l.allow("k", 3).allowed);
  EXPECT_EQ(l.settle("k", 0, 100, 2).reset_after, 5 * kT);  // tau + 2T
  EXPECT_EQ(l.settle("k", 0, 1, 2).reset_after, 5 * kT);    // at the bound already
  EXPECT_EQ(l.settle("k", 0, 1, 0).reset_after, 5 * kT);    // a debit never lowers it
  // The default bound keeps Lua exact: a debt of 2^62 units clamps to the horizon, and the reply still parses.
  const Decision huge = l.settle("h", 0, std::int64_t{1} << 62);
  EXPECT_FALSE(huge.allowed);
  EXPECT_LE(huge.reset_after.count(), ratelimit::detail::kMaxHorizonNs);
  EXPECT_GT(huge.reset_after, std::chrono::hours(24 * 365 * 70));
  EXPECT_EQ(l.stats().failures, 0u);
}

TEST_F(SettleRedis, FixedWindowOverAndUnder) {
  auto l = limiter(ratelimit::FixedWindow{.limit = 5, .window = 1s});
  ASSERT_TRUE(l.allow("k", 5).allowed);
  const Decision d = l.settle("k", 1, 4);  // count 8
  EXPECT_TRUE(d.allowed);                  // a cost-0 view of a window policy reports, admitted
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 1s);
  const Decision next = l.allow("k");
  EXPECT_FALSE(next.allowed);
  EXPECT_EQ(next.retry_after, 1s);                   // when the window with the debt ends
  EXPECT_EQ(l.settle("k", 4, 1).remaining, 0);       // count 5
  EXPECT_EQ(l.settle("k", 4, 1).remaining, 3);       // count 2
  EXPECT_EQ(l.settle("k", 0, 100, 1).remaining, 0);  // count 6: L + 1
  EXPECT_EQ(l.settle("k", 6, 0).remaining, 5);       // 6 back from count 6
}

TEST_F(SettleRedis, SlidingWindowsOverAndUnder) {
  auto log = limiter(ratelimit::SlidingWindowLog{.limit = 4, .window = 1s});
  ASSERT_TRUE(log.allow("k", 2).allowed);
  clock_.advance(100ms);
  EXPECT_EQ(log.settle("k", 1, 4, 1).remaining, 0);  // 3 more at +100 ms: count 5, L + 1
  const Decision d = log.allow("k");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 900ms);  // 2 units must leave: the first member's, at +1 s
  EXPECT_EQ(log.settle("k", 3, 0).remaining, 2);

  auto counter = limiter(ratelimit::SlidingWindowCounter{.limit = 4, .window = 1s});
  ASSERT_TRUE(counter.allow("k", 4).allowed);
  EXPECT_EQ(counter.settle("k", 2, 5).remaining, 0);  // current window 7
  EXPECT_FALSE(counter.allow("k").allowed);
  EXPECT_EQ(counter.settle("k", 5, 0).remaining, 2);
}

TEST_F(SettleRedis, UnderAPreparedPolicy) {
  RedisLimiter<ratelimit::FixedWindow, ManualClock> l(
      ratelimit::FixedWindow{.limit = 5, .window = 1s},
      ratelimit_test::named_client_options(*ratelimit_test::shared_redis(), "settle-prepared"), clock_);
  const auto small = l.prepare(ratelimit::FixedWindow{.limit = 2, .window = 1s});
  ASSERT_TRUE(l.allow("k", 2, *small).allowed);
  const Decision d = l.settle("k", 2, 9, 1, *small);  // count 3: limit 2 + 1
  EXPECT_EQ(d.limit, 2);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(l.peek("k").remaining, 2);  // the same key under the limiter's own policy: 5 - 3
}

TEST_F(SettleRedis, SettleLayersSettlesEveryRedisLayerThatConsumed) {
  auto calls = limiter(kGcra);
  auto tokens = limiter(ratelimit::FixedWindow{.limit = 100, .window = 1s});
  ratelimit::LimiterLayer call_layer(calls, "calls");
  ratelimit::LimiterLayer token_layer(tokens, "tokens");
  const ratelimit::LayerRequest request[] = {{&call_layer, "u", 1}, {&token_layer, "u", 40}};
  const ratelimit::LayeredDecision passed = ratelimit::check_layers(request);
  ASSERT_TRUE(passed);
  const std::int64_t used[] = {1, 130};  // 130 tokens, not 40: 30 owed beyond the limit
  ratelimit::settle_layers(request, passed, used);
  EXPECT_EQ(tokens.peek("u").remaining, 0);
  EXPECT_FALSE(tokens.allow("u").allowed);
  EXPECT_EQ(tokens.settle("u", 130, 100).remaining, 0);  // back to the limit exactly
  EXPECT_EQ(tokens.settle("u", 1, 0).remaining, 1);
  EXPECT_EQ(calls.peek("u").remaining, 2);
}

/// Nothing listens on the port: every call fails at once (io), under the failure policy of the test's parameter.
class ReserveFault : public testing::TestWithParam<FailurePolicy> {
 protected:
  void SetUp() override { RATELIMIT_REQUIRE_REDIS(); }
  template <class P>
  RedisLimiter<P, ManualClock> limiter(P policy) {
    ratelimit::redis::RedisOptions o;
    o.port = ratelimit_test::free_port();
    o.time_source = ratelimit::redis::TimeSource::client;
    o.on_error = GetParam();
    o.connect_timeout = 200ms;
    o.command_timeout = 200ms;
    return RedisLimiter<P, ManualClock>(policy, o, clock_);
  }
  ManualClock clock_;
};

using SettleFault = ReserveFault;

TEST_P(ReserveFault, ReserveFollowsTheFailurePolicy) {
  auto l = limiter(kGcra);
  const auto started = std::chrono::steady_clock::now();
  if (GetParam() == FailurePolicy::raise) {
    EXPECT_THROW((void)l.reserve("k"), ratelimit::BackendError);
  } else {
    Reservation r = l.reserve("k", 1, 1s);
    EXPECT_EQ(r.ok(), GetParam() == FailurePolicy::fail_open);
    EXPECT_EQ(r.delay(), r.ok() ? std::chrono::nanoseconds(0) : l.options().failure_retry_after);
    r.cancel();                            // nothing to cancel: no call
    EXPECT_FALSE(l.reserve("k", 4).ok());  // above the burst under any policy
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
  EXPECT_GE(l.stats().failures, 1u);
}

TEST_P(SettleFault, SettleFollowsTheFailurePolicy) {
  auto l = limiter(ratelimit::FixedWindow{.limit = 5, .window = 1s});
  if (GetParam() == FailurePolicy::raise) {
    EXPECT_THROW((void)l.settle("k", 1, 3), ratelimit::BackendError);
    EXPECT_THROW((void)l.settle("k", 3, 1), ratelimit::BackendError);
  } else {
    const bool open = GetParam() == FailurePolicy::fail_open;
    const Decision over = l.settle("k", 1, 3);
    EXPECT_EQ(over.allowed, open);
    EXPECT_EQ(over.remaining, open ? 5 : 0);  // a fresh key's view, or the denial's
    EXPECT_EQ(l.settle("k", 3, 1).allowed, open);
  }
  EXPECT_EQ(l.stats().failures, 2u);
}

TEST_P(ReserveFault, CancelNeverThrowsAndCountsTheFailure) {
  // A booking made while Redis answered, cancelled after it went away.
  auto server = std::make_unique<ratelimit_test::RedisServer>(ratelimit_test::redis_server_binary());
  auto o = ratelimit_test::client_options(*server, GetParam());
  o.breaker.failure_threshold = 0;
  RedisLimiter<ratelimit::Gcra, ManualClock> l(kGcra, o, clock_);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(l.reserve("k").ok());
  Reservation r = l.reserve("k");
  ASSERT_TRUE(r.ok());
  server.reset();
  const auto started = std::chrono::steady_clock::now();
  r.cancel();  // noexcept: a throw would terminate
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
  EXPECT_EQ(l.stats().failures, 1u);
}

std::string policy_name(const testing::TestParamInfo<FailurePolicy>& info) {
  return info.param == FailurePolicy::fail_open ? "fail_open"
                                                : (info.param == FailurePolicy::fail_closed ? "fail_closed" : "raise");
}
INSTANTIATE_TEST_SUITE_P(Policies, ReserveFault,
                         testing::Values(FailurePolicy::fail_open, FailurePolicy::fail_closed, FailurePolicy::raise),
                         policy_name);
INSTANTIATE_TEST_SUITE_P(Policies, SettleFault,
                         testing::Values(FailurePolicy::fail_open, FailurePolicy::fail_closed, FailurePolicy::raise),
                         policy_name);

}  // namespace
