// A check says when its decision is the failure policy's and not a quota decision (include/ratelimit/redis/README.md
// "Redis backend", failures): single (`check`), batch (`check_many`) and joint (`check_jointly`) checks.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis.hpp>

#include "test_support.hpp"

using namespace std::chrono_literals;
using ratelimit::CheckResult;
using ratelimit::FailurePolicy;
using ratelimit::ManualClock;
using ratelimit::Outcome;
using ratelimit::redis::RedisLimiter;

namespace {

ratelimit::redis::RedisOptions refused(FailurePolicy on_error) {
  ratelimit::redis::RedisOptions o;
  o.port = 1;  // nothing listens there
  o.connect_timeout = 200ms;
  o.on_error = on_error;
  o.time_source = ratelimit::redis::TimeSource::client;
  return o;
}

}  // namespace

TEST(FailureOutcome, QuotaDecisionsSayDecided) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  RedisLimiter<ratelimit::FixedWindow, ManualClock> l(
      ratelimit::FixedWindow{.limit = 1, .window = 1min},
      ratelimit_test::client_options(*ratelimit_test::shared_redis(), FailurePolicy::fail_closed), clock);
  const CheckResult first = l.check("k");
  EXPECT_EQ(first.outcome, Outcome::decided);
  EXPECT_TRUE(first);
  const CheckResult second = l.check("k");
  EXPECT_EQ(second.outcome, Outcome::decided);  // a quota denial, not a failure
  EXPECT_FALSE(second.decision.allowed);
  EXPECT_EQ(second.decision.retry_after, 1min);
  const std::array<ratelimit::redis::Request, 2> batch{{{"k", 1}, {"other", 1}}};
  const std::vector<CheckResult> many = l.check_many(batch);
  ASSERT_EQ(many.size(), 2u);
  EXPECT_EQ(many[0], (CheckResult{second.decision, Outcome::decided}));
  EXPECT_EQ(many[1].outcome, Outcome::decided);
  EXPECT_TRUE(many[1].decision.allowed);
}

TEST(FailureOutcome, FailOpenAndFailClosedSaySoForSingleBatchAndJointChecks) {
  ManualClock clock;
  for (const FailurePolicy policy : {FailurePolicy::fail_open, FailurePolicy::fail_closed}) {
    const ratelimit::redis::RedisOptions o = refused(policy);
    auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(o.connection(), o.limiter());
    RedisLimiter<ratelimit::FixedWindow, ManualClock> a(ratelimit::FixedWindow{.limit = 5, .window = 1min}, pool,
                                                       clock);
    RedisLimiter<ratelimit::Gcra, ManualClock> b(ratelimit::Gcra{.limit = 5, .period = 1min, .burst = 2}, pool, clock);
    const bool open = policy == FailurePolicy::fail_open;
    const CheckResult one = a.check("k");
    EXPECT_EQ(one.outcome, Outcome::failure_policy);
    EXPECT_EQ(one.decision.allowed, open);
    EXPECT_EQ(a.allow("k"), one.decision);  // allow gives the same decision without the outcome
    const std::array<ratelimit::redis::Request, 2> batch{{{"k", 1}, {"j", 1}}};
    for (const CheckResult& r : a.check_many(batch)) {
      EXPECT_TRUE(r.failed());
      EXPECT_EQ(r.decision.allowed, open);
    }
    const std::array<ratelimit::JointRequest, 2> joint{{{&a, "k", 1}, {&b, "k", 1}}};
    std::array<CheckResult, 2> out{};
    ASSERT_TRUE(a.check_jointly(joint, out));
    EXPECT_TRUE(out[0].failed() && out[1].failed());
    EXPECT_EQ(out[0].decision.allowed, open);
  }
}

TEST(FailureOutcome, MemoryChecksAlwaysDecide) {
  ManualClock clock;
  ratelimit::MemoryLimiter l(ratelimit::FixedWindow{.limit = 1, .window = 1min}, {}, clock);
  EXPECT_EQ(l.check("k").outcome, Outcome::decided);
  const CheckResult denied = l.check("k");
  EXPECT_EQ(denied.outcome, Outcome::decided);
  EXPECT_FALSE(denied);
}
