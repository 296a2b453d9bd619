// LeasedLimiter's edges against a real redis-server (include/ratelimit/redis/README.md "Budget leases"): the denial
// cache waits at most the slice's units longer than Redis would, a sweep keeps the expiry queue of leases not yet
// expired, and a return after a reset gives the fresh state nothing it never granted.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

#include <ratelimit/redis.hpp>
#include <ratelimit/redis/leased_limiter.hpp>

#include "test_support.hpp"

namespace {
// Named: the unity build puts this file beside lease_test.cpp, whose helpers share these names.
namespace lease_edges {

using namespace std::chrono_literals;
using ratelimit::ManualClock;
using ratelimit::redis::LeasedLimiter;
using ratelimit::redis::LeaseOptions;
using ratelimit_test::at;
using ratelimit_test::client_options;
using ratelimit_test::shared_redis;

template <class P>
using Leased = LeasedLimiter<P, ManualClock, ManualClock>;

// 100 per second, burst 100 (T = 10 ms, tau = 1 s); L = 200 ms: reduced burst 80, units served until 175 ms.
const ratelimit::Gcra kGcra{.limit = 100, .period = 1s, .burst = 100};
LeaseOptions lease_options(bool deny_cache = true) {
  LeaseOptions o;
  o.lifetime = 200ms;
  o.max_slice = 40;
  o.max_fraction = 0.5;
  o.deny_cache = deny_cache;
  return o;
}

class LeaseEdges : public testing::Test {
 protected:
  void SetUp() override { RATELIMIT_REQUIRE_REDIS(); }
};

// A hot key asks for slices of up to 40. When Redis denies one unit with retry_after R, the cache waits until
// the slice fits, R + (slice - 1) * T, at most (max_slice - 1) * T longer than Redis (include/ratelimit/redis/README.md
// "Budget leases", denial cache): meanwhile it may deny what Redis admits; then it asks Redis, which grants a slice.
TEST_F(LeaseEdges, DenialCacheWaitsForItsSliceAtMostMaxSliceUnitsLonger) {
  ManualClock clock;
  const auto options = client_options(*shared_redis());
  Leased<ratelimit::Gcra> limiter(kGcra, options, lease_options(), clock, clock);
  Leased<ratelimit::Gcra> observer(kGcra, options, lease_options(false), clock, clock);
  for (int i = 0; i < 80; ++i) ASSERT_TRUE(limiter.allow("k")) << i;
  const ratelimit::Decision denied = limiter.allow("k");
  ASSERT_FALSE(denied);
  const ratelimit::Decision redis = observer.peek("k");  // Redis's wait for one unit
  ASSERT_FALSE(redis.allowed);
  EXPECT_GE(denied.retry_after, redis.retry_after);
  EXPECT_LE(denied.retry_after, redis.retry_after + (40 - 1) * 10ms);
  at(clock, redis.retry_after);
  ASSERT_TRUE(observer.peek("k").allowed);
  const auto cached = limiter.stats().cached_denials;
  EXPECT_FALSE(limiter.allow("k"));  // the documented over-denial, for this key only
  EXPECT_EQ(limiter.stats().cached_denials, cached + 1);
  at(clock, denied.retry_after);
  const auto calls = limiter.stats().redis_calls;
  EXPECT_TRUE(limiter.allow("k"));
  EXPECT_EQ(limiter.stats().redis_calls, calls + 1);
  EXPECT_TRUE(limiter.allow("k"));  // from the slice
  EXPECT_EQ(limiter.stats().redis_calls, calls + 1);
}

// A sweep returns the expired leases and keeps the rest queued: once those expire too, the next Redis calls of
// their shards give them back (include/ratelimit/redis/README.md "Budget leases": unused units go back at expiry, by
// `sweep` or the next Redis call of the shard). 400 cold keys reach every shard.
TEST_F(LeaseEdges, SweepKeepsLeasesNotYetExpiredQueued) {
  ManualClock clock;
  Leased<ratelimit::Gcra> limiter(kGcra, client_options(*shared_redis()), lease_options(), clock, clock);
  constexpr int kLeased = 32;
  for (int i = 0; i < kLeased; ++i) {
    const std::string key = "a" + std::to_string(i);
    ASSERT_TRUE(limiter.allow(key));
    ASSERT_TRUE(limiter.allow(key));  // a slice of 2: one unit left in the lease
  }
  at(clock, 100ms);  // before the leases' end (175 ms)
  EXPECT_EQ(limiter.sweep(), 0u);
  at(clock, 300ms);
  for (int i = 0; i < 400; ++i) ASSERT_TRUE(limiter.allow("c" + std::to_string(i)));
  EXPECT_EQ(limiter.stats().returns, static_cast<std::uint64_t>(kLeased))
      << "leases not expired at the sweep were never given back by their shards' calls";
}

// Process A holds a lease when process B resets the key; B then takes units from the fresh state, and A's lease
// expires and goes back: the fresh state must not get back units it never granted (A's came from the old one).
template <class P>
void return_after_reset_changes_nothing(const P& policy, int a_checks, int b_checks) {
  ManualClock clock;
  const auto options = client_options(*shared_redis());
  Leased<P> a(policy, options, lease_options(), clock, clock);
  Leased<P> b(policy, options, lease_options(), clock, clock);
  Leased<P> observer(policy, options, lease_options(false), clock, clock);
  for (int i = 0; i < a_checks; ++i) ASSERT_TRUE(a.allow("k")) << i;  // slices grow with demand: units left over
  ASSERT_TRUE(b.reset("k"));
  for (int i = 0; i < b_checks; ++i) ASSERT_TRUE(b.allow("k")) << i;
  at(clock, 180ms);  // A's lease has ended (175 ms); B's too, but B keeps it until its next call or sweep
  const std::int64_t before = observer.peek("k").remaining;
  const auto returned = a.stats().units_returned;
  EXPECT_EQ(a.sweep(), 1u);
  ASSERT_GT(a.stats().units_returned, returned);
  EXPECT_EQ(observer.peek("k").remaining, before) << "the fresh state got back units of a lease it never granted";
}

TEST_F(LeaseEdges, ReturnAfterResetChangesNothingFixedWindow) {
  return_after_reset_changes_nothing(ratelimit::FixedWindow{.limit = 100, .window = 1s}, 6, 30);
}

TEST_F(LeaseEdges, ReturnAfterResetChangesNothingGcra) { return_after_reset_changes_nothing(kGcra, 60, 60); }

}  // namespace lease_edges
}  // namespace
