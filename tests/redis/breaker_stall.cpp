// Measures a stalled Redis under load (include/ratelimit/redis/README.md "Circuit breaker"): 16 threads check at full
// speed through one RedisLimiter (default options: pool of 4, command timeout 100 ms, fail_open) against a redis-server
// of its own; the server is stopped (SIGSTOP) for 1.5 s and continued (SIGCONT). Printed for the breaker off
// (failure_threshold = 0, as before it existed) and on (defaults): checks/s healthy and during the stall, connections
// opened during the stall, and the time from SIGCONT until checks are decided by Redis again. Exits 1 when, with the
// breaker on, the stall's throughput is below 0.5x the healthy one or checks are not back on Redis within 1 s of
// SIGCONT. Registered as a heavy test (BreakerStall).
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

constexpr int kThreads = 16;
constexpr auto kPhase = 1500ms;

struct Result {
  double healthy_per_s = 0;
  double stalled_per_s = 0;
  double stalled_decided_per_s = 0;
  std::uint64_t stall_connects = 0;
  double max_call_ms = 0;
  double recovery_ms = -1;  // SIGCONT to the first check decided by Redis
  ratelimit::redis::RedisStats stats{};
};

Result run(ratelimit_test::RedisServer& server, bool breaker) {
  ratelimit::redis::RedisOptions o = server.options();
  o.key_prefix = std::string("stall:") + (breaker ? "on:" : "off:");
  if (!breaker) o.breaker.failure_threshold = 0;
  ratelimit::redis::RedisLimiter limiter(ratelimit::Gcra{.limit = 1000000, .period = 1s, .burst = 1000000}, o);

  std::atomic<int> phase{0};  // 0 warm-up, 1 healthy, 2 stalled, 3 continued, 4 stop
  std::atomic<std::uint64_t> counts[4] = {};
  std::atomic<std::uint64_t> decided_in_stall{0};
  std::atomic<std::int64_t> first_decided_after_cont_ns{-1};
  std::atomic<std::int64_t> max_call_ns{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string key = "k" + std::to_string(t);
      for (;;) {
        const int p = phase.load(std::memory_order_acquire);
        if (p == 4) return;
        const auto t0 = Steady::now();
        const ratelimit::CheckResult r = limiter.check(key);
        const auto t1 = Steady::now();
        const int p_end = phase.load(std::memory_order_acquire);
        if (p == p_end && p >= 1 && p <= 3) counts[p].fetch_add(1, std::memory_order_relaxed);
        const std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
        if (p == 2 || p == 3) {
          std::int64_t m = max_call_ns.load(std::memory_order_relaxed);
          while (ns > m && !max_call_ns.compare_exchange_weak(m, ns)) {
          }
        }
        if (r.outcome == ratelimit::Outcome::decided) {
          if (p == 2 && p_end == 2) decided_in_stall.fetch_add(1, std::memory_order_relaxed);
          // A check started after SIGCONT and decided: Redis is back.
          if (p == 3) {
            std::int64_t expected = -1;
            first_decided_after_cont_ns.compare_exchange_strong(expected,
                                                                t1.time_since_epoch().count());
          }
        }
      }
    });
  }
  Result res;
  std::this_thread::sleep_for(300ms);  // connections opened, scripts cached
  phase.store(1);
  std::this_thread::sleep_for(kPhase);
  const auto connects_before = limiter.stats().connects;
  ::kill(server.pid(), SIGSTOP);
  phase.store(2);
  std::this_thread::sleep_for(kPhase);
  res.stall_connects = limiter.stats().connects - connects_before;
  const auto cont = Steady::now();
  phase.store(3);
  ::kill(server.pid(), SIGCONT);
  std::this_thread::sleep_for(1500ms);
  phase.store(4);
  for (auto& th : threads) th.join();

  const double secs = std::chrono::duration<double>(kPhase).count();
  res.healthy_per_s = static_cast<double>(counts[1].load()) / secs;
  res.stalled_per_s = static_cast<double>(counts[2].load()) / secs;
  res.stalled_decided_per_s = static_cast<double>(decided_in_stall.load()) / secs;
  res.max_call_ms = static_cast<double>(max_call_ns.load()) / 1e6;
  if (const std::int64_t at = first_decided_after_cont_ns.load(); at >= 0) {
    res.recovery_ms = static_cast<double>(at - cont.time_since_epoch().count()) / 1e6;
  }
  res.stats = limiter.stats();
  return res;
}

void print(const char* name, const Result& r) {
  std::printf("%-12s healthy %9.0f checks/s | stalled %10.0f checks/s (%.2fx, decided by Redis %.0f/s) | "
              "connects in stall %3llu | longest call %6.1f ms | back on Redis %6.1f ms after SIGCONT | "
              "opens %llu probes %llu short-circuited %llu timeouts %llu\n",
              name, r.healthy_per_s, r.stalled_per_s, r.stalled_per_s / r.healthy_per_s, r.stalled_decided_per_s,
              static_cast<unsigned long long>(r.stall_connects), r.max_call_ms, r.recovery_ms,
              static_cast<unsigned long long>(r.stats.breaker_opens),
              static_cast<unsigned long long>(r.stats.breaker_probes),
              static_cast<unsigned long long>(r.stats.short_circuited),
              static_cast<unsigned long long>(r.stats.timeouts));
}

}  // namespace

int main() {
  const auto binary = ratelimit_test::find_redis_server();
  if (!binary) {
    std::fprintf(stderr, "breaker_stall: no redis-server on PATH\n");
    return 1;
  }
  std::printf("16 threads, one RedisLimiter (pool 4, command timeout 100 ms, fail_open), SIGSTOP for 1.5 s\n");
  Result off;
  Result on;
  {
    ratelimit_test::RedisServer server(*binary);
    off = run(server, false);
  }
  print("breaker off", off);
  {
    ratelimit_test::RedisServer server(*binary);
    on = run(server, true);
  }
  print("breaker on", on);
  bool ok = true;
  if (on.stalled_per_s < 0.5 * on.healthy_per_s) {
    std::printf("FAILED: stall throughput %.0f/s < 0.5x healthy %.0f/s\n", on.stalled_per_s, on.healthy_per_s);
    ok = false;
  }
  if (on.recovery_ms < 0 || on.recovery_ms > 1000) {
    std::printf("FAILED: checks back on Redis %.1f ms after SIGCONT (goal: within 1000 ms)\n", on.recovery_ms);
    ok = false;
  }
  std::printf(ok ? "breaker_stall: OK\n" : "breaker_stall: FAILED\n");
  return ok ? 0 : 1;
}
