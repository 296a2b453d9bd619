// Layered checks on Redis through the one-script path (lua/layered.lua via RedisLimiter::check_jointly):
// all or nothing under a race, the same LayeredDecisions as the in-memory (lock-based) path, one EVALSHA
// per request with NOSCRIPT recovery, the fallback to consume-then-refund when the keys cannot share one
// script, and Redis failures answered by the failure policy.
#include <gtest/gtest.h>

#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::FailurePolicy;
using ratelimit::LayeredDecision;
using ratelimit::LayerRequest;
using ratelimit::LimiterLayer;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;
using ratelimit::Verdict;
using ratelimit::redis::ConnectionPool;
using ratelimit::redis::RedisLimiter;
using ratelimit::redis::RedisOptions;

namespace {

using ratelimit_test::command_count;

// Equal decisions, except that a retry_after computed by a floor division (sliding window counter's
// floor(a * W / prev)) rounds at the backend's tick: 1 ns in memory, 1 us on Redis (include/ratelimit/README.md
// "Guarantees").
bool same(const Decision& redis, const Decision& memory) {
  const auto gap = redis.retry_after - memory.retry_after;
  return redis.allowed == memory.allowed && redis.limit == memory.limit && redis.remaining == memory.remaining &&
         redis.reset_after == memory.reset_after && gap < 1us && gap > -1us;
}

std::string show(const Decision& d) {
  return "{" + std::to_string(d.allowed) + ", " + std::to_string(d.limit) + ", " + std::to_string(d.remaining) + ", " +
         std::to_string(d.retry_after.count()) + ", " + std::to_string(d.reset_after.count()) + "}";
}

::testing::AssertionResult same_layered(const LayeredDecision& redis, const LayeredDecision& memory) {
  if (redis.layers.size() != memory.layers.size()) return ::testing::AssertionFailure() << "layer counts differ";
  for (std::size_t i = 0; i < redis.layers.size(); ++i) {
    const auto& r = redis.layers[i];
    const auto& m = memory.layers[i];
    if (r.verdict != m.verdict || !same(r.decision, m.decision)) {
      return ::testing::AssertionFailure()
             << "layer " << i << ": redis verdict " << static_cast<int>(r.verdict) << " " << show(r.decision)
             << ", memory verdict " << static_cast<int>(m.verdict) << " " << show(m.decision);
    }
  }
  if (!same(redis.decision, memory.decision) || redis.reported_by != memory.reported_by) {
    return ::testing::AssertionFailure() << "overall: redis " << show(redis.decision) << " by "
                                         << redis.reported_by.value_or(99) << ", memory " << show(memory.decision)
                                         << " by " << memory.reported_by.value_or(99);
  }
  return ::testing::AssertionSuccess();
}

RedisOptions dead_options(FailurePolicy on_error) {
  RedisOptions o;
  o.host = "127.0.0.1";
  o.port = ratelimit_test::free_port();  // nothing listens there
  o.on_error = on_error;
  o.connect_timeout = 200ms;
  o.command_timeout = 200ms;
  o.failure_retry_after = 3s;
  o.key_prefix = ratelimit_test::unique_prefix();
  o.time_source = ratelimit::redis::TimeSource::client;
  return o;
}

}  // namespace

// Many threads through three Redis layers on one pool (one script per request). Every request is all or
// nothing: admitted by every layer or kept by none; the stored counts equal the admitted costs exactly;
// and the server ran exactly one EVALSHA per request (no refund ever ran, so no layer's count held a
// denied request even for a moment).
TEST(RedisLayeredScript, RaceThreeLayersAllOrNothingExactTotals) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  const auto options = ratelimit_test::client_options(*ratelimit_test::shared_redis());
  auto pool = std::make_shared<ConnectionPool>(options.connection(), options.limiter());
  RedisLimiter<ratelimit::FixedWindow, ManualClock> ip(ratelimit::FixedWindow{40, 1h}, pool, clock);
  RedisLimiter<ratelimit::Gcra, ManualClock> key(ratelimit::Gcra{.limit = 1, .period = 1h, .burst = 50}, pool, clock);
  RedisLimiter<ratelimit::SlidingWindowLog, ManualClock> ep(ratelimit::SlidingWindowLog{25, 1h}, pool, clock);
  LimiterLayer<decltype(ip)> ip_layer(ip, "ip");
  LimiterLayer<decltype(key)> key_layer(key, "apikey");
  LimiterLayer<decltype(ep)> ep_layer(ep, "endpoint");
  const std::array<std::string, 3> ips{"a", "b", "c"};
  const std::array<std::string, 2> keys{"x", "y"};
  const std::array<std::string, 4> eps{"/1", "/2", "/3", "/4"};
  std::array<std::atomic<std::int64_t>, 3> ip_used{};
  std::array<std::atomic<std::int64_t>, 2> key_used{};
  std::array<std::atomic<std::int64_t>, 4> ep_used{};
  std::atomic<int> admitted{0}, denied{0}, partial{0};
  auto admin = ratelimit_test::shared_redis()->admin();
  admin.command({"CONFIG", "RESETSTAT"});
  constexpr int kThreads = 6, kPerThread = 120;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) + 500u);
      for (int i = 0; i < kPerThread; ++i) {
        const std::size_t a = rng() % ips.size(), b = rng() % keys.size(), c = rng() % eps.size();
        const std::int64_t cost = 1 + static_cast<std::int64_t>(rng() % 3);
        const std::array<LayerRequest, 3> req{LayerRequest{&ip_layer, ips[a], cost},
                                              LayerRequest{&key_layer, keys[b], cost},
                                              LayerRequest{&ep_layer, eps[c], cost}};
        const LayeredDecision d = ratelimit::check_layers(req);
        int kept = 0;
        for (const auto& o : d.layers) kept += o.verdict == Verdict::admitted ? 1 : 0;
        if (d) {
          if (kept != 3) ++partial;
          ++admitted;
          ip_used[a] += cost;
          key_used[b] += cost;
          ep_used[c] += cost;
        } else {
          if (kept != 0) ++partial;
          ++denied;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(partial.load(), 0);
  EXPECT_GT(denied.load(), 0);
  EXPECT_GT(admitted.load(), 0);
  // One EVALSHA per request (a NOSCRIPT one counts as rejected, then answered by EVAL), no refunds.
  EXPECT_EQ(command_count(admin, "evalsha"), kThreads * kPerThread);
  EXPECT_LE(command_count(admin, "eval"), kThreads);  // threads racing on a fresh server may each get NOSCRIPT
  for (std::size_t i = 0; i < ips.size(); ++i) EXPECT_EQ(40 - ip.peek(ips[i]).remaining, ip_used[i].load()) << ips[i];
  for (std::size_t i = 0; i < keys.size(); ++i)
    EXPECT_EQ(50 - key.peek(keys[i]).remaining, key_used[i].load()) << keys[i];
  for (std::size_t i = 0; i < eps.size(); ++i) EXPECT_EQ(25 - ep.peek(eps[i]).remaining, ep_used[i].load()) << eps[i];
  // Every layer counted each request once: admitted, or rolled back / denied.
  for (const ratelimit::Layer* l :
       {static_cast<ratelimit::Layer*>(&ip_layer), static_cast<ratelimit::Layer*>(&key_layer),
        static_cast<ratelimit::Layer*>(&ep_layer)}) {
    const auto c = l->stats().snapshot();
    EXPECT_EQ(c.allowed, static_cast<std::uint64_t>(admitted.load())) << l->name();
    EXPECT_EQ(c.rolled_back + c.denied, static_cast<std::uint64_t>(denied.load())) << l->name();
  }
  EXPECT_EQ(ip.stats().failures + key.stats().failures + ep.stats().failures, 0u);
}

// Random layered checks over all five policies, in memory (shard locks) and on Redis (one script), with
// client time in whole microseconds: identical LayeredDecisions, verdicts and every decision field.
TEST(RedisLayeredScript, DifferentialAgainstMemoryAllPolicies) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  const auto options = ratelimit_test::client_options(*ratelimit_test::shared_redis());
  auto pool = std::make_shared<ConnectionPool>(options.connection(), options.limiter());
  const ratelimit::FixedWindow fw{5, 2s};
  const ratelimit::SlidingWindowLog swl{6, 3s};
  const ratelimit::SlidingWindowCounter swc{7, 2s};
  const ratelimit::TokenBucket tb{.capacity = 4, .refill_tokens = 2, .refill_period = 1s};  // T = 500 ms
  const ratelimit::Gcra gcra{.limit = 3, .period = 1500ms, .burst = 5};                     // T = 500 ms
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> m_fw(fw, {}, clock);
  MemoryLimiter<ratelimit::SlidingWindowLog, ManualClock> m_swl(swl, {}, clock);
  MemoryLimiter<ratelimit::SlidingWindowCounter, ManualClock> m_swc(swc, {}, clock);
  MemoryLimiter<ratelimit::TokenBucket, ManualClock> m_tb(tb, {}, clock);
  MemoryLimiter<ratelimit::Gcra, ManualClock> m_gcra(gcra, {}, clock);
  RedisLimiter<ratelimit::FixedWindow, ManualClock> r_fw(fw, pool, clock);
  RedisLimiter<ratelimit::SlidingWindowLog, ManualClock> r_swl(swl, pool, clock);
  RedisLimiter<ratelimit::SlidingWindowCounter, ManualClock> r_swc(swc, pool, clock);
  RedisLimiter<ratelimit::TokenBucket, ManualClock> r_tb(tb, pool, clock);
  RedisLimiter<ratelimit::Gcra, ManualClock> r_gcra(gcra, pool, clock);
  LimiterLayer<decltype(m_fw)> mem0(m_fw, "fw");
  LimiterLayer<decltype(m_swl)> mem1(m_swl, "swl");
  LimiterLayer<decltype(m_swc)> mem2(m_swc, "swc");
  LimiterLayer<decltype(m_tb)> mem3(m_tb, "tb");
  LimiterLayer<decltype(m_gcra)> mem4(m_gcra, "gcra");
  LimiterLayer<decltype(r_fw)> red0(r_fw, "fw");
  LimiterLayer<decltype(r_swl)> red1(r_swl, "swl");
  LimiterLayer<decltype(r_swc)> red2(r_swc, "swc");
  LimiterLayer<decltype(r_tb)> red3(r_tb, "tb");
  LimiterLayer<decltype(r_gcra)> red4(r_gcra, "gcra");
  const std::array<ratelimit::Layer*, 5> memory{&mem0, &mem1, &mem2, &mem3, &mem4};
  const std::array<ratelimit::Layer*, 5> redis{&red0, &red1, &red2, &red3, &red4};
  const std::array<std::int64_t, 5> limits{5, 6, 7, 4, 5};
  const std::array<std::string, 2> names{"p", "q"};
  auto admin = ratelimit_test::shared_redis()->admin();
  admin.command({"CONFIG", "RESETSTAT"});
  std::mt19937_64 rng(2024);
  int denials = 0, rollbacks = 0;
  constexpr int kSteps = 2000;
  for (int step = 0; step < kSteps; ++step) {
    // Steps of 125 ms (window edges and same-tick cases), sometimes an odd number of microseconds.
    std::int64_t us = static_cast<std::int64_t>(rng() % 5) * 125'000;
    if (rng() % 4 == 0) us += static_cast<std::int64_t>(rng() % 1000);
    clock.advance(std::chrono::microseconds(us));
    std::array<std::size_t, 5> order{0, 1, 2, 3, 4};
    std::shuffle(order.begin(), order.end(), rng);
    const std::size_t n = 2 + rng() % 4;
    std::vector<LayerRequest> m_req, r_req;
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t p = order[k];
      const std::string& key = names[rng() % names.size()];
      const std::uint64_t pick = rng() % 10;
      const std::int64_t cost = pick == 0 ? 0 : (pick == 1 ? limits[p] + 1 : static_cast<std::int64_t>(1 + rng() % 3));
      m_req.push_back(LayerRequest{memory[p], key, cost});
      r_req.push_back(LayerRequest{redis[p], key, cost});
    }
    const LayeredDecision r = ratelimit::check_layers(r_req);
    const LayeredDecision m = ratelimit::check_layers(m_req);
    ASSERT_TRUE(same_layered(r, m)) << "step " << step;
    if (!m) ++denials;
    for (const auto& o : m.layers) rollbacks += o.verdict == Verdict::rolled_back ? 1 : 0;
  }
  EXPECT_GT(denials, kSteps / 10);
  EXPECT_GT(rollbacks, kSteps / 10);
  EXPECT_EQ(command_count(admin, "evalsha"), kSteps);  // one script per check, nothing else
  EXPECT_LE(command_count(admin, "eval"), 1);
}

// The one-script path is taken (one EVALSHA per layered check, nothing else), and recovers from a
// SCRIPT FLUSH with one EVAL, counted as a script reload.
TEST(RedisLayeredScript, OneEvalshaPerCheckAndNoscriptRecovery) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  const auto options = ratelimit_test::client_options(*ratelimit_test::shared_redis());
  auto pool = std::make_shared<ConnectionPool>(options.connection(), options.limiter());
  RedisLimiter<ratelimit::FixedWindow, ManualClock> ip(ratelimit::FixedWindow{3, 1min}, pool, clock);
  RedisLimiter<ratelimit::SlidingWindowLog, ManualClock> login(ratelimit::SlidingWindowLog{2, 5min}, pool, clock);
  LimiterLayer<decltype(ip)> ip_layer(ip, "ip");
  LimiterLayer<decltype(login)> login_layer(login, "login");
  auto admin = ratelimit_test::shared_redis()->admin();
  admin.command({"SCRIPT", "FLUSH"});
  admin.command({"CONFIG", "RESETSTAT"});
  // Worked by hand: login allows 2, so the third check is denied by login and ip's consumption is not kept.
  auto check = [&] { return ratelimit::check_layers({{&ip_layer, "10.0.0.1"}, {&login_layer, "10.0.0.1"}}); };
  const LayeredDecision first = check();
  ASSERT_TRUE(first);
  EXPECT_EQ(first.layers[0].decision, (Decision{.allowed = true, .limit = 3, .remaining = 2, .reset_after = 1min}));
  EXPECT_EQ(first.layers[1].decision, (Decision{.allowed = true, .limit = 2, .remaining = 1, .reset_after = 5min}));
  EXPECT_TRUE(check());
  const LayeredDecision third = check();
  ASSERT_FALSE(third);
  EXPECT_EQ(third.layers[0].verdict, Verdict::rolled_back);
  EXPECT_EQ(third.layers[0].decision, (Decision{.allowed = true, .limit = 3, .remaining = 1, .reset_after = 1min}));
  EXPECT_EQ(third.layers[1].verdict, Verdict::limited);
  EXPECT_EQ(third.layers[1].decision,
            (Decision{.allowed = false, .limit = 2, .remaining = 0, .retry_after = 5min, .reset_after = 5min}));
  EXPECT_EQ(third.reported_by, 1u);
  EXPECT_EQ(command_count(admin, "evalsha"), 3);  // the first was refused with NOSCRIPT...
  EXPECT_EQ(command_count(admin, "eval"), 1);     // ...and answered by one EVAL
  EXPECT_EQ(ip.stats().script_reloads + login.stats().script_reloads, 1u);
  EXPECT_EQ(ip.stats().calls, 3u);
  EXPECT_EQ(login.stats().calls, 3u);
  EXPECT_EQ(ip.peek("10.0.0.1").remaining, 1);  // two kept, the denied one not (its script's first use: an EVAL)
  const auto evals = command_count(admin, "eval");
  const auto reloads = ip.stats().script_reloads + login.stats().script_reloads;
  admin.command({"SCRIPT", "FLUSH"});
  clock.advance(5min);
  EXPECT_TRUE(check());
  EXPECT_EQ(command_count(admin, "eval"), evals + 1);
  EXPECT_EQ(ip.stats().script_reloads + login.stats().script_reloads, reloads + 1);
}

// Keys that cannot share one script are checked layer by layer (consume-then-refund): two pools (two
// joint domains), or the same Redis key twice in one request (both costs count, as in memory).
TEST(RedisLayeredScript, FallsBackAcrossPoolsAndForARepeatedKey) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  const auto options = ratelimit_test::client_options(*ratelimit_test::shared_redis());
  auto pool = std::make_shared<ConnectionPool>(options.connection(), options.limiter());
  auto other_pool = std::make_shared<ConnectionPool>(options.connection(), options.limiter());
  RedisLimiter<ratelimit::FixedWindow, ManualClock> ip(ratelimit::FixedWindow{5, 1min}, pool, clock);
  RedisLimiter<ratelimit::Gcra, ManualClock> key(ratelimit::Gcra{.limit = 1, .period = 1min, .burst = 1}, other_pool,
                                                 clock);
  LimiterLayer<decltype(ip)> ip_layer(ip, "ip");
  LimiterLayer<decltype(key)> key_layer(key, "apikey");
  EXPECT_NE(ip.joint_domain(), key.joint_domain());
  auto admin = ratelimit_test::shared_redis()->admin();
  EXPECT_TRUE(ratelimit::check_layers({{&ip_layer, "u"}, {&key_layer, "u"}}));
  admin.command({"CONFIG", "RESETSTAT"});
  const LayeredDecision d = ratelimit::check_layers({{&ip_layer, "u"}, {&key_layer, "u"}});
  EXPECT_FALSE(d);
  EXPECT_EQ(d.layers[0].verdict, Verdict::rolled_back);
  EXPECT_EQ(d.layers[0].decision.remaining, 4);
  EXPECT_EQ(command_count(admin, "evalsha"), 3);  // ip consumes, key denies, ip is refunded
  // The same Redis key twice: both costs, as in memory; then a denial leaves nothing.
  EXPECT_TRUE(ratelimit::check_layers({{&ip_layer, "v", 2}, {&ip_layer, "v", 3}}));
  EXPECT_EQ(ip.peek("v").remaining, 0);
  EXPECT_FALSE(ratelimit::check_layers({{&ip_layer, "w", 3}, {&ip_layer, "w", 3}}));
  EXPECT_EQ(ip.peek("w").remaining, 5);
}

// Redis down: every layer answers its failure policy, without an exception under fail_open and
// fail_closed; under raise the BackendError reaches the caller and every layer counts it.
TEST(RedisLayeredScript, RedisDownFollowsTheFailurePolicy) {
  RATELIMIT_REQUIRE_REDIS();  // for free_port's environment only; the pools point at a dead port
  ManualClock clock;
  for (const FailurePolicy on_error : {FailurePolicy::fail_open, FailurePolicy::fail_closed, FailurePolicy::raise}) {
    const RedisOptions dead = dead_options(on_error);
    auto pool = std::make_shared<ConnectionPool>(dead.connection(), dead.limiter());
    RedisLimiter<ratelimit::FixedWindow, ManualClock> a(ratelimit::FixedWindow{5, 1min}, pool, clock);
    RedisLimiter<ratelimit::TokenBucket, ManualClock> b(
        ratelimit::TokenBucket{.capacity = 3, .refill_tokens = 1, .refill_period = 1s}, pool, clock);
    LimiterLayer<decltype(a)> la(a, "a");
    LimiterLayer<decltype(b)> lb(b, "b");
    const auto check = [&] { return ratelimit::check_layers({{&la, "k"}, {&lb, "k", 2}}); };
    switch (on_error) {
      case FailurePolicy::fail_open: {
        LayeredDecision d;
        ASSERT_NO_THROW(d = check());
        EXPECT_TRUE(d);
        EXPECT_EQ(d.layers[0].decision, (Decision{.allowed = true, .limit = 5, .remaining = 4, .reset_after = 1min}));
        EXPECT_EQ(d.layers[1].decision, (Decision{.allowed = true, .limit = 3, .remaining = 1, .reset_after = 2s}));
        break;
      }
      case FailurePolicy::fail_closed: {
        LayeredDecision d;
        ASSERT_NO_THROW(d = check());
        EXPECT_FALSE(d);
        for (const auto& o : d.layers) {
          EXPECT_EQ(o.verdict, Verdict::limited);
          EXPECT_EQ(o.decision.retry_after, 3s);
        }
        break;
      }
      case FailurePolicy::raise:
        EXPECT_THROW((void)check(), ratelimit::BackendError);
        EXPECT_EQ(la.stats().snapshot().backend_errors, 1u);
        EXPECT_EQ(lb.stats().snapshot().backend_errors, 1u);
        break;
      case FailurePolicy::fallback:  // not in this loop (tests/redis/fallback_test.cpp)
        break;
    }
    EXPECT_EQ(a.stats().failures, 1u);
    EXPECT_EQ(b.stats().failures, 1u);
    EXPECT_EQ(a.stats().calls, 1u);
  }
}

// A fail_closed denial is the failure policy's answer, not the key exceeding its quota: no penalty may
// follow (one Redis blip locked every client out for the whole penalty before; new-user review), and
// each layer counts a backend error. Both the one-script path (two layers) and one layer alone.
TEST(RedisLayeredScript, FailClosedDenialIsNoQuotaDenialAndStartsNoPenalty) {
  RATELIMIT_REQUIRE_REDIS();  // for free_port's environment only; the pool points at a dead port
  ManualClock clock;
  const RedisOptions dead = dead_options(FailurePolicy::fail_closed);
  auto pool = std::make_shared<ConnectionPool>(dead.connection(), dead.limiter());
  RedisLimiter<ratelimit::FixedWindow, ManualClock> a(ratelimit::FixedWindow{5, 5min}, pool, clock);
  RedisLimiter<ratelimit::Gcra, ManualClock> b(ratelimit::Gcra{.limit = 10, .period = 1min, .burst = 2}, pool, clock);
  int limited_events = 0;
  const ratelimit::LayerOptions with_penalty{.penalty = 15min,
                                             .on_limited = [&](const ratelimit::LimitedEvent&) { ++limited_events; }};
  LimiterLayer<decltype(a)> la(a, "login", with_penalty);
  LimiterLayer<decltype(b)> lb(b, "ip", with_penalty);
  for (const bool joint : {true, false}) {
    SCOPED_TRACE(joint ? "one script" : "one layer");
    const LayeredDecision d = joint ? ratelimit::check_layers({{&la, "10.0.0.7"}, {&lb, "10.0.0.7"}})
                                    : ratelimit::check_layers({{&la, "10.0.0.7"}});
    EXPECT_FALSE(d);
    EXPECT_TRUE(d.layers[0].backend_failed);
    EXPECT_EQ(d.layers[0].verdict, Verdict::limited);
    EXPECT_EQ(la.penalties().blocked_for("10.0.0.7", la.now_ns()), 0) << "a backend failure started a penalty";
    EXPECT_EQ(lb.penalties().blocked_for("10.0.0.7", lb.now_ns()), 0);
  }
  EXPECT_EQ(la.stats().snapshot().backend_errors, 2u);
  EXPECT_EQ(lb.stats().snapshot().backend_errors, 1u);
  EXPECT_EQ(limited_events, 3);  // still denials, reported as such
}

// On Redis Cluster the one script runs only when every key is in one slot: an IP layer and a per-IP
// login layer over the same client IP share the hash tag; two different users usually do not. Decided
// before anything is sent (the seed node here is dead: a joint call fails open, a declined one sends
// nothing).
TEST(RedisLayeredScript, ClusterRunsOneScriptOnlyWithinOneSlot) {
  ManualClock clock;
  RedisOptions o = dead_options(FailurePolicy::fail_open);
  o.cluster_nodes = {ratelimit::redis::ClusterNode{"127.0.0.1", o.port}};
  auto router = std::make_shared<ratelimit::redis::ClusterRouter>(o.connection(), o.limiter());
  RedisLimiter<ratelimit::FixedWindow, ManualClock> ip(ratelimit::FixedWindow{1000, 1min}, router, clock);
  RedisLimiter<ratelimit::SlidingWindowLog, ManualClock> login(ratelimit::SlidingWindowLog{5, 5min}, router, clock);
  ASSERT_EQ(ip.joint_domain(), login.joint_domain());
  using ratelimit::redis::engine::detail::key_slot;
  EXPECT_EQ(key_slot(ip.redis_key("10.0.0.1")), key_slot(login.redis_key("10.0.0.1")));
  std::array<ratelimit::CheckResult, 2> out{};
  const std::array<ratelimit::JointRequest, 2> same_slot{ratelimit::JointRequest{&ip, "10.0.0.1", 1},
                                                         ratelimit::JointRequest{&login, "10.0.0.1", 1}};
  EXPECT_TRUE(ip.check_jointly(same_slot, out));
  EXPECT_TRUE(out[0].decision.allowed && out[1].decision.allowed);  // fail_open
  EXPECT_TRUE(out[0].failed() && out[1].failed());                  // and it says so
  EXPECT_EQ(ip.stats().failures, 1u);
  EXPECT_EQ(login.stats().failures, 1u);
  // Two keys in different slots.
  std::string other = "u0";
  for (int i = 1; key_slot(login.redis_key(other)) == key_slot(ip.redis_key("10.0.0.1")); ++i)
    other = "u" + std::to_string(i);
  const std::array<ratelimit::JointRequest, 2> cross{ratelimit::JointRequest{&ip, "10.0.0.1", 1},
                                                     ratelimit::JointRequest{&login, other, 1}};
  EXPECT_FALSE(ip.check_jointly(cross, out));
  EXPECT_EQ(ip.stats().calls, 1u);  // nothing sent, nothing counted
  EXPECT_EQ(ip.stats().failures, 1u);
  // check_layers then goes layer by layer: one (failing, fail-open) check per layer.
  LimiterLayer<decltype(ip)> ip_layer(ip, "ip");
  LimiterLayer<decltype(login)> login_layer(login, "login");
  EXPECT_TRUE(ratelimit::check_layers({{&ip_layer, "10.0.0.1"}, {&login_layer, other}}));
  EXPECT_EQ(ip.stats().calls, 2u);
  EXPECT_EQ(login.stats().calls, 2u);
}
