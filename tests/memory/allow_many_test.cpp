// MemoryLimiter::allow_many (include/ratelimit/README.md "Batches"): the decisions of one `allow` per request at the
// batch's time, in order, for every policy; bad input refused before anything is checked; the key cap kept; exact under
// threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/ratelimit.hpp>

namespace {

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;
using Request = ratelimit::BatchRequest;

template <class P>
P batch_policy();
template <>
ratelimit::Gcra batch_policy() {
  return {.limit = 5, .period = 1s, .burst = 4};
}
template <>
ratelimit::TokenBucket batch_policy() {
  return {.capacity = 4, .refill_tokens = 5, .refill_period = 1s};
}
template <>
ratelimit::FixedWindow batch_policy() {
  return {.limit = 4, .window = 1s};
}
template <>
ratelimit::SlidingWindowCounter batch_policy() {
  return {.limit = 4, .window = 1s};
}
template <>
ratelimit::SlidingWindowLog batch_policy() {
  return {.limit = 4, .window = 1s};
}

template <class P>
class AllowMany : public ::testing::Test {};
using BatchPolicies = ::testing::Types<ratelimit::Gcra, ratelimit::TokenBucket, ratelimit::FixedWindow,
                                       ratelimit::SlidingWindowCounter, ratelimit::SlidingWindowLog>;
TYPED_TEST_SUITE(AllowMany, BatchPolicies);

/// Random batches (repeated keys, costs 0 to past the limit) against a twin limiter that gets one `allow` per
/// request at the same time: every decision is equal. `keys` distinct keys: 2,000 of them take the path that
/// loads slots ahead (a table past the store's prefetch threshold), 10 keep every key in one small table.
template <class P>
void expect_twin_decisions(std::size_t keys) {
  ManualClock batch_clock, single_clock;
  MemoryLimiter<P, ManualClock> batched(batch_policy<P>(), {.shards = 1}, batch_clock);
  MemoryLimiter<P, ManualClock> single(batch_policy<P>(), {.shards = 1}, single_clock);
  std::mt19937_64 random(7);
  std::vector<std::string> names;
  for (std::size_t k = 0; k < keys; ++k) names.push_back("key-" + std::to_string(k));
  std::size_t compared = 0, allowed = 0, denied = 0;
  for (int round = 0; round < 40; ++round) {
    const auto at = ManualClock::time_point(1s + round * 137ms);
    batch_clock.set(at);
    single_clock.set(at);
    std::vector<Request> batch(1 + random() % 300);
    for (Request& r : batch) {
      r.key = names[random() % names.size()];
      r.cost = static_cast<std::int64_t>(random() % 7);  // 5 and 6 exceed every limit here
    }
    const std::vector<Decision> got = batched.allow_many(batch);
    ASSERT_EQ(got.size(), batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const Decision want = single.allow(batch[i].key, batch[i].cost);
      ASSERT_EQ(got[i], want) << "round " << round << ", request " << i << " (" << batch[i].key << ", cost "
                              << batch[i].cost << ")";
      ++compared;
      (want.allowed ? allowed : denied) += 1;
    }
  }
  EXPECT_EQ(batched.size(), single.size());
  EXPECT_GT(compared, 1000U);
  EXPECT_GT(allowed, 100U);  // both outcomes were compared
  EXPECT_GT(denied, 100U);
}

TYPED_TEST(AllowMany, DecidesAsOneAllowPerRequestOverManyKeys) { expect_twin_decisions<TypeParam>(2000); }

TYPED_TEST(AllowMany, DecidesAsOneAllowPerRequestOnFewKeys) { expect_twin_decisions<TypeParam>(10); }

/// The requests of one key run in their order: a batch of one key admits its quota's first requests, then denies.
TYPED_TEST(AllowMany, RequestsOfOneKeyRunInOrder) {
  ManualClock clock;
  clock.set(ManualClock::time_point(10s));
  MemoryLimiter<TypeParam, ManualClock> limiter(batch_policy<TypeParam>(), {}, clock);
  const std::vector<Request> batch(6, Request{"k", 1});
  const std::vector<Decision> got = limiter.allow_many(batch);
  const std::int64_t limit = got.front().limit;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].allowed, static_cast<std::int64_t>(i) < limit) << i;
    EXPECT_EQ(got[i].remaining, std::max<std::int64_t>(limit - 1 - static_cast<std::int64_t>(i), 0)) << i;
  }
}

/// A bad request anywhere in a batch is refused before any is checked: nothing is consumed.
TYPED_TEST(AllowMany, RefusesABadRequestBeforeCheckingAny) {
  ManualClock clock;
  MemoryLimiter<TypeParam, ManualClock> limiter(batch_policy<TypeParam>(), {.max_key_bytes = 8}, clock);
  const std::string too_long(9, 'x');
  const std::vector<Request> negative{{"a", 1}, {"b", 2}, {"c", -1}};
  const std::vector<Request> long_key{{"a", 1}, {too_long, 1}};
  // The message names the first bad request and its field.
  auto message = [&](const std::vector<Request>& batch) {
    try {
      (void)limiter.allow_many(batch);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  EXPECT_EQ(message(negative), "requests[2].cost: must be >= 0, got -1");
  EXPECT_EQ(message(long_key), "requests[1].key: 9 bytes exceeds max_key_bytes (8)");
  EXPECT_EQ(message({{too_long, -1}, {"a", -1}}), "requests[0].key: 9 bytes exceeds max_key_bytes (8)");
  EXPECT_EQ(limiter.size(), 0U);
  EXPECT_EQ(limiter.peek("a").remaining, limiter.peek("a").limit);

  std::array<Decision, 2> two{};
  const std::vector<Request> three{{"a", 1}, {"b", 1}, {"c", 1}};
  try {
    limiter.allow_many(three, two, clock.now());
    FAIL() << "a decisions array of the wrong size was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("decisions"), std::string::npos) << e.what();
  }
  EXPECT_EQ(limiter.size(), 0U);
}

// check_many is allow_many with the outcome every backend reports: in memory, always `decided`.
TYPED_TEST(AllowMany, CheckManyIsAllowManyWithTheOutcome) {
  ManualClock clock;
  MemoryLimiter<TypeParam, ManualClock> checked(batch_policy<TypeParam>(), {.max_key_bytes = 8}, clock);
  MemoryLimiter<TypeParam, ManualClock> allowed(batch_policy<TypeParam>(), {.max_key_bytes = 8}, clock);
  const std::vector<Request> batch{{"a", 1}, {"b", 2}, {"a", 3}, {"a", 1}, {"c", 0}, {"a", 2}};
  for (int round = 0; round < 3; ++round) {
    const std::vector<ratelimit::CheckResult> results = checked.check_many(batch);
    const std::vector<Decision> decisions = allowed.allow_many(batch);
    ASSERT_EQ(results.size(), batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      EXPECT_EQ(results[i].decision, decisions[i]) << "round " << round << ", request " << i;
      EXPECT_EQ(results[i].outcome, ratelimit::Outcome::decided);
    }
    clock.advance(std::chrono::milliseconds(300));
  }
  EXPECT_THROW((void)checked.check_many(std::vector<Request>{{"a", 1}, {"b", -1}}), std::invalid_argument);
  EXPECT_TRUE(checked.check_many({}).empty());
}

/// A batch of more new keys than `max_keys` keeps the cap (evicting as `allow` does) and still decides each.
TYPED_TEST(AllowMany, KeepsTheKeyCap) {
  ManualClock clock;
  clock.set(ManualClock::time_point(1s));
  MemoryLimiter<TypeParam, ManualClock> limiter(batch_policy<TypeParam>(), {.max_keys = 64, .shards = 4}, clock);
  std::vector<std::string> names;
  for (int k = 0; k < 500; ++k) names.push_back("new-" + std::to_string(k));
  std::vector<Request> batch;
  for (const std::string& n : names) batch.push_back({n, 1});
  const std::vector<Decision> got = limiter.allow_many(batch);
  for (const Decision& d : got) EXPECT_TRUE(d.allowed);
  EXPECT_LE(limiter.size(), 64U);
  EXPECT_GE(limiter.evictions(), 500U - 64U);
}

/// Two threads send batches at one shared key and at a key of their own each, at one time: each key admits exactly
/// its quota (each request is atomic; a lost update would admit more), and the own keys do not disturb each other.
TEST(AllowManyThreads, ShareOneKeysQuotaExactly) {
  ManualClock clock;
  clock.set(ManualClock::time_point(5s));
  constexpr std::int64_t kLimit = 3000;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> limiter({.limit = kLimit, .window = 1h}, {}, clock);
  std::atomic<std::int64_t> shared_admitted{0};
  std::array<std::int64_t, 2> own_admitted{};
  auto run = [&](int t) {
    const std::string own = "own-" + std::to_string(t);
    std::vector<Request> batch;
    for (int i = 0; i < 32; ++i) batch.push_back({i % 2 == 0 ? std::string_view("shared") : std::string_view(own), 1});
    for (int round = 0; round < 300; ++round) {  // 4,800 requests at each key per thread: past every quota
      const std::vector<Decision> got = limiter.allow_many(batch);
      for (std::size_t i = 0; i < got.size(); ++i) {
        if (!got[i].allowed) continue;
        if (i % 2 == 0) {
          shared_admitted.fetch_add(1, std::memory_order_relaxed);
        } else {
          ++own_admitted[static_cast<std::size_t>(t)];
        }
      }
    }
  };
  std::thread a(run, 0), b(run, 1);
  a.join();
  b.join();
  EXPECT_EQ(shared_admitted.load(), kLimit);
  EXPECT_EQ(own_admitted[0], kLimit);
  EXPECT_EQ(own_admitted[1], kLimit);
}

/// Keys of 0 bytes, of up to 16 (inline) and of more (heap keys), batches of every size from 0 to 19 (fewer and more
/// than the 8 loaded ahead) and then up to 400 over 2,000 keys, costs 0 to past the limit and one of INT64_MAX, at a
/// time the caller read: every decision is a twin's single `allow`, and the byte count stays exact.
TYPED_TEST(AllowMany, DecidesAsOneAllowPerRequestForOddKeysAndBatchSizes) {
  ManualClock batch_clock, single_clock;
  MemoryLimiter<TypeParam, ManualClock> batched(batch_policy<TypeParam>(), {.shards = 1}, batch_clock);
  MemoryLimiter<TypeParam, ManualClock> single(batch_policy<TypeParam>(), {.shards = 1}, single_clock);
  std::mt19937_64 random(11);
  std::vector<std::string> names{""};
  for (int k = 0; k < 2000; ++k) names.push_back(std::string(random() % 40, 'k') + std::to_string(k));
  for (std::size_t round = 0; round < 40; ++round) {
    const auto at = ManualClock::time_point(1s + static_cast<int>(round) * 37ms);
    batch_clock.set(at);
    single_clock.set(at);
    std::vector<Request> batch(round < 20 ? round : 1 + random() % 400);
    for (Request& r : batch) {
      r.key = names[random() % names.size()];
      r.cost = static_cast<std::int64_t>(random() % 6);
    }
    if (round == 5) batch.push_back({names[1], INT64_MAX});
    std::vector<Decision> got(batch.size());
    batched.allow_many(batch, got, at);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      ASSERT_EQ(got[i], single.allow(batch[i].key, batch[i].cost)) << "round " << round << ", request " << i;
    }
  }
  EXPECT_EQ(batched.size(), single.size());
  EXPECT_EQ(batched.table_bytes(), batched.recount_table_bytes());
}

/// Batches of new (also heap) keys grow the tables, whose address the batch reads outside the lock to load slots
/// ahead, while another thread sweeps (shrinking them) and changes the policy: no race (TSan), the cap and the byte
/// count hold.
TEST(AllowManyThreads, RacesTableGrowthSweepAndSetPolicy) {
  ManualClock clock;
  clock.set(ManualClock::time_point(5s));
  MemoryLimiter<ratelimit::SlidingWindowLog, ManualClock> limiter(
      {.limit = 4, .window = 1s}, {.max_keys = 4000, .shards = 2, .max_bytes = 200000}, clock);
  std::atomic<bool> stop{false};
  auto send = [&](int t) {
    std::vector<std::string> names;
    for (int k = 0; k < 1500; ++k)
      names.push_back(std::to_string(t) + "-" + std::to_string(k) +
                      std::string(static_cast<std::size_t>(k % 3) * 10, 'x'));
    std::vector<Request> batch;
    for (const std::string& n : names) batch.push_back({n, static_cast<std::int64_t>(1 + n.size() % 3)});
    for (int r = 0; r < 2; ++r) (void)limiter.allow_many(batch);
  };
  std::thread changer([&] {
    for (std::int64_t i = 0; !stop.load(); ++i) {
      limiter.set_policy({.limit = 3 + i % 3, .window = 1s});
      (void)limiter.sweep();
      clock.advance(10ms);
    }
  });
  std::thread a(send, 0), b(send, 1);
  a.join();
  b.join();
  stop = true;
  changer.join();
  EXPECT_LE(limiter.size(), 4000U);
  EXPECT_EQ(limiter.table_bytes(), limiter.recount_table_bytes());
}

/// include/ratelimit/README.md "Batches", as written there, against the limiter of the snippet just before it (a
/// `ManualClock`): both forms compile and decide in order; the caller's time is the limiter's clock's, whatever that
/// clock is.
TEST(AllowManyReadme, BatchSnippetCompilesAndDecides) {
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter limiter(ratelimit::FixedWindow{.limit = 5, .window = 1s}, {}, clock);
  clock.advance(250ms);

  const ratelimit::BatchRequest batch[] = {{"tenant-a", 1}, {"tenant-b", 2}, {"tenant-a", 1}};
  const std::vector<ratelimit::Decision> decisions = limiter.allow_many(batch);
  std::array<ratelimit::Decision, std::size(batch)> into{};
  limiter.allow_many(batch, into, limiter.clock().now());

  ASSERT_EQ(decisions.size(), 3U);
  EXPECT_EQ(decisions[0].remaining, 4);
  EXPECT_EQ(decisions[1].remaining, 3);
  EXPECT_EQ(decisions[2].remaining, 3);
  EXPECT_EQ(into[0].remaining, 2);  // the second batch counts on top of the first
  EXPECT_EQ(into[1].remaining, 1);
  EXPECT_EQ(into[2].remaining, 1);
}

}  // namespace
