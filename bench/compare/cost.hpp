// The cost columns of the comparison: time per check on a hot key, over 1,000,000 present keys and with
// 2 threads on one key, and heap bytes per key. Wall time of short runs, the median of three: the table
// answers "which policy", not the suite's floors and ratios (bench_memory).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/ratelimit.hpp>

#include "../alloc_counter.hpp"
#include "../memory_cases.hpp"

namespace bench::compare {

/// Nanoseconds per check of each case, and heap bytes per key at `keys` keys.
struct Cost {
  double hot_key_ns = 0;
  double many_keys_ns = 0;
  double two_threads_ns = 0;  // wall time per check of each of 2 threads on one key
  double bytes_per_key = 0;
};

inline double elapsed_ns(std::chrono::steady_clock::time_point since) {
  return static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since).count());
}

inline double median_of_3(std::array<double, 3> v) {
  std::sort(v.begin(), v.end());
  return v[1];
}

/// `checks` checks of one key on each of `threads` threads at once; wall ns per check of one thread.
/// Throws `std::runtime_error` when a check is denied (the admitting path was not what ran).
template <class P>
double hot_key_ns(ratelimit::MemoryLimiter<P>& limiter, int threads, std::int64_t checks) {
  const std::string key = "compare-hot-key";
  std::vector<std::int64_t> denied(static_cast<std::size_t>(threads), 0);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::int64_t d = 0;
      for (std::int64_t i = 0; i < checks; ++i) d += limiter.allow(key).allowed ? 0 : 1;
      denied[static_cast<std::size_t>(t)] = d;
    });
  }
  for (std::thread& w : workers) w.join();
  const double ns = elapsed_ns(start) / static_cast<double>(checks);
  for (const std::int64_t d : denied) {
    if (d != 0) throw std::runtime_error("hot key: a check was denied; the cost measured the deny path");
  }
  return ns;
}

/// One timed pass over every key of `keys` (present), then, untimed, every check given back so the next
/// pass sees the same states. Returns ns per check.
template <class P>
double pass_ns(ratelimit::MemoryLimiter<P>& limiter, const KeyStream& keys) {
  const auto start = std::chrono::steady_clock::now();
  std::int64_t denied = 0;
  for (std::size_t k = 0; k < keys.size(); ++k) denied += limiter.allow(keys.key(k)).allowed ? 0 : 1;
  const double ns = elapsed_ns(start) / static_cast<double>(keys.size());
  if (denied != 0) throw std::runtime_error("many keys: a check was denied");
  for (std::size_t k = 0; k < keys.size(); ++k) limiter.refund(keys.key(k), 1);
  return ns;
}

/// All four cost figures of policy `P` (parameters of bench/memory_cases.hpp: every check admitted).
template <class P>
Cost measure_cost(const KeyStream& keys, std::int64_t hot_checks) {
  Cost c;
  {
    ratelimit::MemoryLimiter<P> limiter(generous<P>());
    hot_key_ns(limiter, 1, hot_checks / 10);  // warm-up
    c.hot_key_ns = median_of_3(
        {hot_key_ns(limiter, 1, hot_checks), hot_key_ns(limiter, 1, hot_checks), hot_key_ns(limiter, 1, hot_checks)});
    c.two_threads_ns = median_of_3(
        {hot_key_ns(limiter, 2, hot_checks), hot_key_ns(limiter, 2, hot_checks), hot_key_ns(limiter, 2, hot_checks)});
  }
  const std::size_t before = heap_bytes();
  ratelimit::MemoryLimiter<P> limiter(many_key_policy<P>(), ratelimit::MemoryOptions{.max_keys = 4 * keys.size()});
  for (std::size_t k = 0; k < keys.size(); ++k) limiter.allow(keys.key(k));
  c.bytes_per_key = static_cast<double>(heap_bytes() - before) / static_cast<double>(keys.size());
  c.many_keys_ns = median_of_3({pass_ns(limiter, keys), pass_ns(limiter, keys), pass_ns(limiter, keys)});
  if (limiter.size() != keys.size() || limiter.evictions() != 0) {
    throw std::runtime_error("many keys: keys were evicted or lost; the pass measured insertions");
  }
  return c;
}

}  // namespace bench::compare
