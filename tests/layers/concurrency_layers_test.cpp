// Rate and concurrency together (include/ratelimit/concurrency/README.md "Concurrency limits"): a request passes only
// if every rate layer admits and every concurrency limit has room; otherwise nothing is consumed and nothing is held.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include <ratelimit/concurrency.hpp>
#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>

namespace {

using namespace std::chrono_literals;
using ratelimit::ConcurrencyLayer;
using ratelimit::ConcurrencyLimiter;
using ratelimit::FixedWindow;
using ratelimit::LimiterLayer;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;
using ratelimit::PermitStatus;

struct Fixture {
  ManualClock clock;
  MemoryLimiter<FixedWindow, ManualClock> rate{FixedWindow{.limit = 3, .window = 1min}, {}, clock};
  LimiterLayer<MemoryLimiter<FixedWindow, ManualClock>> rate_layer{rate, "export-minute"};
  ConcurrencyLimiter<ManualClock> exports{{.permits = 2}, clock};
  ConcurrencyLayer export_layer{"export-concurrency", exports};
  ConcurrencyLimiter<ManualClock> global{{.permits = 1}, clock};
  ConcurrencyLayer global_layer{"global-concurrency", global};
};

TEST(ConcurrencyLimiterLayers, BothAdmitThenThePermitIsHeldUntilReleased) {
  Fixture f;
  ratelimit::AdmittedRequest r = ratelimit::check_layers({{&f.rate_layer, "key"}}, {{&f.export_layer, "key"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r.permits.size(), 1u);
  EXPECT_EQ(f.exports.in_flight("key"), 1);
  EXPECT_EQ(f.rate.peek("key").remaining, 2);
  r.permits.clear();
  EXPECT_EQ(f.exports.in_flight("key"), 0);
}

TEST(ConcurrencyLimiterLayers, AConcurrencyDenialConsumesNoRate) {
  Fixture f;
  auto a = f.exports.try_acquire("key");
  auto b = f.exports.try_acquire("key");
  const ratelimit::AdmittedRequest r = ratelimit::check_layers({{&f.rate_layer, "key"}}, {{&f.export_layer, "key"}});
  EXPECT_FALSE(r);
  ASSERT_TRUE(r.denied_by);
  EXPECT_EQ(*r.denied_by, 0u);
  EXPECT_EQ(r.concurrency.status, PermitStatus::busy);
  EXPECT_EQ(r.concurrency.in_flight, 2);
  EXPECT_TRUE(r.permits.empty());
  EXPECT_EQ(f.rate.peek("key").remaining, 3);  // nothing consumed
  EXPECT_EQ(r.rate.layers.at(0).verdict, ratelimit::Verdict::unchecked);
  EXPECT_EQ(f.rate_layer.stats().snapshot().allowed, 0u);
}

TEST(ConcurrencyLimiterLayers, ARateDenialHoldsNoPermit) {
  Fixture f;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(f.rate.allow("key"));
  const ratelimit::AdmittedRequest r = ratelimit::check_layers({{&f.rate_layer, "key"}}, {{&f.export_layer, "key"}});
  EXPECT_FALSE(r);
  EXPECT_FALSE(r.denied_by);
  EXPECT_FALSE(r.rate.decision.allowed);
  EXPECT_TRUE(r.permits.empty());
  EXPECT_EQ(f.exports.in_flight("key"), 0);
}

TEST(ConcurrencyLimiterLayers, ALaterConcurrencyDenialReleasesTheEarlierPermits) {
  Fixture f;
  auto held = f.global.try_acquire("all");
  const ratelimit::AdmittedRequest r =
      ratelimit::check_layers({{&f.rate_layer, "key"}}, {{&f.export_layer, "key"}, {&f.global_layer, "all"}});
  EXPECT_FALSE(r);
  EXPECT_EQ(r.denied_by, std::optional<std::size_t>(1));
  EXPECT_EQ(f.exports.in_flight("key"), 0);
  EXPECT_EQ(f.rate.peek("key").remaining, 3);
}

TEST(ConcurrencyLimiterLayers, AtMostPermitsRequestsRunAtOnce) {
  Fixture f;
  f.rate_layer.lists().allow("key");  // rate out of the way: only concurrency decides
  std::vector<ratelimit::AdmittedRequest> running;
  for (int i = 0; i < 4; ++i)
    running.push_back(ratelimit::check_layers({{&f.rate_layer, "key"}}, {{&f.export_layer, "key"}}));
  EXPECT_TRUE(running[0] && running[1]);
  EXPECT_FALSE(running[2] || running[3]);
  running.erase(running.begin());  // one finishes
  EXPECT_TRUE(ratelimit::check_layers({{&f.rate_layer, "key"}}, {{&f.export_layer, "key"}}));
}

// Units from a request may be anything up to INT64_MAX: on a key already holding one, such a request is
// denied (too many units) and the key's limit still holds for the ones after it.
TEST(ConcurrencyLimiterLayers, HugeUnitsAreDeniedAndConsumeNothing) {
  Fixture f;
  auto held = f.exports.try_acquire("key");
  const ratelimit::AdmittedRequest huge = ratelimit::check_layers(
      {{&f.rate_layer, "key"}}, {{&f.export_layer, "key", std::numeric_limits<std::int64_t>::max()}});
  EXPECT_FALSE(huge);
  EXPECT_EQ(huge.concurrency.status, PermitStatus::too_many_units);
  EXPECT_EQ(f.exports.in_flight("key"), 1);
  EXPECT_EQ(f.rate.peek("key").remaining, 3);
  const ratelimit::AdmittedRequest one = ratelimit::check_layers({{&f.rate_layer, "key"}}, {{&f.export_layer, "key"}});
  EXPECT_TRUE(one);
  EXPECT_FALSE(ratelimit::check_layers({{&f.rate_layer, "key"}}, {{&f.export_layer, "key"}}));
}

TEST(ConcurrencyLimiterLayers, BadInputIsRefusedBeforeAnythingIsTaken) {
  Fixture f;
  EXPECT_THROW(ratelimit::check_layers({{&f.rate_layer, "key"}}, {{nullptr, "key"}}), std::invalid_argument);
  EXPECT_THROW(ratelimit::check_layers({{&f.rate_layer, "key"}}, {{&f.export_layer, "key", 0}}), std::invalid_argument);
  EXPECT_THROW(ConcurrencyLayer("", f.exports), std::invalid_argument);
  EXPECT_EQ(f.exports.size(), 0u);
  EXPECT_EQ(f.rate.peek("key").remaining, 3);
}

}  // namespace
