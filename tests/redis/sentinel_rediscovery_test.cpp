// Redis Sentinel after a manual failover (include/ratelimit/redis/README.md "Redis Sentinel"): a master with one
// replica and one sentinel; `SENTINEL FAILOVER` promotes the replica. Async checks follow the new master as sync ones
// do: once the old master is demoted, its first READONLY makes the route ask the sentinels at once (not at its next
// periodic check); and while the old master is still writable (the sentinels reconfigure it only at their next INFO, up
// to 10 s later), checks follow the new master within `sentinel.check_interval`; the replaced master's connections
// close once nothing uses them.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "sentinel_support.hpp"
#include "test_support.hpp"

// Named inside the anonymous namespace: a unity build puts several test files in one unit.
namespace {
namespace sentinel_rediscovery {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using ratelimit::FixedWindow;
using ratelimit::redis::RedisLimiter;
using ratelimit::redis::SentinelRoute;
using ratelimit::redis::engine::text;
using ratelimit_test::wait_for;

/// What one async check met.
enum class Met { decided, readonly, other };

class SentinelAfterFailover : public testing::Test {
 protected:
  void SetUp() override {
    RATELIMIT_REQUIRE_REDIS();
    const std::string& binary = ratelimit_test::redis_server_binary();
    master_ = std::make_unique<ratelimit_test::RedisServer>(binary);
    replica_ = std::make_unique<ratelimit_test::RedisServer>(
        binary, 0, true, std::vector<std::string>{"--replicaof", "127.0.0.1", std::to_string(master_->port())});
    auto r = replica_->admin();
    ASSERT_TRUE(wait_for(
        [&] {
          return text(*r.command({"INFO", "replication"})).find("master_link_status:up") != std::string_view::npos;
        },
        10s));
    sentinel_ = std::make_unique<ratelimit_test::SentinelProcess>(binary, master_->port());
    auto s = sentinel_->server().admin();
    ASSERT_TRUE(wait_for(
        [&] {
          return s.command({"SENTINEL", "replicas", "mymaster"})->elements == 1;
        },
        10s))
        << "the sentinel did not find the replica";
  }

  /// Asks the sentinel for a manual failover (retried while it finds no replica good enough yet) and
  /// waits until it names the replica; returns when it did.
  Steady::time_point fail_over() {
    auto s = sentinel_->server().admin();
    const std::string replica = std::to_string(replica_->port());
    EXPECT_TRUE(wait_for([&] { return text(*s.command({"SENTINEL", "FAILOVER", "mymaster"})) == "OK"; }, 10s));
    EXPECT_TRUE(wait_for(
        [&] {
          const auto r = s.command({"SENTINEL", "get-master-addr-by-name", "mymaster"});
          return r->elements == 2 && text(*r->element[1]) == replica;
        },
        10s))
        << "the sentinel did not switch to the replica";
    return Steady::now();
  }

  [[nodiscard]] ratelimit::redis::RedisOptions options(std::chrono::milliseconds check_interval) const {
    auto o = ratelimit_test::client_options(*master_);
    o.command_timeout = 500ms;
    o.connect_timeout = 500ms;
    o.sentinel.check_interval = check_interval;
    return ratelimit_test::sentinel_options({sentinel_->port()}, "mymaster", o);
  }

  /// One async check of a fresh key; what it met.
  static Met check_async(RedisLimiter<FixedWindow>& l) {
    static int n = 0;
    // Shared with the completion: on a stalled machine it may run after this gave up waiting.
    auto met = std::make_shared<std::promise<Met>>();
    l.allow_async("k" + std::to_string(n++), 1, 2s, [met](std::exception_ptr e, ratelimit::Decision) {
      if (!e) return met->set_value(Met::decided);
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        met->set_value(std::string(x.what()).find("READONLY") != std::string::npos ? Met::readonly : Met::other);
      }
    });
    auto f = met->get_future();
    return f.wait_for(5s) == std::future_status::ready ? f.get() : Met::other;
  }

  /// Clients of the server behind `admin` with no name, but `admin` itself: the route's connections (the
  /// sentinels name theirs).
  static int clients_of(ratelimit::redis::engine::Connection& admin) {
    const std::string me = "id=" + std::to_string(admin.command({"CLIENT", "ID"})->integer) + " ";
    std::istringstream lines{std::string(text(*admin.command({"CLIENT", "LIST"})))};
    int n = 0;
    for (std::string line; std::getline(lines, line);) {
      if (!line.starts_with(me) && line.find(" name= ") != std::string::npos) ++n;
    }
    return n;
  }

  std::unique_ptr<ratelimit_test::RedisServer> master_;
  std::unique_ptr<ratelimit_test::RedisServer> replica_;
  std::unique_ptr<ratelimit_test::SentinelProcess> sentinel_;
};

// The old master demoted (as the sentinels do at their next INFO): async checks leave it once its first
// READONLY made the route ask the sentinels, although the route's periodic check is 30 s away.
TEST_F(SentinelAfterFailover, AsyncChecksLeaveADemotedMasterAtOnce) {
  RedisLimiter<FixedWindow> l(FixedWindow{.limit = 5, .window = 1h}, options(30s));
  auto* route = static_cast<SentinelRoute*>(l.route().get());
  ASSERT_EQ(check_async(l), Met::decided);
  ASSERT_EQ(route->master_address(), "127.0.0.1:" + std::to_string(master_->port()));
  (void)fail_over();
  auto old_master = master_->admin();
  ASSERT_EQ(text(*old_master.command({"REPLICAOF", "127.0.0.1", std::to_string(replica_->port())})), "OK");
  const auto demoted = Steady::now();
  int readonly = 0, decided = 0, other = 0;
  auto last_readonly = demoted;
  while (Steady::now() < demoted + 1500ms) {
    switch (check_async(l)) {
      case Met::decided: ++decided; break;
      case Met::readonly:
        ++readonly;
        last_readonly = Steady::now();
        break;
      case Met::other: ++other; break;
    }
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(last_readonly - demoted).count();
  // The discovery runs in the background: the calls made meanwhile still meet READONLY, for milliseconds.
  EXPECT_LT(ms, 200) << readonly << " async checks met READONLY, the last " << ms << " ms after the demotion";
  EXPECT_GT(decided, 10);
  EXPECT_EQ(other, 0);
  EXPECT_EQ(route->master_address(), "127.0.0.1:" + std::to_string(replica_->port()));
  EXPECT_EQ(l.stats().master_changes, 1u);
}

// The old master still writable: nothing fails, so checks follow the new master at the route's next
// periodic check, within `check_interval` of the sentinels' switch (include/ratelimit/redis/README.md "Redis
// Sentinel").
TEST_F(SentinelAfterFailover, ChecksFollowTheNewMasterWithinTheCheckInterval) {
  constexpr auto interval = 500ms;
  RedisLimiter<FixedWindow> l(FixedWindow{.limit = 5, .window = 1h}, options(interval));
  auto* route = static_cast<SentinelRoute*>(l.route().get());
  ASSERT_EQ(check_async(l), Met::decided);
  std::atomic<bool> stop{false};
  std::thread load([&] {
    while (!stop.load()) (void)check_async(l);
  });
  const auto switched = fail_over();
  const std::string replica = "127.0.0.1:" + std::to_string(replica_->port());
  const bool followed = wait_for([&] { return route->master_address() == replica; }, 3s);
  const auto after = Steady::now() - switched;
  stop.store(true);
  load.join();
  ASSERT_TRUE(followed) << "still on " << route->master_address();
  // The switch is seen by polling (20 ms), the follow by polling (20 ms): some slack for a loaded machine.
  EXPECT_LE(after, interval + 300ms) << std::chrono::duration_cast<std::chrono::milliseconds>(after).count() << " ms";
  EXPECT_EQ(check_async(l), Met::decided);
}

// The replaced master's pool goes once nothing uses it: its connections close (and its I/O threads end),
// instead of living as long as the route.
TEST_F(SentinelAfterFailover, AReplacedMastersConnectionsClose) {
  RedisLimiter<FixedWindow> l(FixedWindow{.limit = 5, .window = 1h}, options(200ms));
  auto* route = static_cast<SentinelRoute*>(l.route().get());
  ASSERT_EQ(check_async(l), Met::decided);
  ASSERT_TRUE(l.allow("sync").allowed);
  auto old_master = master_->admin();
  ASSERT_GT(clients_of(old_master), 0);
  (void)fail_over();
  const std::string replica = "127.0.0.1:" + std::to_string(replica_->port());
  ASSERT_TRUE(wait_for(
      [&] {
        (void)check_async(l);
        return route->master_address() == replica;
      },
      3s));
  // Checks on the new master meanwhile; the route asks the sentinels every 200 ms.
  const bool closed = wait_for(
      [&] {
        (void)check_async(l);
        (void)l.allow("sync");
        return clients_of(old_master) == 0;
      },
      3s);
  EXPECT_TRUE(closed) << clients_of(old_master) << " connections of the route still open on the old master";
  EXPECT_EQ(l.stats().master_changes, 1u);
  EXPECT_GE(l.stats().connects, 2u) << "the counters of the freed pool are kept";
}

}  // namespace sentinel_rediscovery
}  // namespace
