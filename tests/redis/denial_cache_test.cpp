// RedisLimiter's local denial cache (include/ratelimit/redis/README.md "Denial cache"): after Redis denies cost n with
// retry_after R, that key's requests of cost >= n are denied without Redis until R has passed; bounded; a refund
// through the limiter forgets; another process's refund is the documented case where it denies what Redis would admit.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>

#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::CheckResult;
using ratelimit::ManualClock;
using ratelimit::Outcome;
using ratelimit::redis::RedisLimiter;
using ratelimit::redis::RedisOptions;

std::int64_t denial_evalsha_count(ratelimit::redis::engine::Connection& admin) {
  return ratelimit_test::command_count(admin, "evalsha");
}

// GCRA 10/s, burst 2 (T = 100 ms), client time.
const ratelimit::Gcra kDenialPolicy{.limit = 10, .period = 1s, .burst = 2};

RedisOptions denial_cache_options() {
  RedisOptions o = ratelimit_test::client_options(*ratelimit_test::shared_redis());
  o.deny_cache.enabled = true;
  return o;
}

TEST(DenialCache, DeniesLocallyUntilRetryAfterThenAsksRedis) {
  RATELIMIT_REQUIRE_REDIS();
  auto admin = ratelimit_test::shared_redis()->admin();
  ManualClock clock;
  RedisLimiter<ratelimit::Gcra, ManualClock> limiter(kDenialPolicy, denial_cache_options(), clock);
  ASSERT_TRUE(limiter.allow("k", 2));
  const auto denied = limiter.check("k", 2);  // Redis: retry_after 200 ms
  ASSERT_FALSE(denied.decision.allowed);
  EXPECT_EQ(denied.decision.retry_after, 200ms);
  const std::int64_t before = denial_evalsha_count(admin);
  clock.advance(50ms);
  const CheckResult local = limiter.check("k", 2);  // the cache: the rest of the wait
  EXPECT_FALSE(local.decision.allowed);
  EXPECT_EQ(local.outcome, Outcome::decided);
  EXPECT_EQ(local.decision.retry_after, 150ms);
  EXPECT_EQ(local.decision.limit, 2);
  EXPECT_FALSE(limiter.allow("k", 3));  // a larger cost too
  EXPECT_EQ(denial_evalsha_count(admin), before);
  EXPECT_EQ(limiter.stats().cached_denials, 2u);
  // A smaller cost is not covered: Redis decides (denies, retry_after 50 ms; that denial of cost 1 is cached).
  EXPECT_FALSE(limiter.allow("k", 1));
  EXPECT_EQ(denial_evalsha_count(admin), before + 1);
  // Async: answered by the cache on the I/O thread, Redis not asked.
  const std::int64_t async_before = denial_evalsha_count(admin);
  // Shared with the completion: it may run after a failed wait returned (the limiter's end completes it).
  auto done = std::make_shared<std::promise<CheckResult>>();
  limiter.check_async("k", 2, [done](std::exception_ptr, CheckResult r) { done->set_value(r); });
  auto f = done->get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  const CheckResult async = f.get();
  EXPECT_FALSE(async.decision.allowed);
  EXPECT_EQ(async.outcome, Outcome::decided);
  EXPECT_EQ(denial_evalsha_count(admin), async_before);
  EXPECT_EQ(async.decision.retry_after, 50ms);
  // Once the wait has passed, Redis is asked again (at 200 ms it admits 2).
  clock.advance(150ms);
  EXPECT_TRUE(limiter.allow("k", 2));
  EXPECT_EQ(denial_evalsha_count(admin), async_before + 1);
  // Batches: cached denials answered locally, the rest sent, in request order.
  ASSERT_FALSE(limiter.allow("k", 2));
  const ratelimit::redis::Request batch[] = {{"k", 2}, {"other", 1}, {"k", 5}};
  const auto many = limiter.check_many(batch);
  ASSERT_EQ(many.size(), 3u);
  EXPECT_FALSE(many[0].decision.allowed);
  EXPECT_TRUE(many[1].decision.allowed);
  EXPECT_FALSE(many[2].decision.allowed);
}

// The documented over-denial: units given back by someone else (another process's refund) are not seen until
// the cached wait ends; a refund through this limiter forgets the key's denial at once.
TEST(DenialCache, RefundsElsewhereCanBeMissedForAtMostTheWait) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  const RedisOptions o = denial_cache_options();
  RedisLimiter<ratelimit::Gcra, ManualClock> cached(kDenialPolicy, o, clock);
  RedisOptions plain_options = o;
  plain_options.deny_cache.enabled = false;
  RedisLimiter<ratelimit::Gcra, ManualClock> other(kDenialPolicy, plain_options, clock);  // another process
  ASSERT_TRUE(cached.allow("k", 2));
  ASSERT_FALSE(cached.allow("k", 1));  // cached for 100 ms
  (void)other.refund("k", 2);
  EXPECT_TRUE(other.peek("k").allowed);  // Redis would admit now
  EXPECT_FALSE(cached.allow("k", 1));    // the cache does not know
  clock.advance(100ms);
  EXPECT_TRUE(cached.allow("k", 1));  // the wait over: Redis again
  // A refund through the cached limiter forgets its denial.
  clock.advance(200ms);
  ASSERT_TRUE(cached.allow("k", 2));
  ASSERT_FALSE(cached.allow("k", 2));
  (void)cached.refund("k", 2);
  EXPECT_TRUE(cached.allow("k", 2));
}

// This limiter's own set_policy makes its cached denials void: they were Redis's answers under the old
// parameters, and a raised limit admits at once (include/ratelimit/README.md "Changing a policy at run time"), without
// waiting out the old denial's retry_after. A call sent under the old policy and answered after the change is not
// cached.
TEST(DenialCache, ForgetsDenialsOfAPolicyReplacedBySetPolicy) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  RedisOptions o = denial_cache_options();
  o.name = "deny-cache-set-policy";
  RedisLimiter<ratelimit::Gcra, ManualClock> limiter(kDenialPolicy, o, clock);
  ASSERT_TRUE(limiter.allow("k", 2));
  ASSERT_FALSE(limiter.allow("k", 2));  // cached for 200 ms
  limiter.set_policy(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 10});
  const auto raised = limiter.check("k", 2);
  EXPECT_TRUE(raised.decision.allowed);  // 2 of 10 used: Redis admits
  EXPECT_EQ(raised.decision.limit, 10);
  EXPECT_EQ(limiter.stats().cached_denials, 0u);
  // Back to the first policy: a denial cached under it before the change stays void too.
  ASSERT_FALSE(limiter.allow("k", 8));  // 4 used, 8 do not fit 10: cached under the raised policy
  limiter.set_policy(kDenialPolicy);
  EXPECT_FALSE(limiter.allow("k", 8));  // never fits burst 2: Redis says so, not the cache
  EXPECT_EQ(limiter.stats().cached_denials, 0u);
}

TEST(DenialCache, IsBoundedAndValidated) {
  ratelimit::redis::detail::DenialCache cache(16);
  const ratelimit::Decision denial{false, 1, 0, 1s, 1s};
  for (int i = 0; i < 1000; ++i) cache.remember("key" + std::to_string(i), 1, denial, 0, 0);
  EXPECT_LE(cache.size(), 16u);
  EXPECT_GE(cache.size(), 1u);
  ratelimit::Decision out;
  EXPECT_TRUE(cache.lookup("key999", 1, 10, out));              // the newest stays
  EXPECT_FALSE(cache.lookup("key999", 1, 1'000'000'000, out));  // expired after 1 s

  RedisOptions o;
  o.deny_cache.enabled = true;
  o.deny_cache.max_keys = 0;
  try {
    RedisLimiter<ratelimit::Gcra> l(kDenialPolicy, o);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("LimiterOptions.deny_cache.max_keys"), std::string::npos) << e.what();
  }
}

}  // namespace
