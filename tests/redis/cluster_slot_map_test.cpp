// The slot map when a slot has no owner: a check on such a slot triggers a refresh of the map, and when
// the refresh names an owner the check goes there (nothing was sent, so nothing can run twice).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include <ratelimit/redis.hpp>

#include "cluster_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::ManualClock;
using ratelimit::redis::RedisLimiter;
using ratelimit_test::RedisCluster;
using ratelimit_test::shared_cluster;

// True when the node on `port` believes some master serves `slot`.
bool covered(int port, std::uint16_t slot) {
  auto admin = RedisCluster::admin(port);
  const auto r = admin.command({"CLUSTER", "SLOTS"});
  for (std::size_t i = 0; i < r->elements; ++i) {
    if (r->element[i]->element[0]->integer <= slot && slot <= r->element[i]->element[1]->integer) return true;
  }
  return false;
}

// Waits until every node agrees that `slot` is (or is not) served; false after 10 s.
bool wait_covered(const RedisCluster& cluster, std::uint16_t slot, bool want) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    bool all = true;
    for (const auto& s : cluster.servers()) all = all && covered(s->port(), slot) == want;
    if (all) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// Takes `slot` from every node's map (full coverage off, so the other slots keep serving); the
// destructor gives it back to `owner` and restores the cluster's defaults.
class UnassignedSlot {
 public:
  UnassignedSlot(RedisCluster& cluster, std::uint16_t slot, int owner) : cluster_(cluster), slot_(slot), owner_(owner) {
    for (const auto& s : cluster_.servers()) {
      auto admin = RedisCluster::admin(s->port());
      (void)admin.command({"CONFIG", "SET", "cluster-require-full-coverage", "no"});
      (void)admin.command({"CLUSTER", "DELSLOTS", std::to_string(slot_)});
    }
  }
  void give_back() {
    if (given_back_) return;
    given_back_ = true;
    auto admin = RedisCluster::admin(owner_);
    (void)admin.command({"CLUSTER", "ADDSLOTS", std::to_string(slot_)});
  }
  ~UnassignedSlot() {
    give_back();
    (void)wait_covered(cluster_, slot_, true);
    for (const auto& s : cluster_.servers()) {
      auto admin = RedisCluster::admin(s->port());
      (void)admin.command({"CONFIG", "SET", "cluster-require-full-coverage", "yes"});
    }
    cluster_.wait_ready(30s);
  }
  UnassignedSlot(const UnassignedSlot&) = delete;
  UnassignedSlot& operator=(const UnassignedSlot&) = delete;

 private:
  RedisCluster& cluster_;
  std::uint16_t slot_;
  int owner_;
  bool given_back_ = false;
};

// The router loads a map in which the key's slot has no owner; the slot is then assigned. The check
// finds no owner, refreshes the map, and must then run on the new owner instead of failing.
TEST(ClusterSlotMap, SlotWithoutOwnerIsRetriedAfterTheRefresh) {
  RATELIMIT_REQUIRE_CLUSTER();
  RedisCluster& cluster = *shared_cluster();
  ManualClock clock;
  auto o = ratelimit_test::cluster_client_options(cluster);
  o.cluster_refresh_interval = 0ms;
  const ratelimit::Gcra policy{.limit = 5, .period = 1s, .burst = 5};
  const std::string key = "orphan";
  std::uint16_t slot = 0;
  int owner = 0;
  {
    RedisLimiter probe(policy, o, clock);
    ASSERT_TRUE(probe.peek(key).allowed);
    slot = ratelimit::redis::engine::detail::key_slot(probe.redis_key(key));
    const std::string endpoint = probe.cluster()->owner_of(slot);
    owner = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  }
  UnassignedSlot unassigned(cluster, slot, owner);
  ASSERT_TRUE(wait_covered(cluster, slot, false)) << "slot " << slot << " still served";

  RedisLimiter l(policy, o, clock);
  std::string other = "elsewhere";
  while (ratelimit::redis::engine::detail::key_slot(l.redis_key(other)) == slot) other += "x";
  ASSERT_TRUE(l.peek(other).allowed);  // loads the map without the slot
  ASSERT_EQ(l.cluster()->owner_of(slot), "");

  unassigned.give_back();
  ASSERT_TRUE(wait_covered(cluster, slot, true)) << "slot " << slot << " not reassigned";
  ratelimit::Decision d;
  ASSERT_NO_THROW(d = l.allow(key));
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 4);
  EXPECT_EQ(l.cluster()->owner_of(slot), "127.0.0.1:" + std::to_string(owner));
  EXPECT_EQ(l.stats().failures, 0u);
}

}  // namespace
