// Async calls on Redis Cluster go straight to their node's pipelined connection and follow MOVED and ASK
// from their completions (include/ratelimit/redis/README.md "Redis engine", async API): a slot moves to
// another master while async checks of its key run, and the key admits exactly its limit, each callback
// running once; and a router destroyed with async calls in flight on every master completes each once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include <ratelimit/redis.hpp>

#include "cluster_support.hpp"

namespace {
namespace cluster_async {

using namespace std::chrono_literals;
using ratelimit::CheckResult;
using ratelimit::FailurePolicy;
using ratelimit::ManualClock;
using ratelimit::redis::RedisLimiter;
using ratelimit_test::shared_cluster;

using Limiter = RedisLimiter<ratelimit::SlidingWindowLog, ManualClock>;

/// Outcomes of async checks; every callback counted.
struct Counts {
  std::atomic<std::int64_t> admitted{0}, denied{0}, lost{0}, callbacks{0};
  [[nodiscard]] std::int64_t total() const { return admitted.load() + denied.load() + lost.load(); }
};

/// Waits for a number of callbacks (shared with them: a late one after a failed wait touches nothing freed).
struct Latch {
  std::mutex m;
  std::condition_variable cv;
  int left = 0;
  void done() {
    const std::lock_guard lock(m);
    if (--left == 0) cv.notify_all();
  }
  bool wait(std::chrono::seconds limit) {
    std::unique_lock lock(m);
    return cv.wait_for(lock, limit, [this] { return left == 0; });
  }
};

/// Starts `n` async checks of `key` at once and waits for their callbacks.
bool run_async(Limiter& l, const std::string& key, int n, const std::shared_ptr<Counts>& counts) {
  auto latch = std::make_shared<Latch>();
  latch->left = n;
  for (int i = 0; i < n; ++i) {
    l.check_async(key, 1, [counts, latch](std::exception_ptr e, CheckResult r) {
      ++counts->callbacks;
      ++(e != nullptr ? counts->lost : r.decision.allowed ? counts->admitted : counts->denied);
      latch->done();
    });
  }
  return latch->wait(20s);
}

// The slot of the key moves (IMPORTING/MIGRATING, MIGRATE of the key, SETSLOT NODE) between rounds of
// async checks: the key on the target and the slot still the source's answers ASK, the slot moved answers
// MOVED. No check fails (on_error = raise) and the key admits exactly its limit.
TEST(ClusterAsync, FollowsAskAndMovedWhileASlotMoves) {
  RATELIMIT_REQUIRE_CLUSTER();
  ratelimit_test::RedisCluster& cluster = *shared_cluster();
  ManualClock clock;
  auto opts = ratelimit_test::cluster_client_options(cluster);
  opts.on_error = FailurePolicy::raise;
  constexpr std::int64_t kLimit = 1000;
  Limiter l(ratelimit::SlidingWindowLog{.limit = kLimit, .window = 1h}, opts, clock);
  const std::string key = "async-hot";
  const std::string redis_key = l.redis_key(key);
  const std::uint16_t slot = ratelimit::redis::engine::detail::key_slot(redis_key);
  ASSERT_TRUE(l.peek(key).allowed);  // loads the map
  const ratelimit_test::SlotMove move(cluster, slot, l.cluster()->owner_of(slot));
  ASSERT_NE(move.target(), 0);
  auto counts = std::make_shared<Counts>();

  ASSERT_TRUE(run_async(l, key, 100, counts));
  move.start();
  ASSERT_TRUE(run_async(l, key, 100, counts));  // the key is still on the source
  move.migrate(redis_key);
  ASSERT_TRUE(run_async(l, key, 100, counts));  // the key on the target, the slot the source's: ASK
  const std::uint64_t asks = l.stats().ask_redirections;
  move.finish();
  while (counts->total() < kLimit + 200) ASSERT_TRUE(run_async(l, key, 100, counts));  // MOVED, then the new map

  const auto s = l.stats();
  EXPECT_EQ(counts->callbacks.load(), counts->total()) << "a callback ran twice or never";
  EXPECT_EQ(counts->lost.load(), 0) << "async checks failed during the move";
  EXPECT_EQ(s.failures, 0u);
  EXPECT_EQ(counts->admitted.load(), kLimit) << "the key must admit exactly its limit across the move";
  EXPECT_GT(asks, 0u) << "no async check met ASK while the key was on the target";
  EXPECT_GT(s.moved_redirections, 0u) << "no async check met MOVED after the move";
  EXPECT_EQ(l.cluster()->owner_of(slot), "127.0.0.1:" + std::to_string(move.target()));
  EXPECT_EQ(l.peek(key).remaining, 0);
}

// Async checks on keys of every master, the limiter (and with it the router) destroyed while they are in
// flight: every callback runs exactly once, before the destructor returns.
TEST(ClusterAsync, RouterDestroyedWithCallsInFlightCompletesEachOnce) {
  RATELIMIT_REQUIRE_CLUSTER();
  ManualClock clock;
  auto opts = ratelimit_test::cluster_client_options(*shared_cluster());
  opts.on_error = FailurePolicy::fail_closed;
  auto counts = std::make_shared<Counts>();
  constexpr int kCalls = 3000;
  {
    Limiter l(ratelimit::SlidingWindowLog{.limit = 100, .window = 1h}, opts, clock);
    ASSERT_TRUE(l.peek("warm").allowed);  // loads the map
    for (int i = 0; i < kCalls; ++i) {
      l.check_async("gone" + std::to_string(i % 64), 1, [counts](std::exception_ptr, CheckResult r) {
        ++counts->callbacks;
        ++(r.decision.allowed ? counts->admitted : counts->denied);
      });
    }
  }
  EXPECT_EQ(counts->callbacks.load(), kCalls);
  EXPECT_EQ(counts->total(), kCalls);
}

}  // namespace cluster_async
}  // namespace
