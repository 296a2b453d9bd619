// Tiered plans: resolution through a cached callback, and a plan's three limits all or nothing.
#include <gtest/gtest.h>

#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>

#include <atomic>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "../support/invalid_message.hpp"

using namespace std::chrono_literals;
using ratelimit::ManualClock;
using ratelimit::Plan;
using ratelimit::TieredLimiter;
using ratelimit::TierOptions;
using ratelimit::Verdict;

namespace {

TierOptions example_plans() {
  TierOptions o;
  o.plans = {Plan{"free", 30, 1'000, 10}, Plan{"pro", 300, 50'000, 50}, Plan{"enterprise", 3'000, 500'000, 200}};
  o.default_plan = "free";
  return o;
}

struct Directory {
  std::map<std::string, std::string, std::less<>> plans{{"k-pro", "pro"}, {"k-ent", "enterprise"}, {"k-odd", "gold"}};
  std::atomic<int> calls{0};
  std::optional<std::string> operator()(std::string_view key) {
    ++calls;
    if (auto it = plans.find(key); it != plans.end()) return it->second;
    return std::nullopt;
  }
};

using ratelimit_test::invalid_message;

}  // namespace

TEST(Tiers, ResolvesThroughABoundedExpiringCache) {
  ManualClock clock;
  Directory dir;
  TierOptions o = example_plans();
  o.cache_entries = 2;
  o.cache_ttl = 30s;
  TieredLimiter<ManualClock> tiers(o, [&](std::string_view k) { return dir(k); }, clock);
  EXPECT_EQ(tiers.plan_for("k-pro").plan.name, "pro");
  EXPECT_EQ(tiers.plan_for("k-pro").plan.name, "pro");
  EXPECT_EQ(dir.calls.load(), 1);
  EXPECT_EQ(tiers.plan_for("unknown").plan.name, "free");  // unknown keys get the default
  EXPECT_EQ(tiers.plan_for("k-odd").plan.name, "free");    // so do names that are no plan
  EXPECT_EQ(tiers.cached(), 2u);                            // bounded
  EXPECT_EQ(dir.calls.load(), 3);
  (void)tiers.plan_for("k-odd");
  EXPECT_EQ(dir.calls.load(), 3);
  clock.advance(30s);  // expired: asked again
  dir.plans["k-odd"] = "enterprise";
  EXPECT_EQ(tiers.plan_for("k-odd").plan.name, "enterprise");
  EXPECT_EQ(dir.calls.load(), 4);
  dir.plans["k-odd"] = "pro";
  tiers.invalidate("k-odd");
  EXPECT_EQ(tiers.plan_for("k-odd").plan.name, "pro");
}

TEST(Tiers, FreePlanBurstThenMinuteThenDayAllOrNothing) {
  ManualClock clock;
  Directory dir;
  TieredLimiter<ManualClock> tiers(example_plans(), [&](std::string_view k) { return dir(k); }, clock);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(tiers.allow("anon")) << i;  // burst 10 at once
  const auto d = tiers.allow("anon");
  ASSERT_FALSE(d);
  EXPECT_EQ(d.violated_policies(), std::vector<std::string>{"free-burst"});
  EXPECT_EQ(d.layers[0].verdict, Verdict::rolled_back);
  EXPECT_EQ(d.layers[0].decision.remaining, 20);  // minute: 30 - 10, the denied one given back
  EXPECT_EQ(d.layers[1].decision.remaining, 990);
  EXPECT_EQ(d.decision.retry_after, 2s);  // one token per 60 s / 30 = 2 s
  // Pro keys have their own, larger limits.
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(tiers.allow("k-pro")) << i;
  EXPECT_FALSE(tiers.allow("k-pro"));
}

TEST(Tiers, DayLimitDenialConsumesNoMinuteOrBurstQuota) {
  ManualClock clock;
  TierOptions o;
  o.plans = {Plan{"tiny", 5, 6, 5}};
  TieredLimiter<ManualClock> tiers(o, [](std::string_view) { return std::nullopt; }, clock);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(tiers.allow("k"));
  clock.set(ManualClock::time_point(60s));  // next minute window, bucket refilled
  ASSERT_TRUE(tiers.allow("k"));            // the 6th of the day
  const auto d = tiers.allow("k");
  ASSERT_FALSE(d);
  EXPECT_EQ(d.violated_policies(), std::vector<std::string>{"tiny-day"});
  auto& p = tiers.plan_at(0);
  EXPECT_EQ(p.minute->peek("k").remaining, 4);
  // Burst T = 12 s: one request at 60 s leaves a 12 s backlog, floor((60 - 12) / 12) = 4.
  EXPECT_EQ(p.burst->peek("k").remaining, 4);
  EXPECT_EQ(d.decision.retry_after, 24h - 60s);
  EXPECT_EQ(p.day_layer.stats().snapshot().denied, 1u);
  EXPECT_EQ(p.minute_layer.stats().snapshot().rolled_back, 1u);
}

TEST(Tiers, BadOptionsNameTheField) {
  auto none = [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
  auto starts = [](const std::string& what, const std::string& prefix) { return what.rfind(prefix, 0) == 0; };
  EXPECT_TRUE(starts(invalid_message([&] { TieredLimiter<> t(TierOptions{}, none); }), "TierOptions.plans:"));
  TierOptions dup;
  dup.plans = {Plan{"a", 1, 1, 1}, Plan{"a", 2, 2, 2}};
  EXPECT_TRUE(starts(invalid_message([&] { TieredLimiter<> t(dup, none); }), "TierOptions.plans:"));
  TierOptions bad_default = example_plans();
  bad_default.default_plan = "platinum";
  EXPECT_TRUE(starts(invalid_message([&] { TieredLimiter<> t(bad_default, none); }), "TierOptions.default_plan:"));
  TierOptions zero = example_plans();
  zero.plans[1].per_day = 0;
  EXPECT_TRUE(starts(invalid_message([&] { TieredLimiter<> t(zero, none); }), "Plan.per_day:"));
  TierOptions no_cache = example_plans();
  no_cache.cache_entries = 0;
  EXPECT_TRUE(starts(invalid_message([&] { TieredLimiter<> t(no_cache, none); }), "TierOptions.cache_entries:"));
  EXPECT_TRUE(starts(invalid_message([&] { TieredLimiter<> t(example_plans(), nullptr); }), "resolver:"));
}

TEST(Tiers, OverLongKeysAreRejectedBeforeTheResolverOrTheCache) {
  ManualClock clock;
  Directory dir;
  TierOptions o = example_plans();
  o.memory.max_key_bytes = 64;
  TieredLimiter<ManualClock> tiers(o, [&](std::string_view k) { return dir(k); }, clock);
  for (int i = 0; i < 300; ++i) {
    const std::string key = std::to_string(i) + std::string(65, 'x');  // 66..68 bytes, each distinct
    ASSERT_EQ(invalid_message([&] { (void)tiers.plan_for(key); }).rfind("key: ", 0), 0u) << i;
    ASSERT_EQ(invalid_message([&] { (void)tiers.allow(key); }).rfind("key: ", 0), 0u) << i;
  }
  EXPECT_EQ(dir.calls.load(), 0);  // no resolver call for a key no limiter would take
  EXPECT_EQ(tiers.cached(), 0u);   // and nothing kept
  // At the bound a key is a key like any other: resolved once, cached, limited.
  const std::string longest(64, 'k');
  EXPECT_EQ(tiers.plan_for(longest).plan.name, "free");
  EXPECT_TRUE(tiers.allow(longest));
  EXPECT_EQ(dir.calls.load(), 1);
  EXPECT_EQ(tiers.cached(), 1u);
}
