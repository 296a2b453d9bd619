// The plan cache of TieredLimiter: one copy of each key, LRU order and expiry.
#include <gtest/gtest.h>

#include <ratelimit/layers/detail/plan_cache.hpp>

#include "count_new.hpp"

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <string>

using ratelimit::detail::PlanCache;

TEST(PlanCache, HoldsOneCopyOfEachKey) {
  if (!test_support::can_count_new) GTEST_SKIP() << "operator new cannot be replaced under ThreadSanitizer";
  PlanCache cache(8, 1'000);
  cache.put("warm-up", 0, 0);  // the bucket array is allocated once; not part of an entry
  const std::string key(4096, 'k');
  std::size_t bytes = 0;
  {
    const test_support::CountNew count;
    cache.put(key, 1, 0);
    bytes = count.bytes();
  }
  // One copy of 4096 bytes plus a list node and a map node, far below two copies.
  EXPECT_GE(bytes, key.size());
  EXPECT_LT(bytes, 2 * key.size());
  EXPECT_EQ(cache.get(key, 1), 1u);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(PlanCache, EvictsTheLeastRecentlyUsedAndExpires) {
  PlanCache cache(2, 100);
  cache.put("a", 1, 0);
  cache.put("b", 2, 0);
  EXPECT_EQ(cache.get("a", 10), 1u);  // a is now the most recent
  cache.put("c", 3, 10);              // evicts b
  EXPECT_EQ(cache.get("b", 10), std::nullopt);
  EXPECT_EQ(cache.get("a", 10), 1u);
  EXPECT_EQ(cache.get("c", 10), 3u);
  EXPECT_EQ(cache.get("c", 109), 3u);  // stored at 10, TTL 100: fresh until 110
  EXPECT_EQ(cache.get("c", 110), std::nullopt);
  EXPECT_EQ(cache.size(), 1u);
  cache.erase("a");
  EXPECT_EQ(cache.size(), 0u);
  cache.put("d", 4, 200);
  EXPECT_EQ(cache.get("d", 199), std::nullopt);  // the clock stepped back: not trusted
}
