// Atomic per key (include/ratelimit/README.md "Guarantees"): threads racing on one fresh key admit exactly the quota,
// with the `remaining` values of a serial execution; distinct keys never interfere. Run under TSan too.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/ratelimit.hpp>

namespace {

using namespace std::chrono_literals;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;

constexpr int kThreads = 8;
constexpr int kRepetitions = 200;

/// Runs `body(thread_index, repetition)` on kThreads threads for each repetition; all threads of a
/// repetition start together, and `after(repetition)` runs on this thread once they are all done.
template <class Body, class After>
void race(Body body, After after) {
  std::barrier start(kThreads + 1);
  std::barrier done(kThreads + 1);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < kRepetitions; ++rep) {
        start.arrive_and_wait();
        body(i, rep);
        done.arrive_and_wait();
      }
    });
  }
  for (int rep = 0; rep < kRepetitions; ++rep) {
    start.arrive_and_wait();
    done.arrive_and_wait();
    after(rep);
  }
  for (auto& t : threads) t.join();
}

/// kThreads threads send cost-1 requests at one fresh key at a fixed time, twice the quota in all:
/// exactly `quota` pass, and their `remaining` values are quota-1, ..., 0, each once (linearizable).
template <ratelimit::Policy P>
void expect_exact_quota(P policy, std::int64_t quota) {
  ManualClock clock;
  clock.set(ManualClock::time_point(1s));
  MemoryLimiter<P, ManualClock> limiter(policy, {}, clock);
  const int attempts = static_cast<int>(2 * quota / kThreads + 1);
  std::vector<std::vector<std::int64_t>> remaining(kThreads);
  race(
      [&](int thread, int rep) {
        const std::string key = "race-" + std::to_string(rep);
        for (int i = 0; i < attempts; ++i) {
          const ratelimit::Decision d = limiter.allow(key);
          if (d.allowed) remaining[static_cast<std::size_t>(thread)].push_back(d.remaining);
        }
      },
      [&](int rep) {
        std::vector<std::int64_t> all;
        for (auto& r : remaining) {
          all.insert(all.end(), r.begin(), r.end());
          r.clear();
        }
        std::sort(all.begin(), all.end());
        std::vector<std::int64_t> serial(static_cast<std::size_t>(quota));
        std::iota(serial.begin(), serial.end(), 0);
        EXPECT_EQ(all, serial) << P::kind << " repetition " << rep;
      });
}

TEST(Concurrency, OneKeyAdmitsExactlyTheQuotaFixedWindow) {
  expect_exact_quota(ratelimit::FixedWindow{.limit = 40, .window = 1h}, 40);
}
TEST(Concurrency, OneKeyAdmitsExactlyTheQuotaSlidingWindowLog) {
  expect_exact_quota(ratelimit::SlidingWindowLog{.limit = 40, .window = 1h}, 40);
}
TEST(Concurrency, OneKeyAdmitsExactlyTheQuotaSlidingWindowCounter) {
  expect_exact_quota(ratelimit::SlidingWindowCounter{.limit = 40, .window = 1h}, 40);
}
TEST(Concurrency, OneKeyAdmitsExactlyTheQuotaGcra) {
  expect_exact_quota(ratelimit::Gcra{.limit = 1, .period = 1h, .burst = 40}, 40);
}
TEST(Concurrency, OneKeyAdmitsExactlyTheQuotaTokenBucket) {
  expect_exact_quota(ratelimit::TokenBucket{.capacity = 40, .refill_tokens = 1, .refill_period = 1h}, 40);
}

/// Mixed costs: what the racing threads take never exceeds the quota, and what a serial drain finds
/// left makes it up exactly.
template <ratelimit::Policy P>
void expect_mixed_costs_sum_to_quota(P policy, std::int64_t quota) {
  ManualClock clock;
  MemoryLimiter<P, ManualClock> limiter(policy, {}, clock);
  std::atomic<std::int64_t> taken{0};
  race(
      [&](int thread, int rep) {
        const std::string key = "mixed-" + std::to_string(rep);
        std::int64_t mine = 0;
        for (int i = 0; i < 12; ++i) {
          const std::int64_t cost = 1 + (thread + i) % 3;
          if (limiter.allow(key, cost).allowed) mine += cost;
        }
        taken += mine;
      },
      [&](int rep) {
        const std::string key = "mixed-" + std::to_string(rep);
        std::int64_t rest = 0;
        while (limiter.allow(key).allowed) ++rest;
        EXPECT_LE(taken.load(), quota) << P::kind << " repetition " << rep;
        EXPECT_EQ(taken.load() + rest, quota) << P::kind << " repetition " << rep;
        taken = 0;
      });
}

TEST(Concurrency, MixedCostsNeverExceedTheQuota) {
  expect_mixed_costs_sum_to_quota(ratelimit::FixedWindow{.limit = 50, .window = 1h}, 50);
  expect_mixed_costs_sum_to_quota(ratelimit::SlidingWindowLog{.limit = 50, .window = 1h}, 50);
  expect_mixed_costs_sum_to_quota(ratelimit::SlidingWindowCounter{.limit = 50, .window = 1h}, 50);
  expect_mixed_costs_sum_to_quota(ratelimit::Gcra{.limit = 1, .period = 1h, .burst = 50}, 50);
  expect_mixed_costs_sum_to_quota(ratelimit::TokenBucket{.capacity = 50, .refill_tokens = 1, .refill_period = 1h},
                                  50);
}

TEST(Concurrency, DistinctKeysDoNotInterfere) {
  ManualClock clock;
  MemoryLimiter<ratelimit::Gcra, ManualClock> limiter({.limit = 1, .period = 1h, .burst = 5}, {.max_keys = 100'000},
                                                      clock);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 500; ++k) {
        const std::string key = "t" + std::to_string(i) + "-" + std::to_string(k);
        for (std::int64_t n = 0; n < 5; ++n) {
          const auto d = limiter.allow(key);
          if (!d.allowed || d.remaining != 4 - n) ++wrong;
        }
        if (limiter.allow(key).allowed) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(limiter.size(), static_cast<std::size_t>(kThreads * 500));
}

// Everything at once on a small store (evictions, sweeps, resets, peeks, a moving clock): no data race
// (TSan), no crash, and the bounds hold throughout.
TEST(Concurrency, MixedOperationsStress) {
  ManualClock clock;
  constexpr std::size_t kMaxKeys = 64;
  MemoryLimiter<ratelimit::SlidingWindowLog, ManualClock> limiter({.limit = 5, .window = 50us},
                                                                  {.max_keys = kMaxKeys}, clock);
  std::atomic<int> bad{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads - 2; ++i) {
    threads.emplace_back([&, i] {
      std::mt19937 rng(static_cast<unsigned>(i));
      for (int n = 0; n < 20'000; ++n) {
        const std::string key = "k" + std::to_string(rng() % 200);
        ratelimit::Decision d;
        switch (rng() % 8) {
          case 0:
            d = limiter.peek(key);
            break;
          case 1:
            limiter.reset(key);
            continue;
          default:
            d = limiter.allow(key, static_cast<std::int64_t>(rng() % 7));
        }
        if (d.remaining < 0 || d.remaining > 5 || (d.allowed && d.retry_after != 0ns)) ++bad;
      }
    });
  }
  threads.emplace_back([&] {
    while (!stop) {
      clock.advance(1us);
      std::this_thread::yield();
    }
  });
  threads.emplace_back([&] {
    while (!stop) {
      limiter.sweep();
      if (limiter.size() > kMaxKeys) ++bad;
      (void)limiter.evictions();
      (void)limiter.table_bytes();
    }
  });
  for (int i = 0; i < kThreads - 2; ++i) threads[static_cast<std::size_t>(i)].join();
  stop = true;
  threads[kThreads - 2].join();
  threads[kThreads - 1].join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_LE(limiter.size(), kMaxKeys);
}

}  // namespace
