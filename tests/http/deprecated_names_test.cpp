// The names that moved keep compiling for one release (README "Changes"): the old http/ headers forward
// to layers/ and most_restrictive.hpp, and http::QuotaPolicy / http::PolicyDecision are aliases of the
// neutral types. Deprecation warnings are expected here and silenced.
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
#include <gtest/gtest.h>

#include <ratelimit/http/headers.hpp>
#include <ratelimit/http/key_lists.hpp>
#include <ratelimit/http/layer.hpp>
#include <ratelimit/http/layer_stats.hpp>
#include <ratelimit/http/layered.hpp>
#include <ratelimit/http/most_restrictive.hpp>
#include <ratelimit/http/penalty_box.hpp>
#include <ratelimit/http/plan_cache.hpp>
#include <ratelimit/http/tiers.hpp>
#include <ratelimit/ratelimit.hpp>

#include <chrono>
#include <type_traits>
#include <vector>

using namespace std::chrono_literals;

static_assert(std::is_same_v<ratelimit::http::QuotaPolicy, ratelimit::QuotaPolicy>);
static_assert(std::is_same_v<ratelimit::http::PolicyDecision, ratelimit::PolicyDecision>);

TEST(DeprecatedNames, OldHeadersAndAliasesStillWork) {
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter limiter(ratelimit::FixedWindow{.limit = 1, .window = 10s}, {}, clock);
  ratelimit::LimiterLayer layer(limiter, "old");
  const ratelimit::http::QuotaPolicy& q = layer.quota();
  EXPECT_EQ(q.quota, 1);
  EXPECT_TRUE(ratelimit::check_layers({{&layer, "k"}}));
  const auto d = ratelimit::check_layers({{&layer, "k"}});
  EXPECT_FALSE(d);
  const std::vector<ratelimit::http::PolicyDecision> entries = d.policy_decisions();
  const auto fields = ratelimit::http::rate_limit_fields(entries);
  ASSERT_FALSE(fields.empty());
  EXPECT_EQ(fields.back().first, "Retry-After");
  EXPECT_EQ(fields.back().second, "10");
}
