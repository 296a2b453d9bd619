// ConcurrencyLimiter (include/ratelimit/concurrency/README.md "Concurrency limits"): never more than `permits` units in
// flight, waiters served in queue order, deadlines on the injected clock, bounded keys, bad input refused by name.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/concurrency.hpp>

#include "../support/return_at_exit.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::ConcurrencyLimiter;
using ratelimit::ConcurrencyOptions;
using ratelimit::ManualClock;
using ratelimit::Permit;
using ratelimit::PermitResult;
using ratelimit::PermitStatus;
using ratelimit::PermitWait;
using ratelimit::QueueOrder;
using ratelimit_test::ReturnAtExit;

ConcurrencyOptions options(std::int64_t permits, std::int64_t queue_limit = 0,
                           QueueOrder order = QueueOrder::oldest_first) {
  ConcurrencyOptions o;
  o.permits = permits;
  o.queue_limit = queue_limit;
  o.queue_order = order;
  return o;
}

/// Yields until `cond()` (another thread has queued), for at most 2 s: no time passes on the limiter's clock.
template <class Cond>
void eventually(Cond cond) {
  const auto give_up = std::chrono::steady_clock::now() + 2s;
  while (!cond() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  ASSERT_TRUE(cond());
}

TEST(ConcurrencyLimiterBasics, TryAcquireHoldsAtMostPermitsAndReleasesOnDestruction) {
  ConcurrencyLimiter<> limiter(options(3));
  PermitResult a = limiter.try_acquire("k", 2);
  ASSERT_TRUE(a);
  EXPECT_EQ(a.in_flight, 2);
  EXPECT_EQ(a.permit.units(), 2);
  PermitResult b = limiter.try_acquire("k");
  ASSERT_TRUE(b);
  const PermitResult c = limiter.try_acquire("k");
  EXPECT_FALSE(c);
  EXPECT_EQ(c.status, PermitStatus::busy);
  EXPECT_EQ(c.in_flight, 3);
  EXPECT_TRUE(limiter.try_acquire("other"));  // keys are independent
  {
    Permit moved = std::move(b.permit);
    EXPECT_FALSE(b.permit.held());
    EXPECT_TRUE(moved.valid());
    EXPECT_EQ(limiter.in_flight("k"), 3);
  }  // destroyed: released
  EXPECT_EQ(limiter.in_flight("k"), 2);
  a.permit.release();
  a.permit.release();  // idempotent
  EXPECT_EQ(limiter.in_flight("k"), 0);
  EXPECT_EQ(limiter.size(), 0u);  // idle keys are forgotten
}

TEST(ConcurrencyLimiterBasics, MoreUnitsThanPermitsNeverPass) {
  ConcurrencyLimiter<> limiter(options(2, 10));
  const PermitResult r = limiter.acquire("k", 3, 1h);
  EXPECT_EQ(r.status, PermitStatus::too_many_units);
  EXPECT_EQ(limiter.size(), 0u);
}

TEST(ConcurrencyLimiterBasics, MoveAssignmentReleasesTheOldPermit) {
  ConcurrencyLimiter<> limiter(options(2));
  PermitResult a = limiter.try_acquire("a");
  PermitResult b = limiter.try_acquire("b");
  a.permit = std::move(b.permit);
  EXPECT_EQ(limiter.in_flight("a"), 0);
  EXPECT_EQ(limiter.in_flight("b"), 1);
}

TEST(ConcurrencyLimiterValidation, BadInputNamesTheField) {
  auto throws_naming = [](auto make, const std::string& field) {
    try {
      make();
      ADD_FAILURE() << "no exception for " << field;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(field + ":", 0), 0u) << e.what();
    }
  };
  auto with = [](auto edit) {
    ConcurrencyOptions o;
    edit(o);
    return [o] { ConcurrencyLimiter<> l(o); };
  };
  throws_naming(with([](auto& o) { o.permits = 0; }), "ConcurrencyOptions.permits");
  throws_naming(with([](auto& o) { o.permits = -5; }), "ConcurrencyOptions.permits");
  throws_naming(with([](auto& o) { o.queue_limit = -1; }), "ConcurrencyOptions.queue_limit");
  throws_naming(with([](auto& o) { o.max_keys = 0; }), "ConcurrencyOptions.max_keys");
  throws_naming(with([](auto& o) { o.shards = 70000; }), "ConcurrencyOptions.shards");
  throws_naming(with([](auto& o) { o.max_key_bytes = (std::size_t{1} << 31) + 1; }),
                "ConcurrencyOptions.max_key_bytes");
  throws_naming(with([](auto& o) { o.queue_order = static_cast<QueueOrder>(7); }), "ConcurrencyOptions.queue_order");

  ConcurrencyLimiter<> limiter(options(2, 2));
  throws_naming([&] { (void)limiter.try_acquire("k", 0); }, "units");
  throws_naming([&] { (void)limiter.acquire("k", -1, 1s); }, "units");
  throws_naming([&] { (void)limiter.acquire("k", 1, -1ns); }, "max_wait");
  throws_naming([&] { (void)limiter.try_acquire(std::string(513, 'x')); }, "key");
  throws_naming([&] { limiter.acquire_async("k", 1, 1s, {}); }, "done");
  EXPECT_EQ(limiter.size(), 0u);
}

TEST(ConcurrencyLimiterKeys, MaxKeysCountsBusyKeysAndNeverEvictsThem) {
  ConcurrencyOptions o = options(1, 4);
  o.max_keys = 2;
  ManualClock clock;
  ConcurrencyLimiter<ManualClock> limiter(o, clock);
  PermitResult a = limiter.try_acquire("a");
  PermitResult b = limiter.try_acquire("b");
  ASSERT_TRUE(a && b);
  const PermitResult c = limiter.try_acquire("c");
  EXPECT_EQ(c.status, PermitStatus::key_limit);
  EXPECT_EQ(limiter.size(), 2u);
  // Held keys keep their state: "a" is still at its limit.
  EXPECT_EQ(limiter.try_acquire("a").status, PermitStatus::busy);
  b.permit.release();  // "b" is idle and forgotten: room for "c"
  EXPECT_EQ(limiter.size(), 1u);
  EXPECT_TRUE(limiter.try_acquire("c"));
}

TEST(ConcurrencyLimiterKeys, AKeyWithOnlyWaitersCounts) {
  ConcurrencyOptions o = options(1, 4);
  o.max_keys = 1;
  ManualClock clock;
  std::optional<PermitResult> waited;
  ConcurrencyLimiter<ManualClock> limiter(o, clock);
  const ReturnAtExit return_answers{waited};
  PermitResult a = limiter.try_acquire("a");
  limiter.acquire_async("a", 1, 1s, [&](PermitResult r) { waited = std::move(r); });
  a.permit.release();  // the waiter gets it: the key stays held
  ASSERT_TRUE(waited && *waited);
  EXPECT_EQ(limiter.try_acquire("b").status, PermitStatus::key_limit);
  waited->permit.release();
  EXPECT_TRUE(limiter.try_acquire("b"));
}

// FIFO: waiters queued in a known order get returned permits in that order. Fails on LIFO (it would
// serve 4, 3, 2, 1, 0).
TEST(ConcurrencyLimiterQueue, OldestFirstServesWaitersInArrivalOrder) {
  ConcurrencyLimiter<> limiter(options(1, 10));
  PermitResult holder = limiter.try_acquire("k");
  ASSERT_TRUE(holder);
  constexpr int kWaiters = 5;
  std::mutex m;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      PermitResult r = limiter.acquire("k", 1, 1h);
      ASSERT_TRUE(r) << ratelimit::to_string(r.status);
      std::lock_guard lock(m);
      order.push_back(i);
    });  // the permit is released as the thread ends, which serves the next waiter
    eventually([&] { return limiter.queued("k") == i + 1; });
  }
  holder.permit.release();
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(limiter.size(), 0u);
}

// The same order with async waiters, deterministically on one thread.
TEST(ConcurrencyLimiterQueue, AsyncWaitersAreGrantedInQueueOrder) {
  for (const QueueOrder order : {QueueOrder::oldest_first, QueueOrder::newest_first}) {
    ManualClock clock;
    ConcurrencyLimiter<ManualClock> limiter(options(1, 10, order), clock);
    PermitResult holder = limiter.try_acquire("k");
    std::vector<int> served;
    std::vector<Permit> held;
    for (int i = 0; i < 4; ++i) {
      limiter.acquire_async("k", 1, 1s, [&, i](PermitResult r) {
        ASSERT_TRUE(r);
        served.push_back(i);
        held.push_back(std::move(r.permit));
      });
    }
    EXPECT_EQ(limiter.queued("k"), 4);
    holder.permit.release();
    for (int i = 0; i < 3; ++i) {
      Permit p = std::move(held.at(static_cast<std::size_t>(i)));
      p.release();
    }
    const std::vector<int> want =
        order == QueueOrder::oldest_first ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{3, 2, 1, 0};
    EXPECT_EQ(served, want);
  }
}

TEST(ConcurrencyLimiterQueue, FullQueueDeniesAtOnceOldestFirst) {
  ManualClock clock;
  int answered = 0;  // outlives the limiter, whose destructor answers a waiter still queued
  ConcurrencyLimiter<ManualClock> limiter(options(2, 2), clock);
  PermitResult holder = limiter.try_acquire("k", 2);
  limiter.acquire_async("k", 2, 1s, [&](PermitResult r) {
    EXPECT_TRUE(r);
    ++answered;
  });
  bool waited = false;
  auto wait = [&](PermitWait&, std::chrono::nanoseconds t) {
    waited = true;
    clock.advance(t);
  };
  const PermitResult full = limiter.acquire("k", 1, 1h, wait);
  EXPECT_EQ(full.status, PermitStatus::queue_full);
  EXPECT_EQ(full.queued, 2);
  EXPECT_FALSE(waited);
  EXPECT_EQ(answered, 0);
  EXPECT_EQ(limiter.acquire("k", 3, 1h, wait).status, PermitStatus::too_many_units);
  holder.permit.release();
  EXPECT_EQ(answered, 1);
}

TEST(ConcurrencyLimiterQueue, NewestFirstPushesTheOldestOut) {
  ManualClock clock;
  // Outlives the holder, whose release serves waiters, and the limiter, whose destructor answers those still queued.
  std::vector<std::pair<int, PermitStatus>> answers;
  ConcurrencyLimiter<ManualClock> limiter(options(1, 2, QueueOrder::newest_first), clock);
  PermitResult holder = limiter.try_acquire("k");
  for (int i = 0; i < 3; ++i) {
    limiter.acquire_async("k", 1, 1s, [&, i](PermitResult r) { answers.emplace_back(i, r.status); });
  }
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0], std::make_pair(0, PermitStatus::queue_full));
  EXPECT_EQ(limiter.queued("k"), 2);
  holder.permit.release();  // newest first: 2, then (its permit dropped) 1
  EXPECT_EQ(answers, (std::vector<std::pair<int, PermitStatus>>{
                         {0, PermitStatus::queue_full}, {2, PermitStatus::acquired}, {1, PermitStatus::acquired}}));
}

// Oldest-first, a waiter needing more units than are free holds back smaller ones behind it, and a
// try_acquire does not overtake the queue.
TEST(ConcurrencyLimiterQueue, NoOvertakingOldestFirst) {
  ManualClock clock;
  std::optional<PermitResult> big;
  std::optional<PermitResult> small;
  ConcurrencyLimiter<ManualClock> limiter(options(3, 10), clock);
  const ReturnAtExit return_answers{big, small};
  PermitResult a = limiter.try_acquire("k", 2);
  PermitResult b = limiter.try_acquire("k", 1);
  limiter.acquire_async("k", 3, 1s, [&](PermitResult r) { big = std::move(r); });
  limiter.acquire_async("k", 1, 1s, [&](PermitResult r) { small = std::move(r); });
  b.permit.release();  // 1 free: the big one (3) waits, the small one must not pass it
  EXPECT_FALSE(big);
  EXPECT_FALSE(small);
  EXPECT_EQ(limiter.try_acquire("k").status, PermitStatus::busy);
  a.permit.release();
  ASSERT_TRUE(big && *big);
  EXPECT_FALSE(small);
  big->permit.release();
  ASSERT_TRUE(small && *small);
}

// Deadlines on a ManualClock: the wait strategy simulates the waiting by moving the clock.
TEST(ConcurrencyLimiterDeadline, TimesOutExactlyAtMaxWaitOnTheClock) {
  ManualClock clock;
  ConcurrencyLimiter<ManualClock> limiter(options(1, 4), clock);
  PermitResult holder = limiter.try_acquire("k");
  std::vector<std::chrono::nanoseconds> asked;
  const PermitResult r = limiter.acquire("k", 1, 250ms, [&](PermitWait& w, std::chrono::nanoseconds timeout) {
    EXPECT_FALSE(w.answered());
    asked.push_back(timeout);
    clock.advance(asked.size() == 1 ? timeout / 2 : timeout);  // an early wake-up, then the whole rest
  });
  EXPECT_EQ(r.status, PermitStatus::timed_out);
  EXPECT_EQ(r.in_flight, 1);
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[0], 250ms);
  EXPECT_EQ(asked[1], 125ms);
  EXPECT_EQ(clock.now().time_since_epoch(), 250ms);
  EXPECT_EQ(limiter.queued("k"), 0);  // it left the queue
}

TEST(ConcurrencyLimiterDeadline, GrantedWhenAPermitReturnsBeforeTheDeadline) {
  ManualClock clock;
  ConcurrencyLimiter<ManualClock> limiter(options(1, 4), clock);
  PermitResult holder = limiter.try_acquire("k");
  int waits = 0;
  PermitResult r = limiter.acquire("k", 1, 1s, [&](PermitWait& w, std::chrono::nanoseconds) {
    ++waits;
    clock.advance(999ms);
    holder.permit.release();  // another holder finishes just before the deadline
    EXPECT_TRUE(w.answered());
  });
  ASSERT_TRUE(r);
  EXPECT_EQ(waits, 1);
  EXPECT_EQ(limiter.in_flight("k"), 1);
}

TEST(ConcurrencyLimiterDeadline, ZeroWaitAndPassedDeadlineDenyAtOnce) {
  ManualClock clock;
  ConcurrencyLimiter<ManualClock> limiter(options(1, 4), clock);
  PermitResult holder = limiter.try_acquire("k");
  int waits = 0;
  auto count = [&](PermitWait&, std::chrono::nanoseconds) { ++waits; };
  EXPECT_EQ(limiter.acquire("k", 1, 0ns, count).status, PermitStatus::busy);
  EXPECT_EQ(waits, 0);
}

TEST(ConcurrencyLimiterDeadline, AsyncWaitersExpireOnTheClock) {
  ManualClock clock;
  std::vector<PermitStatus> got;  // outlives the limiter, whose destructor answers waiters still queued
  ConcurrencyLimiter<ManualClock> limiter(options(1, 4), clock);
  PermitResult holder = limiter.try_acquire("k");
  limiter.acquire_async("k", 1, 100ms, [&](PermitResult r) { got.push_back(r.status); });
  limiter.acquire_async("k", 1, 300ms, [&](PermitResult r) { got.push_back(r.status); });
  clock.advance(99ms);
  EXPECT_EQ(limiter.expire_waiters(), 0u);
  clock.advance(1ms);
  EXPECT_EQ(limiter.expire_waiters(), 1u);
  EXPECT_EQ(got, std::vector<PermitStatus>{PermitStatus::timed_out});
  clock.advance(250ms);
  holder.permit.release();  // the second's deadline passed too: checked before granting
  EXPECT_EQ(got, (std::vector<PermitStatus>{PermitStatus::timed_out, PermitStatus::timed_out}));
  EXPECT_EQ(limiter.size(), 0u);
}

TEST(ConcurrencyLimiterDeadline, ATimedOutHeadReleasesTheOnesBehindIt) {
  ManualClock clock;
  std::optional<PermitResult> small;
  ConcurrencyLimiter<ManualClock> limiter(options(2, 10), clock);
  const ReturnAtExit return_answer{small};
  PermitResult a = limiter.try_acquire("k");
  PermitResult b = limiter.try_acquire("k");
  b.permit.release();  // 1 free
  const PermitResult big = limiter.acquire("k", 2, 50ms, [&](PermitWait&, std::chrono::nanoseconds t) {
    if (!small) limiter.acquire_async("k", 1, 1s, [&](PermitResult r) { small = std::move(r); });
    clock.advance(t);
  });
  EXPECT_EQ(big.status, PermitStatus::timed_out);
  ASSERT_TRUE(small && *small);  // granted as the head left
  EXPECT_EQ(limiter.in_flight("k"), 2);
}

TEST(ConcurrencyLimiterDeadline, AWaitStrategyThatThrowsLeavesTheQueue) {
  ManualClock clock;
  ConcurrencyLimiter<ManualClock> limiter(options(1, 4), clock);
  PermitResult holder = limiter.try_acquire("k");
  EXPECT_THROW(
      limiter.acquire("k", 1, 1s, [](PermitWait&, std::chrono::nanoseconds) { throw std::runtime_error("x"); }),
      std::runtime_error);
  EXPECT_EQ(limiter.queued("k"), 0);
  holder.permit.release();
  EXPECT_EQ(limiter.size(), 0u);
}

TEST(ConcurrencyLimiterAsync, ImmediateAnswersRunInlineAndQueuedOnesOnTheReleasingThread) {
  std::optional<PermitResult> first;
  std::vector<PermitStatus> got;
  std::optional<PermitResult> queued;
  std::thread::id served_on;
  ConcurrencyLimiter<> limiter(options(1, 4));
  const ReturnAtExit return_answers{first, queued};
  limiter.acquire_async("k", 1, 1s, [&](PermitResult r) { first = std::move(r); });
  ASSERT_TRUE(first && *first);  // inline, on this thread
  limiter.acquire_async("k", 1, 0ns, [&](PermitResult r) { got.push_back(r.status); });
  EXPECT_EQ(got, std::vector<PermitStatus>{PermitStatus::busy});
  limiter.acquire_async("k", 1, 1h, [&](PermitResult r) {
    served_on = std::this_thread::get_id();
    queued = std::move(r);
  });
  EXPECT_FALSE(queued);
  std::thread releaser([&] { first->permit.release(); });
  const std::thread::id releaser_id = releaser.get_id();
  releaser.join();
  ASSERT_TRUE(queued && *queued);
  EXPECT_EQ(served_on, releaser_id);
  EXPECT_EQ(queued->in_flight, 1);
  // A callback that drops its permit releases it at once.
  limiter.acquire_async("k", 1, 1h, [&](PermitResult r) { got.push_back(r.status); });
  queued->permit.release();
  EXPECT_EQ(got.back(), PermitStatus::acquired);
  EXPECT_EQ(limiter.size(), 0u);
}

// 16 threads x 10,000 acquire/release on one key never exceed P in flight, checked inside the
// critical section by an atomic counter.
TEST(ConcurrencyLimiterStress, SixteenThreadsNeverExceedPermits) {
  constexpr int kThreads = 16;
  constexpr int kIterations = 10000;
  constexpr std::int64_t kPermits = 3;
  ConcurrencyLimiter<> limiter(options(kPermits, kThreads));
  std::atomic<std::int64_t> inside{0};
  std::atomic<std::int64_t> peak{0};
  std::atomic<std::int64_t> over{0};
  std::atomic<std::int64_t> acquired{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) {
        // Mix the entry points: waiting (the queue), trying (fails when busy), async.
        PermitResult r;
        if ((i + t) % 3 == 0) {
          r = limiter.try_acquire("hot");
          if (!r) continue;
        } else {
          r = limiter.acquire("hot", 1, 1h);
        }
        ASSERT_TRUE(r) << ratelimit::to_string(r.status);
        const std::int64_t now_inside = inside.fetch_add(1) + 1;
        if (now_inside > kPermits) over.fetch_add(1);
        std::int64_t p = peak.load();
        while (now_inside > p && !peak.compare_exchange_weak(p, now_inside)) {
        }
        acquired.fetch_add(1);
        // Now and then hold the permit while others run: on 2 cores nobody would overlap otherwise.
        if (i % 2 == 0) std::this_thread::yield();
        inside.fetch_sub(1);
        r.permit.release();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(over.load(), 0);
  EXPECT_LE(peak.load(), kPermits);
  EXPECT_GE(peak.load(), 1);
  EXPECT_GT(acquired.load(), kThreads * kIterations / 2);
  EXPECT_EQ(limiter.size(), 0u);
  EXPECT_EQ(limiter.in_flight("hot"), 0);
}

}  // namespace
