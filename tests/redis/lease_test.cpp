// LeasedLimiter against a real redis-server (include/ratelimit/redis/README.md "Budget leases"): the lease scripts
// compute exactly as the lease arithmetic, hot keys cost few Redis calls, cold keys one per request, unused units go
// back, processes share the bound exactly, the denial cache, and Redis Cluster unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <ratelimit/redis.hpp>
#include <ratelimit/redis/leased_limiter.hpp>

#include "cluster_support.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::ManualClock;
using ratelimit::redis::LeasedLimiter;
using ratelimit::redis::LeaseOptions;
using ratelimit_test::client_options;
using ratelimit_test::shared_redis;

template <class P>
using Leased = LeasedLimiter<P, ManualClock, ManualClock>;

using ratelimit_test::at;

// 100 per second, burst 100 (T = 10 ms, tau = 1 s); L = 200 ms: reduced burst 80.
const ratelimit::Gcra kGcra{.limit = 100, .period = 1s, .burst = 100};
LeaseOptions lease_options(std::int64_t max_slice = 40, double fraction = 0.5) {
  LeaseOptions o;
  o.lifetime = 200ms;
  o.max_slice = max_slice;
  o.max_fraction = fraction;
  return o;
}

class LeaseRedis : public testing::Test {
 protected:
  void SetUp() override { RATELIMIT_REQUIRE_REDIS(); }
};

// The Lua scripts against the C++ arithmetic, call for call, on random grants, returns and peeks.
template <class Arithmetic, class Rules>
void differential(const Rules& rules, const std::string& kind, std::vector<std::string> params, std::int64_t L_us) {
  const Arithmetic lease(rules, L_us);
  typename Arithmetic::State state;
  auto admin = shared_redis()->admin();
  const auto& script = ratelimit::redis::detail::script_for(kind);
  const std::string key = ratelimit_test::unique_prefix() + "{k}";
  std::mt19937_64 rng(11);
  std::int64_t now = 1'000'000;
  struct Held {
    std::int64_t units, mark, granted_after;
  };
  std::vector<Held> held;
  for (int step = 0; step < 1500; ++step) {
    now += static_cast<std::int64_t>(rng() % 30'000);
    const auto roll = rng() % 10;
    std::vector<std::string> args{"EVAL", std::string(script.body), "1", key, std::to_string(now)};
    ratelimit::TickDecision expected;
    std::int64_t units = 0, mark = 0, after = 0;
    bool check_grant = false;
    if (roll < 3 && !held.empty()) {
      const std::size_t i = rng() % held.size();
      const Held h = held[i];
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
      const std::int64_t unused = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(h.units));
      expected = lease.give_back(state, now, unused, h.mark, h.granted_after);
      args.insert(args.end(), {"2", std::to_string(unused), std::to_string(h.mark), std::to_string(h.granted_after)});
    } else if (roll == 3) {
      expected = lease.peek(state, now);
      args.insert(args.end(), {"1", "1", "1", "0"});
    } else {
      const std::int64_t need = static_cast<std::int64_t>(rng() % 4);
      const std::int64_t want = need + static_cast<std::int64_t>(rng() % 20);
      const auto g = lease.grant(state, now, need, want);
      expected = g.decision;
      units = g.units;
      mark = g.mark;
      after = g.granted_after;
      check_grant = true;
      if (g.units > 0) held.push_back({g.units, g.mark, g.granted_after});
      args.insert(args.end(), {"0", std::to_string(need), std::to_string(want), "0"});
    }
    args.insert(args.end(), params.begin(), params.end());
    std::vector<std::string_view> views(args.begin(), args.end());
    const auto r = admin.command(views);
    ASSERT_EQ(r->type, REDIS_REPLY_ARRAY) << ratelimit::redis::engine::text(*r);
    ASSERT_EQ(r->elements, 9u);
    auto v = [&](std::size_t i) { return static_cast<std::int64_t>(r->element[i]->integer); };
    const std::int64_t retry = expected.retry_after == ratelimit::TickDecision::never ? -1 : expected.retry_after;
    ASSERT_EQ(v(0), expected.allowed ? 1 : 0) << "step " << step;
    ASSERT_EQ(v(1), expected.limit) << "step " << step;
    ASSERT_EQ(v(2), expected.remaining) << "step " << step;
    ASSERT_EQ(v(3), retry) << "step " << step;
    ASSERT_EQ(v(4), expected.reset_after) << "step " << step;
    if (check_grant) {
      ASSERT_EQ(v(5), units) << "step " << step;
      ASSERT_EQ(v(6), mark) << "step " << step;
      ASSERT_EQ(v(7), after) << "step " << step;
    }
  }
}

TEST_F(LeaseRedis, GcraScriptComputesAsTheArithmetic) {
  const auto rules = kGcra.rules(1000);
  differential<ratelimit::lease::GcraLease>(
      rules, "gcra_lease", {std::to_string(rules.emission_interval()), std::to_string(rules.tolerance() - 200'000)},
      200'000);
}

TEST_F(LeaseRedis, FixedWindowScriptComputesAsTheArithmetic) {
  const auto rules = ratelimit::FixedWindow{.limit = 50, .window = 1s}.rules(1000);
  differential<ratelimit::lease::FixedWindowLease>(rules, "fixed_window_lease", {"50", "1000000"}, 200'000);
}

TEST_F(LeaseRedis, HotKeyCostsFewRedisCallsAndStaysWithinTheBound) {
  ManualClock clock;
  Leased<ratelimit::Gcra> limiter(kGcra, client_options(*shared_redis()), lease_options(), clock, clock);
  EXPECT_TRUE(limiter.leasable());
  EXPECT_EQ(limiter.limit(), 80);
  std::int64_t admitted = 0;
  const int checks = 4000;
  for (int i = 0; i < checks; ++i) {  // 1000 per second: 10x the rate, for 4 s
    at(clock, std::chrono::milliseconds(i));
    if (limiter.allow("hot")) ++admitted;
  }
  // Bound over [0, 4 s): B + floor(d / T) = 100 + 399; the reduced burst admits 80 at first.
  EXPECT_LE(admitted, 100 + 399);
  EXPECT_GE(admitted, 80 + 399 * 9 / 10);
  const auto s = limiter.stats();
  EXPECT_LT(static_cast<double>(s.redis_calls) / checks, 0.05) << s.redis_calls << " calls";
  EXPECT_GT(s.lease_admits, 0u);
}

TEST_F(LeaseRedis, ColdKeyCostsOneCallPerRequest) {
  ManualClock clock;
  Leased<ratelimit::Gcra> limiter(kGcra, client_options(*shared_redis()), lease_options(), clock, clock);
  for (int i = 0; i < 20; ++i) {
    at(clock, std::chrono::seconds(i));
    EXPECT_TRUE(limiter.allow("cold"));
  }
  const auto s = limiter.stats();
  EXPECT_EQ(s.redis_calls, 20u);
  EXPECT_EQ(s.units_granted, 20u);  // a slice of one each: nothing to return
  EXPECT_EQ(s.returns, 0u);
}

TEST_F(LeaseRedis, UnusedUnitsGoBackWhenTheLimiterIsDestroyed) {
  ManualClock clock;
  const auto options = client_options(*shared_redis());
  Leased<ratelimit::Gcra> observer(kGcra, options, lease_options(1), clock, clock);
  {
    Leased<ratelimit::Gcra> limiter(kGcra, options, lease_options(), clock, clock);
    for (int i = 0; i < 30; ++i) ASSERT_TRUE(limiter.allow("k"));  // demand grows the slice
    EXPECT_LT(observer.peek("k").remaining, 80 - 30);              // its lease holds more than it used
  }
  EXPECT_EQ(observer.peek("k").remaining, 80 - 30);  // returned at once, before any refill
}

TEST_F(LeaseRedis, ExpiredLeaseGoesBackOnSweep) {
  ManualClock clock;
  const auto options = client_options(*shared_redis());
  Leased<ratelimit::Gcra> observer(kGcra, options, lease_options(1), clock, clock);
  Leased<ratelimit::Gcra> limiter(kGcra, options, lease_options(), clock, clock);
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(limiter.allow("k"));
  const auto granted = limiter.stats().units_granted;
  ASSERT_GT(granted, 30u);
  EXPECT_EQ(limiter.sweep(), 0u);  // not expired yet
  at(clock, 180ms);                // past 7/8 L
  EXPECT_EQ(limiter.sweep(), 1u);
  EXPECT_EQ(limiter.stats().units_returned, granted - 30);
  // 180 ms after the lease refilled 18 units; the return gave back only slots still in the future.
  EXPECT_EQ(observer.peek("k").remaining, std::min<std::int64_t>(80, 80 - 30 + 18));
}

// Two "processes" (limiters) on one key, time moving, every admitted unit stamped: never over the GCRA bound.
TEST_F(LeaseRedis, TwoLimitersShareTheBoundExactly) {
  ManualClock clock;
  const auto options = client_options(*shared_redis());
  Leased<ratelimit::Gcra> a(kGcra, options, lease_options(), clock, clock);
  Leased<ratelimit::Gcra> b(kGcra, options, lease_options(), clock, clock);
  std::vector<std::int64_t> served;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 6000; ++i) {
    at(clock, std::chrono::microseconds(i * 500));
    auto& l = rng() % 2 == 0 ? a : b;
    const std::int64_t cost = 1 + static_cast<std::int64_t>(rng() % 2);
    if (l.allow("shared", cost)) served.insert(served.end(), static_cast<std::size_t>(cost), i * 500);
    if (i % 1000 == 999) (rng() % 2 == 0 ? a : b).sweep();
  }
  std::sort(served.begin(), served.end());
  std::int64_t worst = -100;
  for (std::size_t i = 0, j = 0; j < served.size(); ++j) {  // windows [served[i], served[j]]
    while (served[j] - served[i] > 1'000'000) ++i;
    worst =
        std::max<std::int64_t>(worst, static_cast<std::int64_t>(j - i + 1) - (100 + (served[j] - served[i]) / 10'000));
  }
  EXPECT_LE(worst, 0);
  EXPECT_GT(served.size(), 100u + 300u * 8 / 10);  // most of the bound over 3 s
}

TEST_F(LeaseRedis, BurstThatCannotCoverALeaseChecksPerRequest) {
  ManualClock clock;
  LeaseOptions o = lease_options();
  o.lifetime = 2s;  // > B * T = 1 s
  Leased<ratelimit::Gcra> limiter(kGcra, client_options(*shared_redis()), o, clock, clock);
  EXPECT_FALSE(limiter.leasable());
  EXPECT_EQ(limiter.limit(), 100);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(limiter.allow("k"));
  EXPECT_FALSE(limiter.allow("k"));
  EXPECT_EQ(limiter.stats().units_granted, 100u);
  EXPECT_EQ(limiter.stats().lease_admits, 0u);
}

TEST_F(LeaseRedis, DenialCacheAnswersUntilTheWaitEnds) {
  ManualClock clock;
  Leased<ratelimit::Gcra> limiter(kGcra, client_options(*shared_redis()), lease_options(), clock, clock);
  for (int i = 0; i < 80; ++i) ASSERT_TRUE(limiter.allow("k"));
  const auto first = limiter.allow("k");
  ASSERT_FALSE(first);
  // Redis's wait for one unit is 10 ms; the process waits until its whole slice (up to 40) fits.
  EXPECT_GE(first.retry_after, 10ms);
  EXPECT_LE(first.retry_after, 400ms);
  const auto calls = limiter.stats().redis_calls;
  at(clock, 5ms);
  const auto cached = limiter.allow("k", 3);
  EXPECT_FALSE(cached);
  EXPECT_EQ(cached.retry_after, first.retry_after - 5ms);
  EXPECT_EQ(limiter.stats().redis_calls, calls);  // not sent
  EXPECT_EQ(limiter.stats().cached_denials, 1u);
  at(clock, first.retry_after);
  EXPECT_TRUE(limiter.allow("k"));
  EXPECT_EQ(limiter.stats().redis_calls, calls + 1);
}

TEST_F(LeaseRedis, FixedWindowLeaseNeverServesIntoTheNextWindow) {
  ManualClock clock;
  const auto options = client_options(*shared_redis());
  using Window = Leased<ratelimit::FixedWindow>;
  Window a(ratelimit::FixedWindow{.limit = 50, .window = 1s}, options, lease_options(), clock, clock);
  Window b(ratelimit::FixedWindow{.limit = 50, .window = 1s}, options, lease_options(), clock, clock);
  std::vector<int> per_window(4, 0);
  for (int i = 0; i < 4000; ++i) {
    at(clock, std::chrono::microseconds(i * 1000));
    if ((i % 2 == 0 ? a : b).allow("w")) ++per_window[static_cast<std::size_t>(i / 1000)];
  }
  for (const int n : per_window) {
    EXPECT_LE(n, 50);
    EXPECT_GE(n, 40);
  }
}

TEST_F(LeaseRedis, TokenBucketLeases) {
  ManualClock clock;
  Leased<ratelimit::TokenBucket> limiter(
      ratelimit::TokenBucket{.capacity = 100, .refill_tokens = 100, .refill_period = 1s},
      client_options(*shared_redis()), lease_options(), clock, clock);
  EXPECT_EQ(limiter.limit(), 80);
  int admitted = 0;
  for (int i = 0; i < 200; ++i) admitted += limiter.allow("t") ? 1 : 0;
  EXPECT_EQ(admitted, 80);
  EXPECT_LT(limiter.stats().redis_calls, 20u);
}

TEST_F(LeaseRedis, FailurePolicyAnswersWhenRedisIsDown) {
  ManualClock clock;
  auto o = client_options(*shared_redis(), ratelimit::FailurePolicy::fail_closed);
  o.port = ratelimit_test::free_port();  // nobody listens
  o.connect_timeout = 100ms;
  Leased<ratelimit::Gcra> limiter(kGcra, o, lease_options(), clock, clock);
  const auto r = limiter.check("k");
  EXPECT_TRUE(r.failed());
  EXPECT_FALSE(r.decision.allowed);
  EXPECT_EQ(limiter.stats().failures, 1u);
}

TEST(LeaseCluster, LeasesWorkUnchangedOnRedisCluster) {
  RATELIMIT_REQUIRE_CLUSTER();
  ManualClock clock;
  const auto o = ratelimit_test::cluster_client_options(*ratelimit_test::shared_cluster());
  auto router = std::make_shared<ratelimit::redis::ClusterRouter>(o.connection(), o.limiter());
  Leased<ratelimit::Gcra> a(kGcra, router, o.limiter(), lease_options(), clock, clock);
  Leased<ratelimit::Gcra> b(kGcra, router, o.limiter(), lease_options(), clock, clock);
  int admitted = 0;
  for (int i = 0; i < 400; ++i) {
    for (const char* key : {"alice", "bob", "carol"}) admitted += (i % 2 == 0 ? a : b).allow(key) ? 1 : 0;
  }
  EXPECT_EQ(admitted, 3 * 80);  // no time passes: each key's reduced burst, fleet-wide
  EXPECT_LT(a.stats().redis_calls + b.stats().redis_calls, 3u * 40u);
}

}  // namespace
