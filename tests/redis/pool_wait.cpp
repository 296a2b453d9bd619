// Waiting for a pooled connection (include/ratelimit/redis/README.md "Sizing the pool"): 256 threads check through one
// RedisLimiter with a pool of 4 connections against a redis-server of its own, for 3 s. Prints checks/s, the latency
// percentiles of every call (p50, p99, p99.9, max), how many calls failed because they were not sent within
// command_timeout (100 ms) and how many calls ended past that deadline, plus the spread of checks per thread (a fair
// queue serves every thread alike). Exits 1 when a call took longer than its deadline (command_timeout from its start:
// waiting and round trip) plus 50 ms of scheduling slack. Registered as a heavy test (PoolWait).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

}  // namespace

int main(int argc, char** argv) {
  const int threads_n = argc > 1 ? std::atoi(argv[1]) : 256;
  const auto binary = ratelimit_test::find_redis_server();
  if (!binary) {
    std::fprintf(stderr, "pool_wait: no redis-server on PATH\n");
    return 1;
  }
  ratelimit_test::RedisServer server(*binary);
  ratelimit::redis::RedisOptions o = server.options();
  o.key_prefix = "poolwait:";
  o.pool_size = 4;
  o.breaker.failure_threshold = 0;  // measure the pool alone
  o.on_error = ratelimit::FailurePolicy::raise;  // to tell a wait that expired from other failures
  ratelimit::redis::RedisLimiter limiter(ratelimit::Gcra{.limit = 1000000, .period = 1s, .burst = 1000000}, o);

  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> queue_timeouts{0};
  std::atomic<std::uint64_t> other_failures{0};
  std::vector<std::vector<std::int64_t>> lat(static_cast<std::size_t>(threads_n));
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_n; ++t) {
    threads.emplace_back([&, t] {
      const std::string key = "k" + std::to_string(t % 64);
      auto& mine = lat[static_cast<std::size_t>(t)];
      mine.reserve(4096);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      while (!stop.load(std::memory_order_relaxed)) {
        const auto t0 = Steady::now();
        try {
          (void)limiter.allow(key);
        } catch (const ratelimit::BackendError& e) {
          const std::string_view what = e.what();
          if (what.find("before the call was sent") != std::string_view::npos ||
              what.find("no pooled connection") != std::string_view::npos) {
            queue_timeouts.fetch_add(1, std::memory_order_relaxed);
          } else if (other_failures.fetch_add(1, std::memory_order_relaxed) == 0) {
            std::fprintf(stderr, "first other failure: %s\n", e.what());
          }
        }
        mine.push_back(std::chrono::duration_cast<std::chrono::microseconds>(Steady::now() - t0).count());
      }
    });
  }
  (void)limiter.check("warm");
  go.store(true, std::memory_order_release);
  const auto t0 = Steady::now();
  std::this_thread::sleep_for(3s);
  stop.store(true);
  for (auto& th : threads) th.join();
  const double secs = std::chrono::duration<double>(Steady::now() - t0).count();
  std::vector<std::int64_t> all;
  std::vector<std::size_t> per_thread;
  for (const auto& v : lat) {
    all.insert(all.end(), v.begin(), v.end());
    per_thread.push_back(v.size());
  }
  std::sort(all.begin(), all.end());
  std::sort(per_thread.begin(), per_thread.end());
  auto pct = [&](double p) {
    if (all.empty()) return 0.0;
    return static_cast<double>(all[static_cast<std::size_t>(p * static_cast<double>(all.size() - 1))]) / 1000.0;
  };
  std::printf("%d threads, pool 4, command_timeout 100 ms, %.1f s: %.0f checks/s; latency ms p50 %.2f p99 %.2f "
              "p99.9 %.2f max %.2f; not sent by the deadline %llu; other failures %llu; checks per "
              "thread min %zu median %zu max %zu\n",
              threads_n, secs, static_cast<double>(all.size()) / secs, pct(0.5), pct(0.99), pct(0.999),
              pct(1.0), static_cast<unsigned long long>(queue_timeouts.load()),
              static_cast<unsigned long long>(other_failures.load()), per_thread.front(),
              per_thread[per_thread.size() / 2], per_thread.back());
  const auto past = std::count_if(all.begin(), all.end(), [](std::int64_t us) { return us > 100'000; });
  std::printf("calls that ended past their 100 ms deadline: %lld of %zu\n", static_cast<long long>(past), all.size());
  const bool ok = pct(1.0) <= 150.0;
  std::printf(ok ? "pool_wait: OK\n" : "pool_wait: FAILED (a call took longer than the wait bound)\n");
  return ok ? 0 : 1;
}
