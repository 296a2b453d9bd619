// A hash-flooding attack (include/ratelimit/README.md "Hostile input and faults"): an attacker who knows the store's
// hash computes keys that share one shard and one home slot, so every check walks one long probe run. The store's
// random seed defeats it; a store whose seed is known (as an unseeded hash is) does not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <ratelimit/memory/sharded_store.hpp>

namespace {

struct FloodCount {
  int n = 0;
};
using FloodStore = ratelimit::detail::ShardedStore<FloodCount>;
using ratelimit::detail::HashSeed;

constexpr std::size_t kFloodShards = 16;
constexpr std::size_t kFloodMaxKeys = 1 << 14;

/// `count` 16-byte keys whose hashes under `known` put them in shard 0 at home slot 0 of any table of
/// up to 256 slots: the shard bits are 0 and so are the top 8 bits the table's multiply-shift maps.
std::vector<std::string> flood_colliding_keys(const FloodStore& known, std::size_t count) {
  std::vector<std::string> keys;
  std::string key = "flood-0123456789";
  for (std::uint64_t i = 0; keys.size() < count; ++i) {
    std::memcpy(key.data() + 8, &i, sizeof i);
    const std::uint64_t h = known.hash(key);
    const std::uint64_t mixed = h * 0x9E3779B97F4A7C15ULL;  // the table's home mapping (key_table.hpp)
    if (known.shard_index(h) == 0 && (mixed >> 56) == 0) keys.push_back(key);
  }
  return keys;
}

/// Inserts every key; returns the mean probe displacement and the most keys any one shard holds.
std::pair<double, std::size_t> flood_insert_all(FloodStore& store, const std::vector<std::string>& keys) {
  std::vector<std::size_t> per_shard(kFloodShards, 0);
  for (const std::string& key : keys) {
    const std::uint64_t h = store.hash(key);
    store.update(
        key, h,
        [](FloodCount& c, bool) {
          return std::pair{++c.n, true};
        },
        [](const FloodCount&) { return false; });
    ++per_shard[store.shard_index(h)];
  }
  return {store.mean_displacement(), *std::max_element(per_shard.begin(), per_shard.end())};
}

TEST(HashFlood, KeysCollidingUnderAKnownSeedSpreadUnderTheStoresRandomOne) {
  const HashSeed known_seed{};  // what an unseeded hash amounts to: a seed everybody knows
  FloodStore known(kFloodMaxKeys, kFloodShards, SIZE_MAX, known_seed);
  const std::vector<std::string> keys = flood_colliding_keys(known, 200);

  // Against the known seed the attack works: one shard, one probe run of all the keys.
  const auto [known_displacement, known_max_shard] = flood_insert_all(known, keys);
  EXPECT_EQ(known_max_shard, keys.size());
  EXPECT_GT(known_displacement, 50.0);

  // The store as users get it (a random seed): the same keys land as any keys do.
  FloodStore seeded(kFloodMaxKeys, kFloodShards);
  const auto [displacement, max_shard] = flood_insert_all(seeded, keys);
  EXPECT_LT(displacement, 5.0) << "the attack keys collide in the store";
  EXPECT_LT(max_shard, 40u) << "of " << keys.size() << " keys over " << kFloodShards << " shards";
}

}  // namespace
