// Soak: two threads check at full speed against a redis-server of their own for N seconds (default 60).
// Passes when no check failed, the limiter's connections stayed constant (INFO clients, sampled every
// second; one or two, each opened once), and RSS stayed flat (growth after the first 10% of the run at most 2 MiB).
//
// Usage: ratelimit_redis_soak [seconds]. Exit status 0 on success. Not under a sanitizer (its allocator
// quarantine grows RSS by design); CMake registers it as the CTest test redis_soak (label soak) when
// RATELIMIT_SOAK_SECONDS > 0.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "redis_server.hpp"

namespace {

long rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  const int seconds = argc > 1 ? std::atoi(argv[1]) : 60;
  const auto binary = ratelimit_test::find_redis_server();
  if (!binary || seconds < 1) {
    std::fprintf(stderr, "soak: need redis-server on PATH and a positive duration\n");
    return 1;
  }
  ratelimit_test::RedisServer server(*binary);
  auto o = server.options();
  o.on_error = ratelimit::FailurePolicy::raise;
  o.pool_size = 2;
  o.key_prefix = "soak:";
  ratelimit::redis::RedisLimiter limiter(ratelimit::Gcra{.limit = 1'000'000, .period = 1s, .burst = 1000}, o);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> checks{0}, errors{0};
  auto work = [&](int id) {
    std::uint64_t i = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      try {
        (void)limiter.allow("key:" + std::to_string(id) + ":" + std::to_string(i++ % 1000));
        checks.fetch_add(1, std::memory_order_relaxed);
      } catch (const std::exception& e) {
        if (errors.fetch_add(1) < 5) std::fprintf(stderr, "soak: %s\n", e.what());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) threads.emplace_back(work, t);
  auto admin = server.admin();
  std::vector<long> rss, clients;
  for (int s = 0; s < seconds; ++s) {
    std::this_thread::sleep_for(1s);
    rss.push_back(rss_kib());
    clients.push_back(ratelimit_test::RedisServer::connected_clients(admin) - 1);  // without admin
  }
  stop = true;
  for (auto& t : threads) t.join();
  const auto stats = limiter.stats();
  const std::size_t warm = std::max<std::size_t>(1, rss.size() / 10);
  const long rss_warm = rss[warm - 1];
  const long rss_max = *std::max_element(rss.begin() + static_cast<std::ptrdiff_t>(warm - 1), rss.end());
  const auto [cmin, cmax] = std::minmax_element(clients.begin(), clients.end());
  std::printf("soak: %d s, 2 threads: %llu checks (%.0f/s), %llu errors, connects %llu, dropped %llu\n", seconds,
              static_cast<unsigned long long>(checks.load()), static_cast<double>(checks.load()) / seconds,
              static_cast<unsigned long long>(errors.load()), static_cast<unsigned long long>(stats.connects),
              static_cast<unsigned long long>(stats.dropped_connections));
  std::printf(
      "soak: RSS after warm-up %.1f MiB, max %.1f MiB (growth %ld KiB, bound 2048); limiter connections "
      "%ld..%ld\n",
      static_cast<double>(rss_warm) / 1024, static_cast<double>(rss_max) / 1024, rss_max - rss_warm, *cmin, *cmax);
  // Two sync callers join one connection's batches (pool_size 2 is a bound: include/ratelimit/redis/README.md
  // "Sizing the pool"); whatever the pool opened, it opened once and kept.
  const bool ok = errors.load() == 0 && stats.failures == 0 && rss_max - rss_warm <= 2048 && *cmin == *cmax &&
                  *cmax >= 1 && *cmax <= 2 && stats.connects == static_cast<std::uint64_t>(*cmax) &&
                  stats.dropped_connections == 0;
  std::printf("soak: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
