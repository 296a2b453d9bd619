// ConcurrencyLimiter at the ends of int64 (include/ratelimit/concurrency/README.md "Concurrency limits"): units,
// permits and queue_limit up to INT64_MAX never wrap a count, so a huge request never switches a key's limit off and an
// "unlimited" permits or queue_limit still counts exactly.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include <ratelimit/concurrency.hpp>

#include "../support/return_at_exit.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::ConcurrencyLimiter;
using ratelimit::ConcurrencyOptions;
using ratelimit::ManualClock;
using ratelimit::PermitResult;
using ratelimit::PermitStatus;
using ratelimit::QueueOrder;
using ratelimit_test::ReturnAtExit;

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

TEST(ConcurrencyLimiterExtremes, HugeUnitsOnABusyKeyAreTooManyUnits) {
  ConcurrencyLimiter<> limiter({.permits = 2, .queue_limit = 4});
  PermitResult held = limiter.try_acquire("k");
  ASSERT_TRUE(held);
  EXPECT_EQ(limiter.try_acquire("k", kMax).status, PermitStatus::too_many_units);
  EXPECT_EQ(limiter.acquire("k", kMax, 1s).status, PermitStatus::too_many_units);
  EXPECT_EQ(limiter.in_flight("k"), 1);
  std::vector<PermitResult> more;
  for (int i = 0; i < 10; ++i) more.push_back(limiter.try_acquire("k"));
  int admitted = 0;
  for (const PermitResult& r : more) admitted += r ? 1 : 0;
  EXPECT_EQ(admitted, 1);  // the key's limit still holds
  EXPECT_EQ(limiter.in_flight("k"), 2);
  more.clear();
  held.permit.release();
  EXPECT_EQ(limiter.in_flight("k"), 0);
  EXPECT_EQ(limiter.size(), 0u);
}

TEST(ConcurrencyLimiterExtremes, UnlimitedPermitsCountExactly) {
  ConcurrencyLimiter<> limiter({.permits = kMax});
  PermitResult big = limiter.try_acquire("k", kMax - 1);
  ASSERT_TRUE(big);
  EXPECT_EQ(limiter.try_acquire("k", 2).status, PermitStatus::busy);
  EXPECT_EQ(limiter.try_acquire("k", kMax).status, PermitStatus::busy);
  PermitResult last = limiter.try_acquire("k");
  ASSERT_TRUE(last);
  EXPECT_EQ(last.in_flight, kMax);
  EXPECT_EQ(limiter.try_acquire("k").status, PermitStatus::busy);
  big.permit.release();
  EXPECT_EQ(limiter.in_flight("k"), 1);
  last.permit.release();
  EXPECT_EQ(limiter.size(), 0u);
}

// A queued waiter of INT64_MAX units is granted only when the whole range is free.
TEST(ConcurrencyLimiterExtremes, AHugeWaiterWaitsUntilAllIsFree) {
  ManualClock clock;
  std::optional<PermitResult> waiter;
  ConcurrencyLimiter<ManualClock> limiter({.permits = kMax, .queue_limit = kMax}, clock);
  const ReturnAtExit return_answer{waiter};
  PermitResult a = limiter.try_acquire("k", kMax - 1);
  PermitResult b = limiter.try_acquire("k", 1);
  limiter.acquire_async("k", kMax, 1s, [&](PermitResult r) { waiter = std::move(r); });
  EXPECT_EQ(limiter.queued("k"), kMax);
  b.permit.release();
  EXPECT_FALSE(waiter);
  EXPECT_EQ(limiter.in_flight("k"), kMax - 1);
  a.permit.release();
  ASSERT_TRUE(waiter && *waiter);
  EXPECT_EQ(waiter->in_flight, kMax);
  EXPECT_EQ(limiter.queued("k"), 0);
}

TEST(ConcurrencyLimiterExtremes, UnlimitedQueueOldestFirstIsFullAtInt64Max) {
  ManualClock clock;
  std::optional<PermitResult> first;
  ConcurrencyLimiter<ManualClock> limiter({.permits = kMax, .queue_limit = kMax}, clock);
  const ReturnAtExit return_answer{first};
  PermitResult held = limiter.try_acquire("k", kMax);
  limiter.acquire_async("k", kMax, 1s, [&](PermitResult r) { first = std::move(r); });
  EXPECT_FALSE(first);
  const PermitResult full = limiter.acquire("k", 1, 1s);
  EXPECT_EQ(full.status, PermitStatus::queue_full);
  EXPECT_EQ(full.queued, kMax);
  EXPECT_EQ(limiter.queued("k"), kMax);
  held.permit.release();
  ASSERT_TRUE(first && *first);
}

TEST(ConcurrencyLimiterExtremes, UnlimitedQueueNewestFirstPushesTheOldestOut) {
  ManualClock clock;
  std::vector<PermitStatus> answers;  // outlives the limiter, whose destructor answers a waiter still queued
  ConcurrencyLimiter<ManualClock> limiter(
      {.permits = kMax, .queue_limit = kMax, .queue_order = QueueOrder::newest_first}, clock);
  PermitResult held = limiter.try_acquire("k", kMax);
  limiter.acquire_async("k", kMax, 1s, [&](PermitResult r) { answers.push_back(r.status); });
  limiter.acquire_async("k", 1, 1s, [&](PermitResult r) { answers.push_back(r.status); });
  EXPECT_EQ(answers, std::vector<PermitStatus>{PermitStatus::queue_full});
  EXPECT_EQ(limiter.queued("k"), 1);
  held.permit.release();
  EXPECT_EQ(answers, (std::vector<PermitStatus>{PermitStatus::queue_full, PermitStatus::acquired}));
}

}  // namespace
