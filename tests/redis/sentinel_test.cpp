// Redis Sentinel (include/ratelimit/redis/README.md "Redis Sentinel"): the limiter finds the master through the
// sentinels, skips a sentinel that is down, and says clearly when no sentinel knows the master's name. The failover
// under load is the heavy program sentinel_failover.cpp (ctest -R SentinelFailover, with the heavy tests on).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>

#include <ratelimit/redis.hpp>

#include "sentinel_support.hpp"
#include "test_support.hpp"

namespace {

using ratelimit::BackendError;
using ratelimit::FixedWindow;
using ratelimit::ManualClock;
using ratelimit::Outcome;
using ratelimit::redis::RedisLimiter;
using ratelimit::redis::SentinelRoute;
using namespace std::chrono_literals;

class Sentinel : public testing::Test {
 protected:
  void SetUp() override {
    RATELIMIT_REQUIRE_REDIS();
    master_ = std::make_unique<ratelimit_test::RedisServer>(ratelimit_test::redis_server_binary());
    sentinel_ =
        std::make_unique<ratelimit_test::SentinelProcess>(ratelimit_test::redis_server_binary(), master_->port());
  }
  ratelimit::redis::RedisOptions options(const std::vector<int>& sentinels, const std::string& name = "mymaster",
                                         ratelimit::FailurePolicy on_error = ratelimit::FailurePolicy::raise) {
    auto o = ratelimit_test::client_options(*master_, on_error);
    o.port = 1;  // ignored in Sentinel mode: only the sentinels lead to the master
    return ratelimit_test::sentinel_options(sentinels, name, o);
  }
  std::unique_ptr<ratelimit_test::RedisServer> master_;
  std::unique_ptr<ratelimit_test::SentinelProcess> sentinel_;
};

TEST_F(Sentinel, DiscoversTheMasterAndChecksOnIt) {
  ManualClock clock;
  const auto o = options({sentinel_->port()});
  auto route = std::make_shared<SentinelRoute>(o.connection());
  RedisLimiter<FixedWindow, ManualClock> a(FixedWindow{.limit = 3, .window = 1h}, route, o.limiter(), clock);
  RedisLimiter<FixedWindow, ManualClock> b(FixedWindow{.limit = 5, .window = 1h}, route, o.limiter(), clock);
  EXPECT_EQ(a.allow("k").remaining, 2);
  EXPECT_EQ(b.allow("k").remaining, 4);
  EXPECT_EQ(route->master_address(), "127.0.0.1:" + std::to_string(master_->port()));
  auto admin = master_->admin();
  EXPECT_EQ(ratelimit_test::scan_keys(admin, o.key_prefix + "*").size(), 2u);  // on the master
  EXPECT_EQ(a.stats().master_discoveries, 1u);
  EXPECT_EQ(a.stats().master_changes, 0u);
  EXPECT_EQ(a.stats().failures, 0u);
}

TEST_F(Sentinel, ADeadSentinelInTheListIsSkipped) {
  ManualClock clock;
  const int dead = ratelimit_test::free_port();
  RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 3, .window = 1h}, options({dead, sentinel_->port()}),
                                           clock);
  EXPECT_EQ(l.allow("k").remaining, 2);
  EXPECT_EQ(l.allow("k").remaining, 1);
  EXPECT_EQ(l.stats().failures, 0u);
  // The one that answered is asked first from then on.
  auto* route = static_cast<SentinelRoute*>(l.route().get());
  EXPECT_EQ(route->refresh(), "127.0.0.1:" + std::to_string(master_->port()));
}

TEST_F(Sentinel, AWrongMasterNameIsAClearErrorAndTheFailurePolicyAnswers) {
  ManualClock clock;
  const int dead = ratelimit_test::free_port();
  RedisLimiter<FixedWindow, ManualClock> raising(FixedWindow{.limit = 3, .window = 1h},
                                                 options({dead, sentinel_->port()}, "nope"), clock);
  try {
    (void)raising.allow("k");
    ADD_FAILURE() << "a master that no sentinel knows was found";
  } catch (const BackendError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.cause(), ratelimit::BackendErrorCause::reply) << what;
    EXPECT_NE(what.find("does not know a master named 'nope'"), std::string::npos) << what;
    EXPECT_NE(what.find("127.0.0.1:" + std::to_string(dead)), std::string::npos) << what;  // and why the other failed
  }
  RedisLimiter<FixedWindow, ManualClock> open(FixedWindow{.limit = 3, .window = 1h},
                                              options({sentinel_->port()}, "nope", ratelimit::FailurePolicy::fail_open),
                                              clock);
  const auto r = open.check("k");
  EXPECT_TRUE(r.decision.allowed);
  EXPECT_EQ(r.outcome, Outcome::failure_policy);
  EXPECT_EQ(open.stats().reply_errors, 1u);
}

TEST_F(Sentinel, NoSentinelReachableFailsAsIo) {
  ManualClock clock;
  RedisLimiter<FixedWindow, ManualClock> l(
      FixedWindow{.limit = 3, .window = 1h},
      options({ratelimit_test::free_port()}, "mymaster", ratelimit::FailurePolicy::fail_closed), clock);
  const auto r = l.check("k");
  EXPECT_FALSE(r.decision.allowed);
  EXPECT_EQ(r.outcome, Outcome::failure_policy);
  EXPECT_EQ(l.stats().io_errors, 1u);
}

TEST_F(Sentinel, AsyncChecksFindTheMasterToo) {
  ManualClock clock;
  RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 3, .window = 1h}, options({sentinel_->port()}), clock);
  // Shared with the completion: it may run after a failed wait returned (the limiter's end completes it).
  auto remaining = std::make_shared<std::promise<std::int64_t>>();
  l.allow_async("k", 1, 5s, [remaining](std::exception_ptr e, ratelimit::Decision d) {
    remaining->set_value(e ? -1 : d.remaining);
  });
  auto f = remaining->get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), 2);
}

TEST(SentinelOptions, BadFieldsAreNamed) {
  ratelimit::redis::ConnectionOptions o;
  o.sentinel.master_name = "m";
  EXPECT_THROW((void)SentinelRoute(o), std::invalid_argument);  // no nodes
  o.sentinel.nodes = {{"127.0.0.1", 0}};
  try {
    (void)SentinelRoute(o);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("SentinelOptions.nodes[0].port"), std::string::npos) << e.what();
  }
  o.sentinel.nodes = {{"127.0.0.1", 26379}};
  o.sentinel.check_interval = 0ms;
  EXPECT_THROW((void)SentinelRoute(o), std::invalid_argument);
  o.sentinel.check_interval = 1s;
  o.cluster_nodes = {{"127.0.0.1", 7000}};
  EXPECT_THROW((void)SentinelRoute(o), std::invalid_argument);
}

}  // namespace
