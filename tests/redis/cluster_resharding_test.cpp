// Resharding while checks run: the slot of a hot key moves to another master (CLUSTER SETSLOT
// IMPORTING/MIGRATING, MIGRATE of its keys, SETSLOT NODE) while two threads keep checking it. The
// limiter follows ASK during the move and MOVED after it; no check is lost (on_error = raise: any
// failure is counted) and the key admits exactly its limit across the move (none over, none under).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "cluster_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::ManualClock;
using ratelimit::redis::RedisLimiter;
using ratelimit_test::RedisCluster;
using ratelimit_test::shared_cluster;

TEST(ClusterResharding, MovingASlotWhileCheckingLosesNothingAndOverAdmitsNothing) {
  RATELIMIT_REQUIRE_CLUSTER();
  RedisCluster& cluster = *shared_cluster();
  ManualClock clock;  // time stands still: only the limit bounds admissions
  auto opts = ratelimit_test::cluster_client_options(cluster);
  opts.pool_size = 2;
  constexpr std::int64_t kLimit = 3000;
  RedisLimiter l(ratelimit::SlidingWindowLog{.limit = kLimit, .window = 1h}, opts, clock);
  const std::string key = "hot";
  const std::string redis_key = l.redis_key(key);
  const std::uint16_t slot = ratelimit::redis::engine::detail::key_slot(redis_key);
  const std::string slot_text = std::to_string(slot);
  ASSERT_TRUE(l.peek(key).allowed);  // loads the map

  const ratelimit_test::SlotMove move(cluster, slot, l.cluster()->owner_of(slot));
  const int source = move.source();
  const int target = move.target();
  ASSERT_NE(target, 0);

  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> admitted{0}, denied{0}, lost{0};
  auto worker = [&] {
    while (!stop.load()) {
      try {
        if (l.allow(key).allowed) {
          ++admitted;
        } else {
          ++denied;
        }
      } catch (const ratelimit::BackendError& e) {
        if (lost++ == 0) std::fprintf(stderr, "first failure: %s\n", e.what());
      }
    }
  };
  // Waits until the workers made `n` more checks (so each phase of the move sees traffic).
  auto let_run = [&](std::int64_t n) {
    const std::int64_t until = admitted.load() + denied.load() + lost.load() + n;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (admitted.load() + denied.load() + lost.load() < until && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
  };
  struct Joiner {  // the workers stop and join even when an assertion returns early
    std::atomic<bool>& stop;
    std::vector<std::thread> threads;
    ~Joiner() {
      stop = true;
      for (auto& t : threads) t.join();
    }
  } workers{stop, {}};
  for (int i = 0; i < 2; ++i) workers.threads.emplace_back(worker);

  auto src = RedisCluster::admin(source);
  let_run(300);
  move.start();
  let_run(300);  // still served by the source: the key is there
  const auto keys = src.command({"CLUSTER", "GETKEYSINSLOT", slot_text, "100"});
  ASSERT_EQ(keys->elements, 1u) << admitted.load() << " admitted, " << denied.load() << " denied, " << lost.load()
                                << " lost so far; source " << source << ", target " << target;
  EXPECT_EQ(ratelimit::redis::engine::text(*keys->element[0]), redis_key);
  move.migrate(redis_key);
  let_run(300);  // the key is on the target, the slot still the source's: ASK
  move.finish();
  // After the move: MOVED, then the updated map; run until the limit is certainly exhausted.
  while (admitted.load() + denied.load() + lost.load() < kLimit + 500) let_run(100);
  stop = true;
  for (auto& t : workers.threads) t.join();
  workers.threads.clear();

  const auto s = l.stats();
  std::printf(
      "resharding slot %u (%d -> %d) under load: %lld admitted, %lld denied, %lld lost; "
      "%llu MOVED, %llu ASK, %llu slot-map loads\n",
      static_cast<unsigned>(slot), source, target, static_cast<long long>(admitted.load()),
      static_cast<long long>(denied.load()), static_cast<long long>(lost.load()),
      static_cast<unsigned long long>(s.moved_redirections), static_cast<unsigned long long>(s.ask_redirections),
      static_cast<unsigned long long>(s.slot_map_refreshes));
  EXPECT_EQ(lost.load(), 0) << "checks failed during the move";
  EXPECT_EQ(s.failures, 0u);
  EXPECT_EQ(admitted.load(), kLimit) << "the key must admit exactly its limit across the move";
  EXPECT_GT(s.ask_redirections, 0u) << "no check ran while the key was on the target and the slot on the source";
  EXPECT_GT(s.moved_redirections, 0u);
  EXPECT_EQ(l.cluster()->owner_of(slot), "127.0.0.1:" + std::to_string(target));
  // The state is whole on the target: the window is full.
  EXPECT_EQ(l.peek(key).remaining, 0);
  auto admin = RedisCluster::admin(target);
  const auto card = admin.command({"EXISTS", redis_key});
  EXPECT_EQ(card->integer, 1);
}

}  // namespace
