// RedisLimiter's denial cache against its own refunds, resets and policy changes (include/ratelimit/redis/README.md
// "Denial cache"): a denial and a refund (or reset) of one key in flight together are settled in the order Redis ran
// them, not the order their threads woke, so once the refund has returned the cache never denies what Redis admits.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::FixedWindow;
using ratelimit::ManualClock;
using ratelimit::redis::RedisLimiter;

// One unit per 10 s: a denial's retry_after is about 10 s, so a stale one outlives the test.
const FixedWindow kOnePerWindow{.limit = 1, .window = 10s};

ratelimit::redis::RedisOptions cached_options(std::string name = {}) {
  ratelimit::redis::RedisOptions o = ratelimit_test::client_options(*ratelimit_test::shared_redis());
  o.deny_cache.enabled = true;
  o.name = std::move(name);
  return o;
}

// Runs `a` and `b` on two threads released together.
void run_together(const std::function<void()>& a, const std::function<void()>& b) {
  std::atomic<int> ready{0};
  auto run = [&](const std::function<void()>& f) {
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    f();
  };
  std::thread ta(run, std::cref(a));
  std::thread tb(run, std::cref(b));
  ta.join();
  tb.join();
}

// Key exhausted, then a check (denied when Redis runs it first) races `undo` (which gives the unit back). When
// Redis ran the denial first, peek admits afterwards, and so must the limiter: its cache holds nothing stale.
// Returns the attempt at which the limiter denied what Redis admits, or 0.
template <class Undo>
int first_stale_denial(RedisLimiter<FixedWindow, ManualClock>& limiter, int attempts, Undo undo) {
  for (int i = 1; i <= attempts; ++i) {
    const std::string key = "k" + std::to_string(i);
    if (!limiter.allow(key)) return -i;
    run_together([&] { (void)limiter.allow(key); }, [&] { undo(key); });
    if (!limiter.peek(key).allowed) continue;  // Redis ran the check after the undo: admitted
    const auto cached_before = limiter.stats().cached_denials;
    const ratelimit::Decision d = limiter.allow(key);
    if (!d.allowed || limiter.stats().cached_denials != cached_before) return i;
  }
  return 0;
}

TEST(DenialCacheOrder, RefundRacingADenialLeavesNoStaleDenial) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  RedisLimiter<FixedWindow, ManualClock> limiter(kOnePerWindow, cached_options(), clock);
  EXPECT_EQ(first_stale_denial(limiter, 400, [&](const std::string& k) { (void)limiter.refund(k, 1); }), 0)
      << "denied from the cache what Redis admits, after the limiter's own refund returned";
}

TEST(DenialCacheOrder, ResetRacingADenialLeavesNoStaleDenial) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  RedisLimiter<FixedWindow, ManualClock> limiter(kOnePerWindow, cached_options(), clock);
  EXPECT_EQ(first_stale_denial(limiter, 400, [&](const std::string& k) { (void)limiter.reset(k); }), 0)
      << "denied from the cache what Redis admits, after the limiter's own reset returned";
}

// The same race with async calls: both completions run on I/O threads, in whatever order they wake.
TEST(DenialCacheOrder, AsyncRefundRacingADenialLeavesNoStaleDenial) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  RedisLimiter<FixedWindow, ManualClock> limiter(kOnePerWindow, cached_options(), clock);
  auto undo = [&](const std::string& k) {
    std::promise<void> checked;
    std::promise<void> refunded;
    limiter.allow_async(k, 1, [&](std::exception_ptr, ratelimit::Decision) { checked.set_value(); });
    limiter.refund_async(k, 1, [&](std::exception_ptr, ratelimit::Decision) { refunded.set_value(); });
    checked.get_future().wait();
    refunded.get_future().wait();
  };
  int stale = 0;
  for (int i = 1; i <= 400 && stale == 0; ++i) {
    const std::string key = "a" + std::to_string(i);
    ASSERT_TRUE(limiter.allow(key));
    undo(key);
    if (!limiter.peek(key).allowed) continue;
    const auto cached_before = limiter.stats().cached_denials;
    if (!limiter.allow(key).allowed || limiter.stats().cached_denials != cached_before) stale = i;
  }
  EXPECT_EQ(stale, 0) << "denied from the cache what Redis admits, after the limiter's own refund completed";
}

// set_policy voids every cached denial (include/ratelimit/redis/README.md "Denial cache"), also when it returns to a
// policy given before: a denial remembered under it must not come back with it.
TEST(DenialCacheOrder, ReturningToAnEarlierPolicyBringsNoDenialBack) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  RedisLimiter<FixedWindow, ManualClock> limiter(kOnePerWindow, cached_options("order"), clock);
  ASSERT_TRUE(limiter.allow("k"));
  ASSERT_FALSE(limiter.allow("k"));  // Redis's denial, now cached
  limiter.set_policy(FixedWindow{.limit = 5, .window = 10s});
  limiter.set_policy(kOnePerWindow);
  const auto cached_before = limiter.stats().cached_denials;
  (void)limiter.allow("k");
  EXPECT_EQ(limiter.stats().cached_denials, cached_before) << "a denial from before set_policy answered";
}

}  // namespace
