// RedisLimiter::set_policy (include/ratelimit/README.md "Changing a policy at run time", Redis): a named limiter keeps
// each key's usage in units, converted on the key's next touch exactly as MemoryLimiter::set_policy converts it (a twin
// over every policy, ManualClock); the processes of a rolling deploy (two limiters of one name with different
// parameters) each decide wholly under their own policy; unnamed limiters refuse; checks racing with changes see one
// policy or the other.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;
using ratelimit::redis::RedisLimiter;
using ratelimit_test::client_options;
using ratelimit_test::shared_redis;

class SetPolicyRedis : public testing::Test {
 protected:
  void SetUp() override { RATELIMIT_REQUIRE_REDIS(); }

  static ratelimit::redis::RedisOptions named(std::string name) {
    return ratelimit_test::named_client_options(*shared_redis(), std::move(name));
  }
};

// Durations at Redis's 1 us tick: memory's nanoseconds rounded up (a sliding counter's floor divisions
// fall between microseconds; include/ratelimit/README.md "Backends agree").
std::chrono::nanoseconds at_redis_tick(std::chrono::nanoseconds d) {
  return d == Decision::never ? d : std::chrono::ceil<std::chrono::microseconds>(d);
}

void expect_same_as_memory(const Decision& memory, const Decision& redis, const std::string& where) {
  EXPECT_EQ(memory.allowed, redis.allowed) << where;
  EXPECT_EQ(memory.limit, redis.limit) << where;
  EXPECT_EQ(memory.remaining, redis.remaining) << where;
  EXPECT_EQ(at_redis_tick(memory.retry_after), redis.retry_after) << where;
  EXPECT_EQ(at_redis_tick(memory.reset_after), redis.reset_after) << where;
}

// Random calls (3 keys, costs 0..3, refunds, peeks, times in whole milliseconds), with a policy change
// every 40 calls alternating between `a` and `b`: memory and Redis give the same decision every time.
// Redis converts a key on its next touch, memory at the change: the twin calls right after each change
// at the change's time, so both convert at the same time.
template <class P>
void set_policy_twin(const std::string& name, P a, P b) {
  ManualClock clock;
  clock.advance(1'700'000'000s);
  MemoryLimiter<P, ManualClock> memory(a, {}, clock);
  auto o = client_options(*shared_redis());
  o.name = name;
  RedisLimiter<P, ManualClock> redis(a, o, clock);
  std::mt19937_64 rng(42);
  const std::string keys[] = {"x", "y", "z"};
  for (int i = 0; i < 400; ++i) {
    if (i % 40 == 39) {
      const P& next = (i / 40) % 2 == 0 ? b : a;
      memory.set_policy(next);
      redis.set_policy(next);
      for (const std::string& k : keys) {
        expect_same_as_memory(memory.allow(k, 0), redis.allow(k, 0), name + " after change " + std::to_string(i));
      }
      continue;
    }
    ratelimit_test::twin_random_call(memory, redis, rng, keys, name + " call " + std::to_string(i),
                                     expect_same_as_memory);
    if (testing::Test::HasFailure()) return;
    clock.advance(std::chrono::milliseconds(rng() % 700));
  }
}

TEST_F(SetPolicyRedis, TwinOfMemoryForEveryPolicy) {
  set_policy_twin("gcra", ratelimit::Gcra{.limit = 10, .period = 10s, .burst = 5},
                  ratelimit::Gcra{.limit = 100, .period = 10s, .burst = 8});
  set_policy_twin("bucket", ratelimit::TokenBucket{.capacity = 6, .refill_tokens = 2, .refill_period = 1s},
                  ratelimit::TokenBucket{.capacity = 3, .refill_tokens = 1, .refill_period = 3s});
  set_policy_twin("fixed", ratelimit::FixedWindow{8, 5s}, ratelimit::FixedWindow{4, 3s});
  set_policy_twin("counter", ratelimit::SlidingWindowCounter{8, 5s}, ratelimit::SlidingWindowCounter{5, 2s});
  set_policy_twin("log", ratelimit::SlidingWindowLog{8, 5s}, ratelimit::SlidingWindowLog{3, 2s});
}

// GCRA (include/ratelimit/README.md "Changing a policy at run time"): 3 units used, T 1 s -> 0.5 s, burst 4:
// TAT = t + 1.5 s. The converted state is written at once (a peek does not write: a second peek converts again, the
// same way).
TEST_F(SetPolicyRedis, GcraCarriesUsedUnitsAndLayersFollow) {
  ManualClock clock;
  clock.advance(1'700'000'000s);
  RedisLimiter<ratelimit::Gcra, ManualClock> l(ratelimit::Gcra{.limit = 10, .period = 10s, .burst = 5},
                                               named("gcra-units"), clock);
  ratelimit::LimiterLayer layer(l, "api");
  EXPECT_EQ(layer.quota().quota, 5);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(l.allow("k").allowed);
  clock.advance(500ms);
  l.set_policy(ratelimit::Gcra{.limit = 10, .period = 5s, .burst = 4});
  EXPECT_EQ(l.policy().burst, 4);
  EXPECT_EQ(l.policy_generation(), 1u);
  EXPECT_EQ(layer.quota().quota, 4);
  const Decision d = l.peek("k");
  EXPECT_EQ(d.limit, 4);
  EXPECT_EQ(d.remaining, 1);
  EXPECT_EQ(d.reset_after, 1500ms);
  EXPECT_TRUE(l.allow("k").allowed);
  EXPECT_FALSE(l.allow("k").allowed);
  EXPECT_EQ(l.peek("fresh").remaining, 4);
}

// A rolling deploy: old and new processes (two limiters of one name) on one key at once. Each call
// converts the key to its caller's parameters, so each decision is wholly the caller's policy, and the
// usage moves between them in units: a fixed window's count is one count whatever the window.
TEST_F(SetPolicyRedis, RollingDeploySeesUsageInEachOwnUnits) {
  ManualClock clock;
  clock.advance(1'700'000'000s);
  const auto o = named("deploy");  // one key prefix for both
  RedisLimiter<ratelimit::FixedWindow, ManualClock> old_process(ratelimit::FixedWindow{10, 60s}, o, clock);
  RedisLimiter<ratelimit::FixedWindow, ManualClock> new_process(ratelimit::FixedWindow{20, 120s}, o, clock);
  ASSERT_TRUE(old_process.allow("k", 4).allowed);
  Decision d = new_process.allow("k", 2);
  EXPECT_EQ(d.limit, 20);
  EXPECT_EQ(d.remaining, 14);  // 4 + 2 used
  d = old_process.allow("k", 1);
  EXPECT_EQ(d.limit, 10);
  EXPECT_EQ(d.remaining, 3);  // 7 used, against its own limit
  EXPECT_FALSE(old_process.allow("k", 4).allowed);
  EXPECT_EQ(new_process.peek("k").remaining, 13);

  // GCRA between T = 1 s (burst 5) and T = 100 ms (burst 50): used units are carried, rounded up.
  const auto og = named("deploy-gcra");
  RedisLimiter<ratelimit::Gcra, ManualClock> slow(ratelimit::Gcra{.limit = 1, .period = 1s, .burst = 5}, og, clock);
  RedisLimiter<ratelimit::Gcra, ManualClock> fast(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 50}, og, clock);
  ASSERT_TRUE(slow.allow("k", 3).allowed);  // backlog 3 s
  d = fast.peek("k");
  EXPECT_EQ(d.limit, 50);
  EXPECT_EQ(d.reset_after, 300ms);           // 3 units of 100 ms
  ASSERT_TRUE(fast.allow("k", 10).allowed);  // 13 units
  d = slow.peek("k");
  EXPECT_EQ(d.limit, 5);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 5s);  // 13 units clamped to its burst of 5
}

TEST_F(SetPolicyRedis, UnnamedAndBadPoliciesAreRefused) {
  ManualClock clock;
  RedisLimiter<ratelimit::FixedWindow, ManualClock> unnamed(ratelimit::FixedWindow{10, 60s},
                                                            client_options(*shared_redis()), clock);
  try {
    unnamed.set_policy(ratelimit::FixedWindow{20, 60s});
    ADD_FAILURE() << "an unnamed limiter changed its policy";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("LimiterOptions.name"), std::string::npos) << e.what();
  }
  EXPECT_EQ(unnamed.policy().limit, 10);
  RedisLimiter<ratelimit::FixedWindow, ManualClock> l(ratelimit::FixedWindow{10, 60s}, named("bad"), clock);
  try {
    l.set_policy(ratelimit::FixedWindow{10, 1500ns});
    ADD_FAILURE() << "a window of 1.5 us was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("FixedWindow.window"), std::string::npos) << e.what();
  }
  EXPECT_EQ(l.policy().window, 60s);
  EXPECT_EQ(l.policy_generation(), 0u);
}

// 8 threads: 6 check (sync and async) while 2 switch between two GCRA policies: every decision is wholly
// one policy's (its limit one of the two bursts, its numbers within that policy's bounds), none fails.
TEST_F(SetPolicyRedis, RaceEightThreadsNeverAMix) {
  ManualClock clock;
  clock.advance(1'700'000'000s);
  const ratelimit::Gcra a{.limit = 1, .period = 1s, .burst = 5};     // T = 1 s, tau = 5 s
  const ratelimit::Gcra b{.limit = 100, .period = 1s, .burst = 50};  // T = 10 ms, tau = 500 ms
  RedisLimiter<ratelimit::Gcra, ManualClock> l(a, named("race"), clock);
  std::atomic<int> switching{2}, mixed{0}, checks{0};
  auto fits = [&](const Decision& d) {
    const bool is_a = d.limit == 5 && d.remaining >= 0 && d.remaining <= 5 && d.reset_after <= 5s;
    const bool is_b = d.limit == 50 && d.remaining >= 0 && d.remaining <= 50 && d.reset_after <= 500ms;
    return is_a || is_b;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      const std::string keys[] = {"a", "b", std::to_string(t)};
      for (int i = 0; i < 150 || switching > 0; ++i) {
        const auto r = l.check(keys[i % 3]);
        ++checks;
        if (r.outcome != ratelimit::Outcome::decided || !fits(r.decision)) ++mixed;
        if (i % 8 == 0) clock.advance(1ms);
      }
    });
  }
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        l.set_policy((i + t) % 2 == 0 ? b : a);
        std::this_thread::sleep_for(100us);
      }
      --switching;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mixed.load(), 0);
  EXPECT_GE(checks.load(), 6 * 150);
}

// A change to a longer window or a slower rate: a key's Redis TTL must cover its converted usage, also when
// the touch that first sees the change denies (a sliding log's denial wrote nothing) or is a joint check the
// layer denies (its conversion was not written). Otherwise the key expired at its old, shorter TTL and its
// usage was lost: the new policy admitted a second full quota inside one of its windows.
TEST_F(SetPolicyRedis, KeysLiveAsLongAsTheirConvertedUsage) {
  ManualClock clock;
  clock.advance(1'700'000'000s);
  auto admin = shared_redis()->admin();
  auto ttl_covers = [&](const std::string& key, const Decision& d) {
    const long long ttl = ratelimit_test::pttl(admin, key);
    EXPECT_GE(ttl, std::chrono::ceil<std::chrono::milliseconds>(d.reset_after).count()) << key;
  };
  RedisLimiter<ratelimit::SlidingWindowLog, ManualClock> log(ratelimit::SlidingWindowLog{2, 1s}, named("ttl-log"),
                                                             clock);
  ASSERT_TRUE(log.allow("k", 2).allowed);
  log.set_policy(ratelimit::SlidingWindowLog{2, 1h});
  Decision d = log.allow("k");
  ASSERT_FALSE(d.allowed);
  ttl_covers(log.redis_key("k"), d);

  // The joint check (one script: limiters on one pool), denied by the changed layers.
  const auto base = named("ttl-joint");
  auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(base.connection(), base.limiter());
  auto on_pool = [&](const char* name) {
    auto o = base.limiter();
    o.name = name;
    return o;
  };
  RedisLimiter<ratelimit::FixedWindow, ManualClock> fixed(ratelimit::FixedWindow{2, 1s}, pool, on_pool("fixed"), clock);
  RedisLimiter<ratelimit::Gcra, ManualClock> gcra(ratelimit::Gcra{.limit = 1, .period = 1s, .burst = 2}, pool,
                                                  on_pool("gcra"), clock);
  RedisLimiter<ratelimit::SlidingWindowLog, ManualClock> joint_log(ratelimit::SlidingWindowLog{2, 1s}, pool,
                                                                   on_pool("log"), clock);
  ratelimit::LimiterLayer fixed_layer(fixed, "fixed");
  ratelimit::LimiterLayer gcra_layer(gcra, "gcra");
  ratelimit::LimiterLayer log_layer(joint_log, "log");
  ASSERT_TRUE(fixed.allow("k", 2).allowed);
  ASSERT_TRUE(gcra.allow("k", 2).allowed);
  ASSERT_TRUE(joint_log.allow("k", 2).allowed);
  fixed.set_policy(ratelimit::FixedWindow{2, 1h});
  gcra.set_policy(ratelimit::Gcra{.limit = 1, .period = 1h, .burst = 2});
  joint_log.set_policy(ratelimit::SlidingWindowLog{2, 1h});
  const auto joint = ratelimit::check_layers({{&fixed_layer, "k"}, {&gcra_layer, "k"}, {&log_layer, "k"}});
  ASSERT_FALSE(joint);
  for (std::size_t i = 0; i < 3; ++i) ASSERT_EQ(joint.layers[i].verdict, ratelimit::Verdict::limited) << i;  // joint
  ttl_covers(fixed.redis_key("k"), joint.layers[0].decision);
  ttl_covers(gcra.redis_key("k"), joint.layers[1].decision);
  ttl_covers(joint_log.redis_key("k"), joint.layers[2].decision);
}

}  // namespace
