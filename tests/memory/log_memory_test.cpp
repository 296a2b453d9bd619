// Sliding window log memory (include/ratelimit/README.md "Bounded memory"): table_bytes() counts the logs' entries,
// kept as a running count that matches a recount after any mix of operations, and MemoryOptions::max_bytes bounds them.
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include <ratelimit/memory/overridable_limiter.hpp>
#include <ratelimit/ratelimit.hpp>

#include "../support/sanitizers.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;
using ratelimit::SlidingWindowLog;

constexpr std::size_t kEntryBytes = 16;  // one (time, cost) entry

// Sanitizer runtimes keep freed blocks in quarantine and map shadow memory: the resident set says
// nothing about the limiter there, so only table_bytes() is checked in those builds.
using ratelimit_test::kSanitized;

TEST(LogMemory, TableBytesCountTheLogEntries) {
  ManualClock clock;
  MemoryLimiter<SlidingWindowLog, ManualClock> limiter({.limit = 100'000, .window = 1h}, {.max_keys = 1000}, clock);
  limiter.allow("k");
  const std::size_t one_entry = limiter.table_bytes();
  for (int i = 0; i < 1000; ++i) {
    clock.advance(1us);
    ASSERT_TRUE(limiter.allow("k").allowed);
  }
  EXPECT_GE(limiter.table_bytes(), one_entry + 1000 * kEntryBytes) << "1001 entries held, not counted";
}

// A sparse key (one or two live entries, the common case over many keys) keeps its log in its slot: it owns no
// heap block, so a check touches one cache line and its second entry allocates nothing. The third entry takes a
// ring of four, counted exactly; entries leaving the window free ring places, which later entries reuse.
TEST(LogMemory, OneOrTwoLiveEntriesOwnNoHeapBlock) {
  static_assert(sizeof(SlidingWindowLog::Rules::State) == 40, "the log lives in the slot: it must not grow it");
  ManualClock clock;
  MemoryLimiter<SlidingWindowLog, ManualClock> limiter({.limit = 100, .window = 10s}, {.max_keys = 1000}, clock);
  limiter.allow("k");
  const std::size_t slots = limiter.table_bytes();
  clock.advance(1s);
  limiter.allow("k");
  EXPECT_EQ(limiter.table_bytes(), slots) << "two entries held in the slot";
  clock.advance(9500ms);  // the first entry leaves the window, the second stays: again one, then two
  limiter.allow("k");
  EXPECT_EQ(limiter.table_bytes(), slots);
  clock.advance(100ms);
  limiter.allow("k");
  EXPECT_EQ(limiter.table_bytes(), slots + 4 * kEntryBytes) << "three live entries: a ring of four";
  for (int i = 0; i < 20; ++i) {  // a steady three or four live entries: the ring wraps, and is not regrown
    clock.advance(4s);
    limiter.allow("k");
    EXPECT_EQ(limiter.table_bytes(), slots + 4 * kEntryBytes) << "step " << i;
  }
  EXPECT_EQ(limiter.table_bytes(), limiter.recount_table_bytes());
}

// The running count equals a recount from every slot after each kind of change.
TEST(LogMemory, RunningCountMatchesARecountThroughEveryChange) {
  ManualClock clock;
  MemoryLimiter<SlidingWindowLog, ManualClock> limiter({.limit = 50, .window = 10s}, {.max_keys = 64}, clock);
  auto consistent = [&] { return limiter.table_bytes() == limiter.recount_table_bytes(); };
  const std::size_t empty = limiter.table_bytes();
  ASSERT_TRUE(consistent());

  limiter.allow("a");  // insert
  const std::size_t one = limiter.table_bytes();
  EXPECT_GT(one, empty);
  EXPECT_TRUE(consistent());
  for (int i = 0; i < 40; ++i) {  // commits at distinct times grow the log
    clock.advance(1ms);
    limiter.allow("a");
  }
  const std::size_t grown = limiter.table_bytes();
  EXPECT_GE(grown, one + 39 * kEntryBytes);
  EXPECT_TRUE(consistent());

  clock.advance(1ms);
  limiter.refund("a", 1);  // a refund's cost-0 mark
  EXPECT_TRUE(consistent());

  for (int i = 0; i < 3; ++i) {  // three entries: more than the slot holds, so "b" owns a heap block
    clock.advance(1ms);
    limiter.allow("b");
  }
  const std::size_t with_b = limiter.table_bytes();
  limiter.reset("b");  // erase
  EXPECT_LT(limiter.table_bytes(), with_b);
  EXPECT_TRUE(consistent());

  clock.advance(11s);  // everything expired: a touch reclaims the key
  limiter.allow("a", 0);
  EXPECT_EQ(limiter.size(), 0U);
  EXPECT_LT(limiter.table_bytes(), grown);
  EXPECT_TRUE(consistent());

  for (int i = 0; i < 200; ++i) limiter.allow("flood" + std::to_string(i));  // eviction at max_keys
  EXPECT_GT(limiter.evictions(), 0U);
  EXPECT_TRUE(consistent());
  clock.advance(11s);
  EXPECT_GT(limiter.sweep(), 0U);  // sweep (and shrink)
  EXPECT_TRUE(consistent());
}

// Many random operations, with evictions at both bounds: no drift, and the byte budget holds throughout.
TEST(LogMemory, NoDriftAfterManyMixedOperations) {
  constexpr std::size_t kMaxBytes = 64 * 1024;
  constexpr std::size_t kMaxKeys = 128;
  ManualClock clock;
  MemoryLimiter<SlidingWindowLog, ManualClock> limiter({.limit = 200, .window = 2s},
                                                       {.max_keys = kMaxKeys, .max_bytes = kMaxBytes}, clock);
  const std::size_t table_only =
      MemoryLimiter<SlidingWindowLog, ManualClock>({.limit = 200, .window = 2s}, {.max_keys = kMaxKeys}, clock)
          .table_bytes();
  std::mt19937_64 random(7);
  std::size_t slots_max = table_only;
  for (int i = 0; i < 200'000; ++i) {
    clock.advance(std::chrono::microseconds(random() % 2000));
    const std::string key = "k" + std::to_string(random() % 300);
    switch (random() % 10) {
      case 0: limiter.refund(key, static_cast<std::int64_t>(random() % 3)); break;
      case 1: limiter.reset(key); break;
      case 2: limiter.peek(key); break;
      case 3:
        if (random() % 100 == 0) limiter.sweep();
        break;
      default: limiter.allow(key, static_cast<std::int64_t>(random() % 3)); break;
    }
    if (i % 1000 == 0) {
      const std::size_t recount = limiter.recount_table_bytes();
      ASSERT_EQ(limiter.table_bytes(), recount) << "after " << i << " operations";
      slots_max = std::max(slots_max, recount);
    }
  }
  EXPECT_EQ(limiter.table_bytes(), limiter.recount_table_bytes());
  EXPECT_GT(limiter.evictions(), 0U);
  // Slots are at most 1.43 per key of 72 + 4 bytes; the logs stay within the budget.
  EXPECT_LE(slots_max, kMaxKeys * 2 * 76 + kMaxBytes);
}

std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// 100 keys x 100,000 admitted requests at distinct microseconds: without a byte budget the logs hold
// 10 million entries (about 160 MiB, counted nowhere); with max_bytes = 16 MiB both table_bytes() and
// the resident set stay near it.
TEST(LogMemory, AFloodOfLoggedRequestsStaysWithinTheByteBudget) {
  constexpr std::size_t kMaxBytes = std::size_t{16} << 20;
  constexpr std::size_t kMaxKeys = 1000;
  ManualClock clock;
  const std::size_t rss_before = resident_bytes();
  std::size_t rss_max = rss_before, bytes_max = 0;
  {
    MemoryLimiter<SlidingWindowLog, ManualClock> limiter({.limit = 100'000, .window = 1h},
                                                         {.max_keys = kMaxKeys, .max_bytes = kMaxBytes}, clock);
    std::vector<std::string> keys;
    for (int k = 0; k < 100; ++k) keys.push_back("client-" + std::to_string(k));
    for (int i = 0; i < 100'000; ++i) {
      clock.advance(1us);
      for (const std::string& key : keys) ASSERT_TRUE(limiter.allow(key).allowed);
      if (i % 5000 == 0) {
        bytes_max = std::max(bytes_max, limiter.table_bytes());
        rss_max = std::max(rss_max, resident_bytes());
      }
    }
    bytes_max = std::max(bytes_max, limiter.table_bytes());
    rss_max = std::max(rss_max, resident_bytes());
    EXPECT_EQ(limiter.table_bytes(), limiter.recount_table_bytes());
    EXPECT_GT(limiter.evictions(), 0U);  // keys holding usage were evicted to stay in budget, and counted
  }
  const std::size_t slots = kMaxKeys * 2 * 76;
  std::printf("table_bytes() max %zu, resident set growth %zu bytes (budget %zu)\n", bytes_max, rss_max - rss_before,
              kMaxBytes);
  EXPECT_LE(bytes_max, kMaxBytes + slots);
  // Margin for allocator overhead and freed blocks not yet returned.
  if (kSanitized) return;
  EXPECT_LE(rss_max - rss_before, kMaxBytes + slots + (std::size_t{24} << 20))
      << "resident set grew by " << (rss_max - rss_before) / (1 << 20) << " MiB";
}

// One key's own log is bounded by its limit (limit + 1 entries): a budget that cannot hold it is refused
// at construction, and a budget that holds exactly it admits the key's whole limit without evicting it.
TEST(LogMemory, ABudgetBelowOneKeysLongestLogIsRefused) {
  const std::size_t one_key = 2 * (100'000 + 1) * kEntryBytes;
  ManualClock clock;
  try {
    MemoryLimiter<SlidingWindowLog, ManualClock> refused({.limit = 100'000, .window = 1h}, {.max_bytes = one_key - 1},
                                                         clock);
    FAIL() << "a budget below one key's log was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("MemoryOptions.max_bytes"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      (MemoryLimiter<ratelimit::Gcra, ManualClock>({.limit = 10, .period = 1s, .burst = 1}, {.max_bytes = 0}, clock)),
      std::invalid_argument);

  MemoryLimiter<SlidingWindowLog, ManualClock> exact({.limit = 100'000, .window = 1h}, {.max_bytes = one_key}, clock);
  for (int i = 0; i < 100'000; ++i) {
    clock.advance(1us);
    ASSERT_TRUE(exact.allow("solo").allowed) << i;
  }
  EXPECT_FALSE(exact.allow("solo").allowed);
  EXPECT_EQ(exact.evictions(), 0U);
  EXPECT_LE(exact.table_bytes(), one_key + 2 * 1024);
}

// A limit whose longest log does not fit in a size_t (2 * (limit + 1) * 16 bytes from limit 2^59 - 1 up) is
// refused under any budget, in the constructor and in set_policy: the byte bound once wrapped around and
// let such a limiter hold a log far beyond max_bytes. Only max_bytes = SIZE_MAX, no budget, accepts it
// (include/ratelimit/README.md "Which policy when"), and the refusal says so rather than naming a saturated byte count.
TEST(LogMemory, ALimitWhoseLogCannotBeCountedIsRefusedUnderAnyBudget) {
  ManualClock clock;
  for (const std::int64_t limit :
       {std::int64_t{1} << 59, std::int64_t{1} << 62, std::numeric_limits<std::int64_t>::max()}) {
    try {
      MemoryLimiter<SlidingWindowLog, ManualClock> refused({.limit = limit, .window = 1h}, {.max_bytes = 1 << 20},
                                                           clock);
      FAIL() << "limit " << limit << " accepted with max_bytes 1 MiB";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("MemoryOptions.max_bytes: must be SIZE_MAX (no byte budget)", 0), 0U)
          << e.what();
    }
    MemoryLimiter<SlidingWindowLog, ManualClock> unbounded(
        {.limit = limit, .window = 1h}, {.max_bytes = std::numeric_limits<std::size_t>::max()}, clock);
    EXPECT_TRUE(unbounded.allow("k").allowed);
  }
  MemoryLimiter<SlidingWindowLog, ManualClock> l({.limit = 10, .window = 1h}, {.max_bytes = 1 << 20}, clock);
  EXPECT_THROW(l.set_policy({.limit = std::int64_t{1} << 59, .window = 1h}), std::invalid_argument);
  EXPECT_EQ(l.policy().limit, 10);
}

// max_bytes = SIZE_MAX turns the byte budget off (include/ratelimit/README.md "Which policy when"), so no limit is
// refused for a shard's share of it: set_policy to a limit whose log exceeds any size_t once refused on a limiter of 64
// shards what its constructor accepted, and the constructor gave such a limit one shard.
TEST(LogMemory, WithoutAByteBudgetNoShardShareRefusesALimit) {
  ManualClock clock;
  const ratelimit::MemoryOptions unbounded{.max_bytes = std::numeric_limits<std::size_t>::max()};
  MemoryLimiter<SlidingWindowLog, ManualClock> l({.limit = 5, .window = 1h}, unbounded, clock);
  ASSERT_EQ(l.shard_count(), 64U);
  l.set_policy({.limit = std::numeric_limits<std::int64_t>::max(), .window = 1h});
  EXPECT_EQ(l.policy().limit, std::numeric_limits<std::int64_t>::max());
  EXPECT_TRUE(l.allow("k").allowed);
  MemoryLimiter<SlidingWindowLog, ManualClock> huge({.limit = std::int64_t{1} << 60, .window = 1h}, unbounded, clock);
  EXPECT_EQ(huge.shard_count(), 64U);
  ratelimit::OverridableMemoryLimiter<SlidingWindowLog, ManualClock> overridable({.limit = 5, .window = 1h}, unbounded,
                                                                                 clock);
  const auto prepared = overridable.prepare({.limit = std::numeric_limits<std::int64_t>::max(), .window = 1h});
  EXPECT_TRUE(overridable.allow("k", 1, *prepared).allowed);
}

// Over budget the least recently used key goes, not the one just checked; losing usage is counted.
TEST(LogMemory, OverBudgetTheLeastRecentlyUsedKeyIsEvicted) {
  const std::size_t one_key = 2 * (64 + 1) * kEntryBytes;
  ManualClock clock;
  // One shard whose budget holds one full log: three keys' logs do not fit.
  MemoryLimiter<SlidingWindowLog, ManualClock> limiter({.limit = 64, .window = 1h}, {.shards = 1, .max_bytes = one_key},
                                                       clock);
  for (int i = 0; i < 64; ++i) {
    clock.advance(1us);
    limiter.allow("old");
  }
  for (int i = 0; i < 64; ++i) {
    clock.advance(1us);
    limiter.allow("hot");
    limiter.allow("new");
  }
  EXPECT_GE(limiter.evictions(), 1U);
  EXPECT_EQ(limiter.peek("old").remaining, 64) << "the stale key should have been evicted";
  EXPECT_EQ(limiter.peek("new").remaining, 0);
}

}  // namespace
