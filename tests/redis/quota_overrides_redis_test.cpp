// Per-key quota overrides on Redis (include/ratelimit/layers/README.md "Per-key quota overrides"): a named RedisLimiter
// checks each key under its resolved policy; the script converts a key's usage when its policy changes, exactly as the
// in-memory OverridableMemoryLimiter does (a twin with changing overrides and a set_policy, ManualClock); unnamed
// limiters refuse; failure decisions carry the override's limit; racing checks lose no usage.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>

#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis.hpp>

#include "../support/quota_overrides.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::ManualClock;
using ratelimit::OverridableMemoryLimiter;
using ratelimit::OverrideOptions;
using ratelimit::QuotaOverrides;
using ratelimit::redis::RedisLimiter;
using ratelimit_test::client_options;
using ratelimit_test::OverrideDirectory;
using ratelimit_test::shared_redis;

class QuotaOverrideRedis : public testing::Test {
 protected:
  void SetUp() override { RATELIMIT_REQUIRE_REDIS(); }

  static ratelimit::redis::RedisOptions named(std::string name) {
    return ratelimit_test::named_client_options(*shared_redis(), std::move(name));
  }
};

void expect_same_decisions(const Decision& memory, const Decision& redis, const std::string& where) {
  EXPECT_EQ(memory.allowed, redis.allowed) << where;
  EXPECT_EQ(memory.limit, redis.limit) << where;
  EXPECT_EQ(memory.remaining, redis.remaining) << where;
  EXPECT_EQ(memory.retry_after, redis.retry_after) << where;
  EXPECT_EQ(memory.reset_after, redis.reset_after) << where;
}

// Random calls on 3 keys (times in whole milliseconds, cache TTL 1 s); every 25 calls one key's override
// changes (none, a or b), and once the limiter's own policy: memory and Redis decide the same every time.
template <class P>
void overrides_twin(const std::string& name, P base, P a, P b) {
  ManualClock clock;
  clock.advance(1'700'000'000s);
  OverridableMemoryLimiter<P, ManualClock> memory(base, {}, clock);
  auto o = client_options(*shared_redis());
  o.name = name;
  RedisLimiter<P, ManualClock> redis(base, o, clock);
  OverrideDirectory<P> dir;
  QuotaOverrides mo(memory, dir.resolver(), OverrideOptions{.cache_ttl = 1s});
  QuotaOverrides ro(redis, dir.resolver(), OverrideOptions{.cache_ttl = 1s});
  std::mt19937_64 rng(7);
  const std::string keys[] = {"x", "y", "z"};
  for (int i = 0; i < 300; ++i) {
    if (i % 25 == 24) {
      const std::string& k = keys[rng() % 3];
      const int which = static_cast<int>(rng() % 3);
      dir.set(k, which == 0 ? std::nullopt : std::optional<P>(which == 1 ? a : b));
      if (rng() % 2 == 0) {  // else the TTL picks it up
        mo.invalidate(k);
        ro.invalidate(k);
      }
    }
    if (i == 150) {
      memory.set_policy(b);
      redis.set_policy(b);
    }
    ratelimit_test::twin_random_call(mo, ro, rng, keys, name + " call " + std::to_string(i), expect_same_decisions);
    if (testing::Test::HasFailure()) return;
    clock.advance(std::chrono::milliseconds(rng() % 700));
  }
}

TEST_F(QuotaOverrideRedis, TwinOfMemoryWithChangingOverrides) {
  overrides_twin("gcra", ratelimit::Gcra{.limit = 10, .period = 10s, .burst = 5},
                 ratelimit::Gcra{.limit = 100, .period = 10s, .burst = 8},
                 ratelimit::Gcra{.limit = 2, .period = 1s, .burst = 3});
  overrides_twin("fixed", ratelimit::FixedWindow{8, 5s}, ratelimit::FixedWindow{4, 3s},
                 ratelimit::FixedWindow{12, 10s});
  overrides_twin("log", ratelimit::SlidingWindowLog{8, 5s}, ratelimit::SlidingWindowLog{3, 2s},
                 ratelimit::SlidingWindowLog{6, 4s});
  // Windows whose microseconds every count up to 12 divides: the counter's retry_after is exact in both ticks.
  overrides_twin("counter", ratelimit::SlidingWindowCounter{8, 27720ms}, ratelimit::SlidingWindowCounter{3, 13860ms},
                 ratelimit::SlidingWindowCounter{12, 55440ms});
  overrides_twin("bucket", ratelimit::TokenBucket{6, 2, 1s}, ratelimit::TokenBucket{3, 1, 3s},
                 ratelimit::TokenBucket{10, 5, 2s});
}

// The override's limit in decisions and failure decisions; usage converted (kept in units) when the override
// changes at TTL expiry; set_policy changes only keys without override; unnamed limiters are refused.
TEST_F(QuotaOverrideRedis, OverridesAppliedAndUnnamedLimitersRefused) {
  ManualClock clock;
  clock.advance(1'700'000'000s);
  RedisLimiter<ratelimit::Gcra, ManualClock> l(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 10}, named("quota"),
                                               clock);
  OverrideDirectory<ratelimit::Gcra> dir;
  dir.set("k", ratelimit::Gcra{.limit = 100, .period = 1s, .burst = 50});  // T = 10 ms
  QuotaOverrides overrides(l, dir.resolver(), OverrideOptions{.cache_ttl = 50ms});
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(overrides.allow("k").allowed);
  EXPECT_EQ(overrides.peek("plain").limit, 10);
  dir.set("k", ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 40});  // T = 100 ms
  clock.advance(20ms);
  EXPECT_EQ(overrides.peek("k").remaining, 22);  // still the cached override: (500 - 280) / 10
  clock.advance(30ms);
  Decision d = overrides.peek("k");
  EXPECT_EQ(d.limit, 40);
  EXPECT_EQ(d.remaining, 15);  // 25 units used, now of 100 ms
  EXPECT_TRUE(overrides.allow("k").allowed);

  l.set_policy(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 20});
  EXPECT_EQ(overrides.peek("k").limit, 40);
  EXPECT_EQ(overrides.peek("plain").limit, 20);

  // The failure policy answers with the key's override.
  auto down = named("quota-down");
  down.on_error = ratelimit::FailurePolicy::fail_open;
  down.port = 1;  // nothing listens there
  down.connect_timeout = 200ms;
  RedisLimiter<ratelimit::Gcra, ManualClock> dead(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 10}, down, clock);
  QuotaOverrides dead_overrides(dead, dir.resolver());
  const auto r = dead_overrides.check("k");
  EXPECT_TRUE(r.failed());
  EXPECT_TRUE(r.decision.allowed);
  EXPECT_EQ(r.decision.limit, 40);

  RedisLimiter<ratelimit::Gcra, ManualClock> unnamed(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 10},
                                                     client_options(*shared_redis()), clock);
  try {
    QuotaOverrides q(unnamed, dir.resolver());
    ADD_FAILURE() << "an unnamed limiter took overrides";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("LimiterOptions.name"), std::string::npos) << e.what();
  }
}

// As in memory: cost 0 stays allowed for a key whose usage exceeds its lowered override, in the scripts' checks
// and refunds of every window policy.
TEST_F(QuotaOverrideRedis, CostZeroIsAllowedOverALoweredLimit) {
  ManualClock clock;
  clock.advance(1'700'000'000s);
  RedisLimiter<ratelimit::FixedWindow, ManualClock> fixed(ratelimit::FixedWindow{10, 1min}, named("zero-fixed"), clock);
  ratelimit_test::expect_cost_zero_allowed_over_a_lowered_limit(fixed, ratelimit::FixedWindow{10, 1min},
                                                                ratelimit::FixedWindow{3, 1min});
  RedisLimiter<ratelimit::SlidingWindowCounter, ManualClock> counter(ratelimit::SlidingWindowCounter{10, 1min},
                                                                     named("zero-counter"), clock);
  ratelimit_test::expect_cost_zero_allowed_over_a_lowered_limit(counter, ratelimit::SlidingWindowCounter{10, 1min},
                                                                ratelimit::SlidingWindowCounter{3, 1min});
  RedisLimiter<ratelimit::SlidingWindowLog, ManualClock> log(ratelimit::SlidingWindowLog{10, 1min}, named("zero-log"),
                                                             clock);
  ratelimit_test::expect_cost_zero_allowed_over_a_lowered_limit(log, ratelimit::SlidingWindowLog{10, 1min},
                                                                ratelimit::SlidingWindowLog{3, 1min});
}

// FailurePolicy::fallback answers an overridden key under its override's share (include/ratelimit/redis/README.md
// "Fallback during outages"): a tenant held low by an override stays low while Redis is down (the limiter's share would
// admit it tenfold), a partner keeps its larger share; peeks, refunds and reset follow the override too.
TEST_F(QuotaOverrideRedis, FallbackAnswersUnderTheKeysOverride) {
  ManualClock clock;
  clock.advance(1'700'000'000s);
  auto o = named("quota-fallback");
  o.port = 1;  // nothing listens there: every check is answered by the fallback
  o.on_error = ratelimit::FailurePolicy::fallback;
  o.fallback.instances = 2;
  o.connect_timeout = 200ms;
  RedisLimiter<ratelimit::Gcra, ManualClock> l(ratelimit::Gcra{.limit = 100, .period = 1s, .burst = 20}, o, clock);
  OverrideDirectory<ratelimit::Gcra> dir;
  dir.set("noisy", ratelimit::Gcra{.limit = 1, .period = 1h, .burst = 2});         // share: burst 1
  dir.set("partner", ratelimit::Gcra{.limit = 1000, .period = 1s, .burst = 100});  // share: burst 50
  QuotaOverrides overrides(l, dir.resolver());
  auto admitted = [&](const std::string& key) {
    int n = 0;
    for (int i = 0; i < 200; ++i) {
      const auto r = overrides.check(key);
      EXPECT_TRUE(r.failed()) << key;
      n += r.decision.allowed ? 1 : 0;
    }
    return n;
  };
  EXPECT_EQ(admitted("noisy"), 1);
  EXPECT_EQ(admitted("partner"), 50);
  EXPECT_EQ(admitted("plain"), 10);  // the limiter's share: burst 20 / 2
  EXPECT_EQ(overrides.peek("noisy").limit, 1);
  EXPECT_FALSE(overrides.peek("noisy").allowed);
  EXPECT_TRUE(overrides.refund("noisy", 1).allowed);
  EXPECT_TRUE(overrides.peek("noisy").allowed);
  EXPECT_EQ(admitted("noisy"), 1);
  EXPECT_FALSE(overrides.reset("partner"));  // Redis failed; the fallback's state of the key is gone
  EXPECT_EQ(admitted("partner"), 50);
  EXPECT_GE(l.stats().fallback_checks, 600u);
}

// The denial cache remembers an override's denial under that override: the key's repeated denials are answered
// in memory, and once its override changes (a higher limit) the key is asked of Redis again.
TEST_F(QuotaOverrideRedis, DenialCacheFollowsTheKeysOverride) {
  ManualClock clock;
  clock.advance(1'700'000'000s);
  auto o = named("quota-deny");
  o.deny_cache.enabled = true;
  RedisLimiter<ratelimit::Gcra, ManualClock> l(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 10}, o, clock);
  OverrideDirectory<ratelimit::Gcra> dir;
  dir.set("k", ratelimit::Gcra{.limit = 2, .period = 1h, .burst = 2});
  QuotaOverrides overrides(l, dir.resolver());
  ASSERT_TRUE(overrides.allow("k").allowed);
  ASSERT_TRUE(overrides.allow("k").allowed);
  const Decision denied = overrides.allow("k");  // Redis denies: remembered under the override
  ASSERT_FALSE(denied.allowed);
  EXPECT_EQ(denied.limit, 2);
  const Decision again = overrides.allow("k");  // answered by the cache, with the override's numbers
  EXPECT_FALSE(again.allowed);
  EXPECT_EQ(again.limit, 2);
  EXPECT_EQ(l.stats().cached_denials, 1u);

  dir.set("k", ratelimit::Gcra{.limit = 10, .period = 1h, .burst = 10});
  overrides.invalidate("k");
  const Decision raised = overrides.allow("k");  // a new policy: Redis is asked, the 2 used units kept
  EXPECT_TRUE(raised.allowed);
  EXPECT_EQ(raised.limit, 10);
  EXPECT_EQ(raised.remaining, 7);
  EXPECT_EQ(l.stats().cached_denials, 1u);
}

// 8 threads check one key while the override flips between two limits: the key's count stays exact.
TEST_F(QuotaOverrideRedis, RacingChecksWhileTheOverrideChanges) {
  ManualClock clock;
  clock.advance(1'700'000'000s);
  RedisLimiter<ratelimit::FixedWindow, ManualClock> l(ratelimit::FixedWindow{50, 1h}, named("race"), clock);
  ratelimit_test::expect_exact_while_the_override_flips(l, clock, 40, 200us);
}

}  // namespace
