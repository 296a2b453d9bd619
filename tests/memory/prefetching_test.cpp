// MemoryLimiter::allow reads the clock before it hashes the key while every table of the store is small, and
// hashes first (to start loading the key's slot during the clock read) once a table has reached the prefetch
// size (ShardedStore::prefetching). Both orders decide alike, for every policy.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <ratelimit/memory/sharded_store.hpp>
#include <ratelimit/ratelimit.hpp>

namespace {
namespace prefetching {  // named: the unity build joins this file with others

using namespace std::chrono_literals;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;

struct Count {
  std::int64_t value = 0;
};

TEST(Prefetching, StartsOnceATableReachesThePrefetchSizeAndStays) {
  ratelimit::detail::ShardedStore<Count> store(1'000'000, 1);
  auto add = [](Count& c, bool) {
    ++c.value;
    return std::pair{0, true};
  };
  auto never_full = [](const Count&) { return false; };
  EXPECT_FALSE(store.prefetching());
  int keys = 0;
  while (!store.prefetching() && keys < 10'000) {
    const std::string key = "key-" + std::to_string(keys++);
    store.update(key, store.hash(key), add, never_full);
  }
  ASSERT_TRUE(store.prefetching());
  // 1,024 slots at a load of 0.7 to 0.875: the table reached them between about 700 and 900 keys.
  EXPECT_GE(keys, 700);
  EXPECT_LE(keys, 1024);
  // Emptied again (and shrunk), the store stays in the prefetching order: a hint, never switched back and forth.
  store.sweep([](const Count&) { return true; });
  EXPECT_EQ(store.size(), 0u);
  EXPECT_TRUE(store.prefetching());
}

template <class P>
P policy();
template <>
ratelimit::Gcra policy() {
  return {.limit = 3, .period = 1s, .burst = 2};
}
template <>
ratelimit::TokenBucket policy() {
  return {.capacity = 2, .refill_tokens = 3, .refill_period = 1s};
}
template <>
ratelimit::FixedWindow policy() {
  return {.limit = 2, .window = 1s};
}
template <>
ratelimit::SlidingWindowCounter policy() {
  return {.limit = 2, .window = 1s};
}
template <>
ratelimit::SlidingWindowLog policy() {
  return {.limit = 2, .window = 1s};
}

template <class P>
class PrefetchingOrder : public ::testing::Test {};
using Policies = ::testing::Types<ratelimit::Gcra, ratelimit::TokenBucket, ratelimit::FixedWindow,
                                  ratelimit::SlidingWindowCounter, ratelimit::SlidingWindowLog>;
TYPED_TEST_SUITE(PrefetchingOrder, Policies);

// One shard takes 3,000 keys into one large table (the prefetching order from about 900 keys on); 256 shards
// keep about 12 keys each in small tables (the clock first throughout). Fed the same checks at the same times,
// every decision is equal, allowed and denied ones alike.
TYPED_TEST(PrefetchingOrder, DecidesAsTheClockFirstOrder) {
  using P = TypeParam;
  ManualClock clock;
  clock.set(ManualClock::time_point(1h));
  MemoryLimiter<P, ManualClock> large(policy<P>(), {.max_keys = 100'000, .shards = 1}, clock);
  MemoryLimiter<P, ManualClock> small(policy<P>(), {.max_keys = 100'000, .shards = 256}, clock);
  std::vector<std::string> keys;
  for (int k = 0; k < 3000; ++k) keys.push_back("client-" + std::to_string(k));
  std::mt19937_64 random(11);
  std::size_t allowed = 0, denied = 0;
  for (int round = 0; round < 4; ++round) {
    for (const std::string& key : keys) {
      clock.advance(std::chrono::nanoseconds(random() % 400'000));  // a round takes about 0.6 s
      const auto cost = static_cast<std::int64_t>(random() % 3);
      const ratelimit::Decision want = small.allow(key, cost);
      ASSERT_EQ(large.allow(key, cost), want) << "round " << round << ", " << key;
      (want.allowed ? allowed : denied) += 1;
    }
  }
  EXPECT_GT(allowed, 1000u);
  EXPECT_GT(denied, 100u);
  // The large table did reach the prefetch size (1,024 slots); no small one came near it.
  using Slot = typename ratelimit::detail::KeyTable<ratelimit::StateOf<P>>::Slot;
  EXPECT_GE(large.table_bytes(), 1024 * sizeof(Slot));
  EXPECT_LT(small.table_bytes() / small.shard_count(), 1024 * sizeof(Slot) / 8);
}

}  // namespace prefetching
}  // namespace
