// The public option aggregates of include/ratelimit/http/ and layers/ take designated initializers naming any one
// member. This file is compiled with -Wextra -Werror (tests/http/CMakeLists.txt), so a member without a
// default member initializer fails the build (GCC: "missing initializer for member ..."); the tests
// then check that the omitted members get their documented defaults.
#include <gtest/gtest.h>

#include <ratelimit/http.hpp>
#include <ratelimit/http/problem.hpp>
#include <ratelimit/ratelimit.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace std::chrono_literals;

TEST(DesignatedInit, TierOptionsWithOnlyPlans) {
  const ratelimit::TierOptions o{.plans = {ratelimit::Plan{.name = "free", .per_minute = 30, .per_day = 1'000, .burst = 10}}};
  EXPECT_EQ(o.plans.size(), 1u);
  EXPECT_EQ(o.default_plan, "");
  EXPECT_EQ(o.cache_entries, 10'000u);
  EXPECT_EQ(o.cache_ttl, 1min);
  EXPECT_EQ(o.memory.max_key_bytes, 512u);
  EXPECT_EQ(o.layer.penalty, 0ns);
  ratelimit::TieredLimiter<ratelimit::ManualClock> tiers(o, [](std::string_view) { return std::nullopt; });
  EXPECT_EQ(tiers.plan_for("k").plan.name, "free");
}

TEST(DesignatedInit, PlanWithOnlyAName) {
  const ratelimit::Plan p{.name = "x"};
  EXPECT_EQ(p.per_minute, 0);
  EXPECT_EQ(p.per_day, 0);
  EXPECT_EQ(p.burst, 0);
}

TEST(DesignatedInit, LayerOptionsAndLayerRequest) {
  const ratelimit::LayerOptions o{.penalty = 1s};
  EXPECT_EQ(o.penalty_max_keys, 100'000u);
  EXPECT_FALSE(o.on_limited);
  const ratelimit::LayerRequest r{.key = "k"};
  EXPECT_EQ(r.layer, nullptr);
  EXPECT_EQ(r.cost, 1);
}

TEST(DesignatedInit, MemoryLimiterFactoryWithOnlyOptions) {
  const ratelimit::MemoryLimiterFactory<ratelimit::ManualClock> f{.options = {.max_keys = 10}};
  const auto limiter = f(ratelimit::FixedWindow{.limit = 1, .window = 1s}, "n");
  EXPECT_TRUE(limiter->allow("k"));
  EXPECT_FALSE(limiter->allow("k"));
}

TEST(DesignatedInit, HeaderAndProblemAggregates) {
  const ratelimit::QuotaPolicy q{.name = "p"};
  EXPECT_EQ(q.quota, 0);
  EXPECT_EQ(q.window, 1s);
  const ratelimit::PolicyDecision d{.policy = &q};
  EXPECT_EQ(d.decision, ratelimit::Decision{});
  const ratelimit::http::FieldOptions f{.classic = false};
  EXPECT_TRUE(f.ietf);
  EXPECT_EQ(f.reset, ratelimit::http::ResetFormat::delta_seconds);
  const ratelimit::http::Problem p{.status = 0};
  EXPECT_TRUE(p.violated_policies.empty());
  EXPECT_TRUE(p.detail.empty());
  EXPECT_FALSE(p.retry_after_seconds);
}
