// The shard's Robin Hood table against std::unordered_map under random inserts, lookups and erasures.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include <ratelimit/memory/key_table.hpp>

namespace {

struct Counter {
  std::int64_t value = 0;
  std::vector<int> payload;  // a state that owns memory, like the sliding log's
};

using Table = ratelimit::detail::KeyTable<Counter>;

// Few distinct hashes force collisions and long Robin Hood runs; 0 is reserved for empty slots.
std::uint64_t weak_hash(const std::string& key) { return std::hash<std::string>{}(key) % 61 + 1; }
std::uint64_t good_hash(const std::string& key) { return std::hash<std::string>{}(key) | 1; }

std::string random_key(std::mt19937_64& random) {
  const std::size_t length = random() % 3 == 0 ? 17 + random() % 40 : random() % 17;  // inline and heap keys
  std::string key(length, '\0');
  for (char& c : key) c = static_cast<char>(random() % 6);  // small alphabet: many repeats
  return key;
}

// A victim for `replace`: an occupied slot among the next `window` slots from `hash`'s home (as eviction
// samples), or, now and then, anywhere (past empty slots and around the end).
std::size_t pick_victim(Table& table, std::uint64_t hash, std::mt19937_64& random) {
  std::size_t j = random() % 8 == 0 ? random() % table.capacity() : table.home_of(hash);
  for (std::size_t skip = random() % 6;; j = (j + 1) % table.capacity()) {
    if (table.last_used(j) == 0) continue;
    if (skip-- == 0) return j;
  }
}

// The home a store computes before it takes the shard's lock, from the capacity it saw then.
Table::Home home_ahead(const Table& table, std::uint64_t hash) {
  return {table.capacity(), Table::home_in(hash, table.capacity())};
}

void check_against_map(std::uint64_t (*hash)(const std::string&), std::uint64_t seed) {
  std::mt19937_64 random(seed);
  Table table(1'000'000);
  std::unordered_map<std::string, std::int64_t> model;
  std::unordered_map<std::string, std::uint32_t> stamps;
  for (int step = 0; step < 60'000; ++step) {
    const auto stamp = static_cast<std::uint32_t>(step + 1);  // 0 marks an empty slot
    const std::string key = random_key(random);
    const std::uint64_t h = hash(key);
    Table::Slot* slot = table.find(h, key);
    const auto it = model.find(key);
    ASSERT_EQ(slot != nullptr, it != model.end()) << "step " << step;
    ASSERT_EQ(table.find(h, key, home_ahead(table, h)), slot) << "step " << step;
    if (slot != nullptr) {
      ASSERT_EQ(slot->state.value, it->second);
      ASSERT_EQ(slot->key(), key);
    }
    switch (random() % 5) {
      case 0:
      case 1:
        if (slot == nullptr) {
          Table::Slot& added = table.insert(h, key, stamp);
          ASSERT_EQ(added.key(), key);
          added.state.value = step;
          added.state.payload.assign(3, step);
          model[key] = step;
        } else {
          slot->state.value = -step;
          table.touch(*slot, stamp);
          model[key] = -step;
        }
        stamps[key] = stamp;
        break;
      case 4:
        if (slot == nullptr && table.size() > 0) {  // evict one key, insert this one: the size stays
          const std::size_t victim = pick_victim(table, h, random);
          const std::string evicted(table.at(victim).key());
          ASSERT_EQ(table.last_used(victim), stamps[evicted]);
          Table::Slot& added = table.replace(victim, h, key, stamp);
          ASSERT_EQ(added.key(), key);
          added.state.value = step;
          added.state.payload.assign(2, step);
          model.erase(evicted);
          stamps.erase(evicted);
          model[key] = step;
          stamps[key] = stamp;
        }
        break;
      case 2:
        if (slot != nullptr) {
          table.erase(*slot);
          model.erase(it);
          stamps.erase(key);
        }
        break;
      default:
        if (step % 1000 == 0) table.shrink_to_fit();
        break;
    }
    ASSERT_EQ(table.size(), model.size());
    if (step % 5000 == 0) {  // every key still reachable by its probe (the Robin Hood order holds)
      for (const auto& [k, v] : model) ASSERT_NE(table.find(hash(k), k), nullptr) << "step " << step;
    }
    ASSERT_LE(table.size() * 8, table.capacity() * 7 + 8) << "load factor above 7/8";
  }
  // Every key still reachable, and nothing else: walk the slots.
  std::size_t occupied = 0;
  for (std::size_t i = 0; i < table.capacity(); ++i) {
    const Table::Slot& s = table.at(i);
    ASSERT_EQ(s.empty(), table.last_used(i) == 0) << "touch times follow their slots";
    if (s.empty()) continue;
    ++occupied;
    const std::string key(s.key());
    ASSERT_EQ(model.count(key), 1u);
    ASSERT_EQ(s.state.value, model[key]);
    ASSERT_EQ(table.last_used(i), stamps[key]);
    ASSERT_EQ(table.find(s.hash, key), &s);
  }
  EXPECT_EQ(occupied, model.size());
}

TEST(KeyTable, MatchesUnorderedMapWithGoodHash) { check_against_map(good_hash, 1); }
TEST(KeyTable, MatchesUnorderedMapWithCollidingHashes) { check_against_map(weak_hash, 2); }

TEST(KeyTable, HalvingStampsKeepsTheirOrderAndOccupiedSlotsNonZero) {
  Table table(100);
  const std::vector<std::string> keys = {"a", "b", "c", "d"};
  const std::vector<std::uint32_t> given = {1, 2, 7, UINT32_MAX};
  for (std::size_t i = 0; i < keys.size(); ++i) table.insert(good_hash(keys[i]), keys[i], given[i]);
  table.halve_stamps();
  auto stamp_of = [&](const std::string& k) { return table.last_used(table.index_of(*table.find(good_hash(k), k))); };
  EXPECT_EQ(stamp_of("a"), 1u);
  EXPECT_EQ(stamp_of("b"), 1u);
  EXPECT_EQ(stamp_of("c"), 3u);
  EXPECT_EQ(stamp_of("d"), UINT32_MAX >> 1);
  std::size_t occupied = 0;
  for (std::size_t i = 0; i < table.capacity(); ++i) occupied += table.last_used(i) != 0 ? 1u : 0u;
  EXPECT_EQ(occupied, keys.size());
}

// The store computes a key's home before it takes the lock, from the capacity published then; the table may
// have grown or shrunk meanwhile. The lookup starts there only while that capacity holds.
TEST(KeyTable, FindFromAHomeComputedAheadUsesItOnlyWhileTheCapacityHolds) {
  Table table(100'000);
  std::vector<std::string> keys;
  for (int i = 0; i < 3000; ++i) keys.push_back("key-" + std::to_string(i));
  for (const auto& k : keys) table.insert(good_hash(k), k, 1);
  const std::string key = keys[17];  // a copy: keys grows below, which moves its strings
  const std::uint64_t h = good_hash(key);
  Table::Slot* const slot = table.find(h, key);
  ASSERT_NE(slot, nullptr);
  EXPECT_EQ(table.find(h, key, home_ahead(table, h)), slot);
  EXPECT_EQ(table.find(h, key, Table::Home{}), slot);

  // The index is where the probe starts: from half the table away, it ends before it reaches the key.
  Table::Home elsewhere = home_ahead(table, h);
  elsewhere.index = (elsewhere.index + table.capacity() / 2) % table.capacity();
  EXPECT_EQ(table.find(h, key, elsewhere), nullptr);

  // A home computed before the table grew (and, below, shrank) is ignored: the lookup computes the home anew.
  const Table::Home before_growth = home_ahead(table, h);
  for (int i = 3000; i < 6000; ++i) keys.push_back("key-" + std::to_string(i));
  for (std::size_t i = 3000; i < keys.size(); ++i) table.insert(good_hash(keys[i]), keys[i], 1);
  ASSERT_NE(table.capacity(), before_growth.capacity);
  EXPECT_EQ(table.find(h, key, before_growth), table.find(h, key));
  EXPECT_NE(table.find(h, key, before_growth), nullptr);
  const Table::Home before_shrink = home_ahead(table, h);
  for (std::size_t i = 100; i < keys.size(); ++i) table.erase(*table.find(good_hash(keys[i]), keys[i]));
  table.shrink_to_fit();
  ASSERT_NE(table.capacity(), before_shrink.capacity);
  EXPECT_EQ(table.find(h, key, before_shrink), table.find(h, key));
  EXPECT_NE(table.find(h, key, before_shrink), nullptr);

  // Slots but no keys: the probe from a current home stops at an empty slot.
  for (std::size_t i = 0; i < 100; ++i) table.erase(*table.find(good_hash(keys[i]), keys[i]));
  ASSERT_GT(table.capacity(), 0u);
  EXPECT_EQ(table.find(h, key, home_ahead(table, h)), nullptr);
}

TEST(KeyTable, ShrinksWhenEmptiedAndAccountsForLongKeys) {
  Table table(100'000);
  std::vector<std::string> keys;
  for (int i = 0; i < 10'000; ++i) keys.push_back(std::string(40, 'k') + std::to_string(i));
  for (const auto& k : keys) table.insert(good_hash(k), k, 1);
  const std::size_t full_bytes = table.bytes();
  EXPECT_GE(full_bytes, 10'000 * (sizeof(Table::Slot) + sizeof(std::uint32_t) + 40));
  for (const auto& k : keys) table.erase(*table.find(good_hash(k), k));
  table.shrink_to_fit();
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.bytes(), 0u);
}

}  // namespace
