// Metrics on vs off (include/ratelimit/http/README.md "Metrics"): the hot-key layered check (two in-memory layers, one
// key), with a MetricsCollector holding both layers and scraped every 10 ms by another thread ("on"), against the same
// check with no collector ("off"). Paired: the two run in alternating blocks of the same length, and the reported
// figure is the median over the pairs of (on / off - 1). Then what a Redis call adds for its latency histogram
// (RedisStats::latency: two steady_clock readings and two relaxed additions per backend call), in ns per call, paired
// against the same loop without it; a Redis round trip is tens of microseconds, so that figure over a call's time is
// the histogram's added cost.
//
//   bench_metrics [pairs=20] [checks per block=2000000]
#include <ratelimit/http/prometheus.hpp>
#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis/stats.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

struct Layers {
  ratelimit::MemoryLimiter<ratelimit::Gcra> a{
      ratelimit::Gcra{.limit = 1'000'000'000, .period = 1s, .burst = 1'000'000}};
  ratelimit::MemoryLimiter<ratelimit::FixedWindow> b{ratelimit::FixedWindow{1'000'000'000'000, 1s}};
  ratelimit::LimiterLayer<decltype(a)> la{a, "a"};
  ratelimit::LimiterLayer<decltype(b)> lb{b, "b"};
};

/// Nanoseconds per check over `n` checks.
double block(Layers& l, long n) {
  const auto start = std::chrono::steady_clock::now();
  long admitted = 0;
  for (long i = 0; i < n; ++i) admitted += ratelimit::check_layers({{&l.la, "hot"}, {&l.lb, "hot"}}) ? 1 : 0;
  const auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  if (admitted == -1) std::puts("");  // keeps the loop
  return ns / static_cast<double>(n);
}

/// The histogram's work per backend call, as `RedisLimiter` does it, over `n` calls; ns per call.
struct LatencyHistogram {
  std::array<std::atomic<std::uint64_t>, ratelimit::redis::BackendLatency::kBoundsUs.size() + 1> buckets{};
  std::atomic<std::uint64_t> sum_us{0};
};
double latency_block(LatencyHistogram& h, long n, bool record) {
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t work = 0;
  for (long i = 0; i < n; ++i) {
    work = work * 6364136223846793005ULL + 1442695040888963407ULL;  // stands for the call itself
    if (record) {
      const auto sent = std::chrono::steady_clock::now();
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - sent);
      const auto u = static_cast<std::uint64_t>(us.count() > 0 ? us.count() : 0) + (work & 1);
      h.buckets[ratelimit::redis::BackendLatency::bucket_of(u)].fetch_add(1, std::memory_order_relaxed);
      h.sum_us.fetch_add(u, std::memory_order_relaxed);
    }
  }
  const auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  if (work == 42) std::puts("");  // keeps the loop
  return ns / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  const int pairs = argc > 1 ? std::atoi(argv[1]) : 20;
  const long n = argc > 2 ? std::atol(argv[2]) : 2'000'000;
  Layers off, on;
  ratelimit::http::MetricsCollector collector;
  collector.add_layer(on.la);
  collector.add_layer(on.lb);
  collector.add_limiter("a", on.a);
  collector.add_limiter("b", on.b);
  std::atomic<bool> stop{false};
  std::atomic<long> scrapes{0};
  std::thread scraper([&] {
    while (!stop) {
      scrapes += static_cast<long>(collector.Collect().size());
      std::this_thread::sleep_for(10ms);
    }
  });
  std::vector<double> ratios;
  double sum_off = 0, sum_on = 0;
  (void)block(off, n / 10);  // warm up
  (void)block(on, n / 10);
  for (int p = 0; p < pairs; ++p) {
    const bool on_first = p % 2 == 0;  // alternate the order within a pair
    const double first = block(on_first ? on : off, n);
    const double second = block(on_first ? off : on, n);
    const double t_on = on_first ? first : second, t_off = on_first ? second : first;
    sum_on += t_on;
    sum_off += t_off;
    ratios.push_back(t_on / t_off - 1);
  }
  stop = true;
  scraper.join();
  std::sort(ratios.begin(), ratios.end());
  std::printf(
      "hot-key check_layers (2 layers): off %.1f ns, on %.1f ns (mean of %d blocks of %ld); "
      "added cost median %+.2f%% (pairs' min %+.2f%%, max %+.2f%%); %ld families scraped\n",
      sum_off / pairs, sum_on / pairs, pairs, n, 100 * ratios[ratios.size() / 2], 100 * ratios.front(),
      100 * ratios.back(), scrapes.load());
  LatencyHistogram h;
  std::vector<double> added;
  for (int p = 0; p < pairs; ++p) {
    const double with = latency_block(h, n / 4, true);
    const double without = latency_block(h, n / 4, false);
    added.push_back(with - without);
  }
  std::sort(added.begin(), added.end());
  std::printf("backend latency histogram: %+.1f ns per Redis call (median of %d pairs; min %+.1f, max %+.1f)\n",
              added[added.size() / 2], pairs, added.front(), added.back());
  return 0;
}
