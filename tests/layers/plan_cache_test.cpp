// The plan cache of TieredLimiter: one copy of each key, LRU order and expiry.
#include <gtest/gtest.h>

#include <ratelimit/layers/detail/plan_cache.hpp>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <string>

// ThreadSanitizer's runtime defines operator new itself (a second definition does not link): there the
// byte count is skipped.
#if defined(__SANITIZE_THREAD__)
#define RATELIMIT_COUNT_NEW 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RATELIMIT_COUNT_NEW 0
#endif
#endif
#ifndef RATELIMIT_COUNT_NEW
#define RATELIMIT_COUNT_NEW 1
#endif

namespace {
// Bytes allocated through operator new while counting is on (this binary's global operator new
// counts; it changes nothing else).
std::atomic<bool> counting{false};
std::atomic<std::size_t> counted_bytes{0};
}  // namespace

#if RATELIMIT_COUNT_NEW
void* operator new(std::size_t n) {
  if (counting.load(std::memory_order_relaxed)) counted_bytes.fetch_add(n, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// GCC sees free() of what it takes for a `new` result; these replacements pair them on purpose.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif  // RATELIMIT_COUNT_NEW

using ratelimit::detail::PlanCache;

TEST(PlanCache, HoldsOneCopyOfEachKey) {
  if (!RATELIMIT_COUNT_NEW) GTEST_SKIP() << "operator new cannot be replaced under ThreadSanitizer";
  PlanCache cache(8, 1'000);
  cache.put("warm-up", 0, 0);  // the bucket array is allocated once; not part of an entry
  const std::string key(4096, 'k');
  counted_bytes = 0;
  counting = true;
  cache.put(key, 1, 0);
  counting = false;
  // One copy of 4096 bytes plus a list node and a map node, far below two copies.
  EXPECT_GE(counted_bytes.load(), key.size());
  EXPECT_LT(counted_bytes.load(), 2 * key.size());
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
