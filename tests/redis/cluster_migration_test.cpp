// Checks on a slot in migration (MIGRATING on its owner, IMPORTING on another master), the key still on
// the source or not yet anywhere: a partial sliding-log refund keeps the key whole, and layered checks,
// whose multi-key script the cluster refuses with TRYAGAIN while the slot moves, still enforce the
// limit. Each test cancels its migration (SETSLOT STABLE), so the shared cluster is unchanged.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include <ratelimit/layers/layered.hpp>
#include <ratelimit/redis.hpp>

#include "cluster_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::FailurePolicy;
using ratelimit::ManualClock;
using ratelimit::redis::RedisLimiter;
using ratelimit_test::RedisCluster;
using ratelimit_test::shared_cluster;

std::string reply_text(ratelimit::redis::engine::Connection& c, std::initializer_list<std::string_view> args) {
  const auto r = c.command(args);
  return std::string(ratelimit::redis::engine::text(*r));
}

int port_of(const std::string& endpoint) { return std::stoi(endpoint.substr(endpoint.rfind(':') + 1)); }

// Puts `slot` in migration from its owner to another master; the destructor removes the keys that
// reached the target (`target_keys`) and makes the slot stable again on both.
class Migration {
 public:
  Migration(RedisCluster& cluster, std::uint16_t slot, const std::string& owner_endpoint)
      : slot_(std::to_string(slot)), source_(port_of(owner_endpoint)) {
    for (const int p : cluster.master_ports()) {
      if (p != source_) target_ = p;
    }
    auto src = RedisCluster::admin(source_);
    auto dst = RedisCluster::admin(target_);
    EXPECT_EQ(reply_text(dst, {"CLUSTER", "SETSLOT", slot_, "IMPORTING", RedisCluster::id_of(source_)}), "OK");
    EXPECT_EQ(reply_text(src, {"CLUSTER", "SETSLOT", slot_, "MIGRATING", RedisCluster::id_of(target_)}), "OK");
  }
  ~Migration() {
    auto dst = RedisCluster::admin(target_);
    for (const std::string& k : target_keys) {
      (void)dst.command({"ASKING"});
      (void)dst.command({"DEL", k});
    }
    (void)dst.command({"CLUSTER", "SETSLOT", slot_, "STABLE"});
    auto src = RedisCluster::admin(source_);
    (void)src.command({"CLUSTER", "SETSLOT", slot_, "STABLE"});
  }
  Migration(const Migration&) = delete;
  Migration& operator=(const Migration&) = delete;

  [[nodiscard]] int source() const noexcept { return source_; }
  [[nodiscard]] int target() const noexcept { return target_; }
  std::vector<std::string> target_keys;

 private:
  std::string slot_;
  int source_;
  int target_ = 0;
};

// SlidingWindowLog{10, 60 s}: 3 admitted at one time are one member "t:3"; refunding 1 during the
// migration must leave "t:2" on the source. Taking the member off before adding the smaller one
// empties (deletes) the key in between, and the cluster then refuses the add mid-script.
TEST(ClusterMigration, PartialSlidingLogRefundKeepsTheKey) {
  RATELIMIT_REQUIRE_CLUSTER();
  RedisCluster& cluster = *shared_cluster();
  ManualClock clock;
  RedisLimiter l(ratelimit::SlidingWindowLog{.limit = 10, .window = 60s},
                 ratelimit_test::cluster_client_options(cluster), clock);
  const std::string key = "refunded";
  ASSERT_TRUE(l.allow(key, 3).allowed);
  const std::uint16_t slot = ratelimit::redis::engine::detail::key_slot(l.redis_key(key));
  {
    Migration m(cluster, slot, l.cluster()->owner_of(slot));
    m.target_keys = {l.redis_key(key)};
    ratelimit::Decision d;
    ASSERT_NO_THROW(d = l.refund(key, 1));
    EXPECT_EQ(d.remaining, 8);
    auto src = RedisCluster::admin(m.source());
    EXPECT_EQ(src.command({"EXISTS", l.redis_key(key)})->integer, 1) << "the refund deleted the key";
  }
  EXPECT_EQ(l.peek(key).remaining, 8);
  EXPECT_EQ(l.stats().failures, 0u);
}

// FixedWindow{1, 60 s} and Gcra{1, 60 s, 1} on one router over one user key (one slot), the slot in
// migration and the keys not yet anywhere: the layered script names two missing keys and gets
// TRYAGAIN. Ten layered checks must admit exactly one, without a backend failure (fail_open would
// otherwise admit all ten), under every failure policy.
TEST(ClusterMigration, LayeredChecksOnAMigratingSlotAdmitExactlyTheLimit) {
  RATELIMIT_REQUIRE_CLUSTER();
  RedisCluster& cluster = *shared_cluster();
  for (const FailurePolicy on_error : {FailurePolicy::fail_open, FailurePolicy::raise}) {
    ManualClock clock;
    auto o = ratelimit_test::cluster_client_options(cluster);
    o.on_error = on_error;
    auto router = std::make_shared<ratelimit::redis::ClusterRouter>(o.connection(), o.limiter());
    RedisLimiter<ratelimit::FixedWindow, ManualClock> window(ratelimit::FixedWindow{.limit = 1, .window = 60s}, router,
                                                             clock);
    RedisLimiter<ratelimit::Gcra, ManualClock> gcra(ratelimit::Gcra{.limit = 1, .period = 60s, .burst = 1}, router,
                                                    clock);
    ratelimit::LimiterLayer<decltype(window)> window_layer(window, "window");
    ratelimit::LimiterLayer<decltype(gcra)> gcra_layer(gcra, "gcra");
    const std::string key = "layered";
    ASSERT_TRUE(window.peek(key).allowed);  // loads the map
    const std::uint16_t slot = ratelimit::redis::engine::detail::key_slot(window.redis_key(key));
    ASSERT_EQ(slot, ratelimit::redis::engine::detail::key_slot(gcra.redis_key(key)));
    Migration m(cluster, slot, router->owner_of(slot));
    m.target_keys = {window.redis_key(key), gcra.redis_key(key)};
    int admitted = 0;
    for (int i = 0; i < 10; ++i) {
      ratelimit::LayeredDecision d;
      ASSERT_NO_THROW(d = ratelimit::check_layers({{&window_layer, key}, {&gcra_layer, key}})) << "check " << i;
      if (d) ++admitted;
    }
    EXPECT_EQ(admitted, 1) << "on_error " << static_cast<int>(on_error);
    EXPECT_EQ(window.stats().failures, 0u);
    EXPECT_EQ(gcra.stats().failures, 0u);
    EXPECT_EQ(window_layer.stats().snapshot().backend_errors, 0u);
  }
}

}  // namespace
