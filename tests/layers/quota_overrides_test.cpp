// Per-key quota overrides in memory (include/ratelimit/layers/README.md "Per-key quota overrides"): a cached resolver
// gives some keys their own policy; a key whose policy changes keeps its usage in units; the cache is bounded and
// refuses over-long keys before the resolver runs; a throwing resolver or a bad override consumes nothing; checks
// racing with changing answers see one policy or the other and lose no usage.
#include <gtest/gtest.h>

#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>

#include <atomic>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "../support/invalid_message.hpp"
#include "../support/quota_overrides.hpp"

using namespace std::chrono_literals;
using ratelimit::FixedWindow;
using ratelimit::Gcra;
using ratelimit::ManualClock;
using ratelimit::OverridableMemoryLimiter;
using ratelimit::OverrideOptions;
using ratelimit::QuotaOverrides;
using ratelimit_test::invalid_message;
using ratelimit_test::OverrideDirectory;
using ratelimit_test::starts_with;

namespace {

TEST(QuotaOverrideMemory, OverriddenKeysUseTheirPolicyOthersTheLimiters) {
  ManualClock clock;
  clock.advance(1000s);
  OverridableMemoryLimiter<Gcra, ManualClock> limiter(Gcra{10, 1s, 5}, {}, clock);
  OverrideDirectory<Gcra> dir;
  dir.set("vip", Gcra{100, 1s, 20});
  QuotaOverrides overrides(limiter, dir.resolver());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(overrides.allow("vip")) << i;
  const auto vip = overrides.allow("vip");
  EXPECT_FALSE(vip.allowed);
  EXPECT_EQ(vip.limit, 20);
  EXPECT_EQ(vip.retry_after, 10ms);  // T = 1 s / 100
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(overrides.allow("plain")) << i;
  const auto plain = overrides.allow("plain");
  EXPECT_FALSE(plain.allowed);
  EXPECT_EQ(plain.limit, 5);
  EXPECT_EQ(plain.retry_after, 100ms);
  EXPECT_EQ(overrides.override_for("vip")->burst, 20);
  EXPECT_FALSE(overrides.override_for("plain"));
  EXPECT_EQ(dir.calls.load(), 2);  // each key resolved once, then cached
  EXPECT_EQ(overrides.cached(), 2u);

  // The limiter's own policy changes keys without override only; the override stays.
  limiter.set_policy(Gcra{10, 1s, 8});
  EXPECT_EQ(overrides.peek("vip").limit, 20);
  const auto p = overrides.peek("plain");
  EXPECT_EQ(p.limit, 8);
  EXPECT_EQ(p.remaining, 3);  // its 5 used units kept: 8 - 5
  EXPECT_EQ(overrides.policy().burst, 8);
}

// The cache's TTL picks up a changed answer; the key's usage is converted in units (include/ratelimit/README.md
// "Changing a policy at run time": u = ceil((TAT - t) / T_old), TAT = t + min(u, B_new) * T_new), exactly.
TEST(QuotaOverrideMemory, TtlExpiryPicksUpAChangedOverrideKeepingUsage) {
  ManualClock clock;
  clock.advance(1000s);
  OverridableMemoryLimiter<Gcra, ManualClock> limiter(Gcra{10, 1s, 10}, {}, clock);
  OverrideDirectory<Gcra> dir;
  dir.set("k", Gcra{100, 1s, 50});  // T = 10 ms
  QuotaOverrides overrides(limiter, dir.resolver(), OverrideOptions{.cache_ttl = 50ms});
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(overrides.allow("k"));  // TAT = t0 + 300 ms

  dir.set("k", Gcra{10, 1s, 40});  // T = 100 ms, tau = 4 s
  clock.advance(20ms);             // the cached answer is still trusted
  auto d = overrides.peek("k");
  EXPECT_EQ(d.limit, 50);
  EXPECT_EQ(d.remaining, 22);  // (500 - 280) / 10

  clock.advance(30ms);  // age 50 ms: stale, asks again
  d = overrides.peek("k");
  EXPECT_EQ(d.limit, 40);
  EXPECT_EQ(d.remaining, 15);  // u = ceil(250 / 10) = 25 units used: TAT = t + 2.5 s, (4000 - 2500) / 100
  for (int i = 0; i < 15; ++i) ASSERT_TRUE(overrides.allow("k")) << i;
  EXPECT_FALSE(overrides.allow("k"));

  // The override goes: the limiter's policy, the 40 used units clamped to its burst of 10.
  dir.set("k", std::nullopt);
  overrides.invalidate("k");
  d = overrides.allow("k");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit, 10);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, 100ms);
  EXPECT_EQ(dir.calls.load(), 3);
}

TEST(QuotaOverrideMemory, WindowCountsAreKeptAndComparedWithTheNewLimit) {
  ManualClock clock;
  clock.advance(1000s);
  OverridableMemoryLimiter<FixedWindow, ManualClock> limiter(FixedWindow{10, 1min}, {}, clock);
  OverrideDirectory<FixedWindow> dir;
  dir.set("k", FixedWindow{100, 1min});
  QuotaOverrides overrides(limiter, dir.resolver());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(overrides.allow("k"));
  dir.set("k", FixedWindow{30, 1min});
  overrides.invalidate("k");
  EXPECT_EQ(overrides.peek("k").remaining, 10);
  EXPECT_EQ(overrides.refund("k", 5).remaining, 15);  // a refund gives back under the key's policy
  dir.set("k", std::nullopt);
  overrides.invalidate("k");
  const auto d = overrides.allow("k");
  EXPECT_FALSE(d.allowed);  // 15 used > the limiter's 10
  EXPECT_EQ(d.limit, 10);
  EXPECT_EQ(d.remaining, 0);
}

// A set_policy whose rules in ticks equal an earlier policy's (Gcra{10, 1s, 5} and {20, 2s, 5}: one emission
// interval, one tolerance) converts nothing, but `policy()` and so the advertised quota are the numbers given.
TEST(QuotaOverrideMemory, SetPolicyOfTheSameRulesKeepsTheNumbersGiven) {
  ManualClock clock;
  clock.advance(1000s);
  OverridableMemoryLimiter<Gcra, ManualClock> limiter(Gcra{10, 1s, 5}, {}, clock);
  ASSERT_TRUE(limiter.allow("k", 3));
  const std::int64_t remaining = limiter.peek("k").remaining;
  limiter.set_policy(Gcra{20, 2s, 5});
  EXPECT_EQ(limiter.policy().limit, 20);
  EXPECT_EQ(limiter.policy().period, 2s);
  EXPECT_EQ(limiter.peek("k").remaining, remaining);  // the same rules: nothing converted
  limiter.set_policy(Gcra{10, 1s, 5});                // back to the first, which is reused
  EXPECT_EQ(limiter.policy().limit, 10);
  EXPECT_EQ(limiter.policy().period, 1s);
  EXPECT_EQ(limiter.peek("k").remaining, remaining);
}

// A lowered override below a key's usage denies it, but cost 0 stays allowed (it reports the state), in checks
// and in a refund's decision, for every window policy.
TEST(QuotaOverrideMemory, CostZeroIsAllowedOverALoweredLimit) {
  ManualClock clock;
  clock.advance(1000s);
  OverridableMemoryLimiter<FixedWindow, ManualClock> fixed(FixedWindow{10, 1min}, {}, clock);
  ratelimit_test::expect_cost_zero_allowed_over_a_lowered_limit(fixed, FixedWindow{10, 1min}, FixedWindow{3, 1min});
  OverridableMemoryLimiter<ratelimit::SlidingWindowCounter, ManualClock> counter(
      ratelimit::SlidingWindowCounter{10, 1min}, {}, clock);
  ratelimit_test::expect_cost_zero_allowed_over_a_lowered_limit(counter, ratelimit::SlidingWindowCounter{10, 1min},
                                                                ratelimit::SlidingWindowCounter{3, 1min});
  OverridableMemoryLimiter<ratelimit::SlidingWindowLog, ManualClock> log(ratelimit::SlidingWindowLog{10, 1min}, {},
                                                                         clock);
  ratelimit_test::expect_cost_zero_allowed_over_a_lowered_limit(log, ratelimit::SlidingWindowLog{10, 1min},
                                                                ratelimit::SlidingWindowLog{3, 1min});
}

// Many distinct keys never grow the cache past its bound; over-long keys are refused before the resolver runs.
TEST(QuotaOverrideMemory, HostileKeysCannotGrowTheCacheNorReachTheResolver) {
  ManualClock clock;
  OverridableMemoryLimiter<Gcra, ManualClock> limiter(Gcra{10, 1s, 5}, ratelimit::MemoryOptions{.max_key_bytes = 32},
                                                      clock);
  OverrideDirectory<Gcra> dir;
  dir.set("vip", Gcra{100, 1s, 20});
  QuotaOverrides overrides(limiter, dir.resolver(), OverrideOptions{.max_cached_keys = 40});
  for (int i = 0; i < 5000; ++i) {
    (void)overrides.allow("flood-" + std::to_string(i));
    ASSERT_LE(overrides.cached(), 40u);
  }
  EXPECT_EQ(overrides.cached(), 40u);
  EXPECT_EQ(dir.calls.load(), 5000);
  // An evicted key is resolved again, with its override.
  EXPECT_EQ(overrides.allow("vip").limit, 20);
  for (int i = 0; i < 5000; ++i) (void)overrides.allow("flood2-" + std::to_string(i));
  EXPECT_EQ(overrides.allow("vip").limit, 20);
  EXPECT_EQ(dir.calls.load(), 10'002);

  const int before = dir.calls.load();
  const std::size_t cached = overrides.cached();
  const std::string long_key(33, 'x');
  EXPECT_TRUE(starts_with(invalid_message([&] { (void)overrides.allow(long_key); }), "key:"));
  EXPECT_TRUE(starts_with(invalid_message([&] { (void)overrides.peek(long_key); }), "key:"));
  EXPECT_TRUE(starts_with(invalid_message([&] { (void)overrides.override_for(long_key); }), "key:"));
  EXPECT_TRUE(starts_with(invalid_message([&] { (void)overrides.allow("vip", -1); }), "cost:"));
  EXPECT_EQ(dir.calls.load(), before);
  EXPECT_EQ(overrides.cached(), cached);

  // One shard per key at most: a bound of 1 is exact too.
  QuotaOverrides one(limiter, dir.resolver(), OverrideOptions{.max_cached_keys = 1});
  for (int i = 0; i < 100; ++i) (void)one.allow("k" + std::to_string(i));
  EXPECT_EQ(one.cached(), 1u);
}

// A resolver that throws reaches the caller; nothing is consumed or cached. An override with a bad parameter
// throws std::invalid_argument naming the field, at each call (nothing cached), consuming nothing.
TEST(QuotaOverrideMemory, ThrowingResolverAndBadOverridesConsumeNothing) {
  ManualClock clock;
  OverridableMemoryLimiter<Gcra, ManualClock> limiter(Gcra{10, 1s, 5}, {}, clock);
  std::atomic<int> mode{0};
  std::atomic<int> calls{0};
  QuotaOverrides overrides(limiter, [&](std::string_view) -> std::optional<Gcra> {
    ++calls;
    if (mode == 0) throw std::runtime_error("directory down");
    if (mode == 1) return Gcra{10, 1s, 0};
    return std::nullopt;
  });
  EXPECT_THROW((void)overrides.allow("k"), std::runtime_error);
  EXPECT_THROW((void)overrides.allow("k"), std::runtime_error);
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ(overrides.cached(), 0u);
  mode = 1;
  EXPECT_TRUE(starts_with(invalid_message([&] { (void)overrides.allow("k"); }), "Gcra.burst:"));
  EXPECT_TRUE(starts_with(invalid_message([&] { (void)overrides.refund("k", 1); }), "Gcra.burst:"));
  EXPECT_EQ(calls.load(), 4);
  EXPECT_EQ(overrides.cached(), 0u);
  mode = 2;
  EXPECT_EQ(overrides.peek("k").remaining, 5);  // nothing was consumed
  EXPECT_EQ(limiter.size(), 0u);

  // Construction names its fields.
  auto none = [](std::string_view) -> std::optional<Gcra> { return std::nullopt; };
  EXPECT_TRUE(starts_with(invalid_message([&] { QuotaOverrides q(limiter, nullptr); }), "resolver:"));
  EXPECT_TRUE(starts_with(invalid_message([&] { QuotaOverrides q(limiter, none, {.max_cached_keys = 0}); }),
                          "OverrideOptions.max_cached_keys:"));
  EXPECT_TRUE(starts_with(invalid_message([&] { QuotaOverrides q(limiter, none, {.cache_ttl = 0s}); }),
                          "OverrideOptions.cache_ttl:"));
}

// An `invalidate` while the key's resolution is in flight is not lost: the answer read before it (the old
// override) must not be cached for a whole TTL, or the change the operator just announced is ignored. Tiers
// share the cache and its rule.
TEST(QuotaOverrideMemory, InvalidateDuringAResolutionIsNotLost) {
  ManualClock clock;
  OverridableMemoryLimiter<Gcra, ManualClock> limiter(Gcra{10, 1s, 5}, {}, clock);
  OverrideDirectory<Gcra> dir;
  dir.set("k", Gcra{100, 1s, 20});
  std::promise<void> entered;
  std::promise<void> release;
  std::atomic<bool> first{true};
  auto read = dir.resolver();
  QuotaOverrides overrides(limiter, [&](std::string_view key) {
    auto answer = read(key);  // the directory as it is before the change
    if (first.exchange(false)) {
      entered.set_value();
      release.get_future().wait();
    }
    return answer;
  });
  std::thread slow([&] { EXPECT_EQ(overrides.allow("k").limit, 20); });
  entered.get_future().wait();
  dir.set("k", Gcra{100, 1s, 50});  // the directory changes, then the operator invalidates
  overrides.invalidate("k");
  release.set_value();
  slow.join();
  ASSERT_TRUE(overrides.override_for("k"));
  EXPECT_EQ(overrides.override_for("k")->burst, 50);
  EXPECT_EQ(overrides.allow("k").limit, 50);

  std::promise<void> tier_entered;
  std::promise<void> tier_release;
  std::atomic<bool> tier_first{true};
  std::atomic<bool> upgraded{false};
  ratelimit::TierOptions plans;
  plans.plans = {ratelimit::Plan{"free", 30, 1'000, 10}, ratelimit::Plan{"pro", 300, 50'000, 50}};
  ratelimit::TieredLimiter<ManualClock> tiers(
      plans,
      [&](std::string_view) -> std::optional<std::string> {
        std::string name = upgraded ? "pro" : "free";
        if (tier_first.exchange(false)) {
          tier_entered.set_value();
          tier_release.get_future().wait();
        }
        return name;
      },
      clock);
  std::thread slow_tier([&] { EXPECT_EQ(tiers.plan_for("k").plan.name, "free"); });
  tier_entered.get_future().wait();
  upgraded = true;
  tiers.invalidate("k");
  tier_release.set_value();
  slow_tier.join();
  EXPECT_EQ(tiers.plan_for("k").plan.name, "pro");
}

// As a layer: decisions (and so header fields) carry the override's limit; a denial by another layer rolls the
// override layer back under the key's policy.
TEST(QuotaOverrideMemory, AsALayerAllOrNothing) {
  ManualClock clock;
  OverridableMemoryLimiter<Gcra, ManualClock> limiter(Gcra{10, 1s, 5}, {}, clock);
  OverrideDirectory<Gcra> dir;
  dir.set("vip", Gcra{100, 1s, 20});
  QuotaOverrides overrides(limiter, dir.resolver());
  ratelimit::LimiterLayer quota(overrides, "quota");
  ratelimit::MemoryLimiter<FixedWindow, ManualClock> ip_limiter(FixedWindow{1, 1min}, {}, clock);
  ratelimit::LimiterLayer ip(ip_limiter, "ip");
  auto d = ratelimit::check_layers({{&quota, "vip"}, {&ip, "1.2.3.4"}});
  ASSERT_TRUE(d);
  const auto fields = d.policy_decisions();
  ASSERT_EQ(fields.size(), 2u);
  EXPECT_EQ(fields[0].decision.limit, 20);
  EXPECT_EQ(fields[0].decision.remaining, 19);
  d = ratelimit::check_layers({{&quota, "vip"}, {&ip, "1.2.3.4"}});
  EXPECT_FALSE(d);
  EXPECT_EQ(d.layers[0].verdict, ratelimit::Verdict::rolled_back);
  EXPECT_EQ(overrides.peek("vip").remaining, 19);
  EXPECT_EQ(quota.quota().quota, 5);  // RateLimit-Policy advertises the limiter's policy
}

// 8 threads check one key while the resolver's answer flips between two limits and the cache is invalidated:
// every decision is wholly one policy's, and the count is exact (no admission lost or counted twice).
TEST(QuotaOverrideMemory, RacingChecksWhileTheOverrideChanges) {
  ManualClock clock;
  clock.advance(1000s);
  OverridableMemoryLimiter<FixedWindow, ManualClock> limiter(FixedWindow{50, 1h}, {}, clock);
  ratelimit_test::expect_exact_while_the_override_flips(limiter, clock, 2000, 20us);
}

}  // namespace
