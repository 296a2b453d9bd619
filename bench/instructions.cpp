// Instructions and cache misses per check under callgrind (bench/instructions.sh), the measure that a
// shared, loaded machine does not disturb: `bench_instructions <case> <policy> <checks>` runs only the
// timed part of one case between CALLGRIND_START/STOP_INSTRUMENTATION (a no-op outside valgrind).
// Cases: hot (one key, clock read per check), hot_caller_time, keys_1m (1,000,000 present keys in a
// shuffled stream, the caller's time), floor_hot (clock read + one atomic GCRA step), floor_map
// (std::unordered_map lookup + GCRA step over the same stream). Policies: gcra token_bucket fixed_window
// sliding_window_counter sliding_window_log (the parameters of bench_memory).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <ratelimit/ratelimit.hpp>

#include "memory_cases.hpp"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kKeys = bench::kManyKeys;
using bench::generous;
using bench::KeyStream;
using bench::many_key_policy;

volatile bool g_sink;

/// `key` with a length the compiler cannot see (a server's keys come from requests): otherwise it folds
/// the constant 16 into the inlined hash and key comparison, which no real caller gets.
std::string_view opaque(std::string_view key) {
  std::size_t size = key.size();
  const char* data = key.data();
  asm volatile("" : "+r"(size), "+r"(data));
  return {data, size};
}

template <class P>
int run(std::string_view which, std::size_t checks) {
  const KeyStream keys(which == "keys_1m" ? kKeys : 1);
  if (which == "hot" || which == "hot_caller_time") {
    ratelimit::MemoryLimiter<P> limiter(generous<P>());
    const std::string_view key = opaque(keys.key(0));
    const Clock::time_point now = Clock::now();
    for (int i = 0; i < 1000; ++i) g_sink = limiter.allow(key).allowed;  // present, warm
    CALLGRIND_START_INSTRUMENTATION;
    if (which == "hot") {
      for (std::size_t i = 0; i < checks; ++i) g_sink = limiter.allow(key).allowed;
    } else {
      for (std::size_t i = 0; i < checks; ++i) g_sink = limiter.allow(key, 1, now).allowed;
    }
    CALLGRIND_STOP_INSTRUMENTATION;
    return 0;
  }
  if (which == "keys_1m") {
    ratelimit::MemoryLimiter<P> limiter(many_key_policy<P>(), ratelimit::MemoryOptions{.max_keys = 4 * kKeys});
    const Clock::time_point now = Clock::now();
    for (std::size_t k = 0; k < kKeys; ++k) g_sink = limiter.allow(keys.key(k), 1, now).allowed;
    CALLGRIND_START_INSTRUMENTATION;
    for (std::size_t k = 0; k < checks; ++k) g_sink = limiter.allow(opaque(keys.key(k % kKeys)), 1, now + 1ms).allowed;
    CALLGRIND_STOP_INSTRUMENTATION;
    return limiter.size() == kKeys ? 0 : 2;  // every key present: checks of present keys were measured
  }
  return 1;
}

struct ViewHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view key) const noexcept { return std::hash<std::string_view>{}(key); }
};

int floor_case(std::string_view which, std::size_t checks) {
  if (which == "floor_hot") {
    std::atomic<std::int64_t> tat{0};
    CALLGRIND_START_INSTRUMENTATION;
    for (std::size_t i = 0; i < checks; ++i) {
      const std::int64_t now = Clock::now().time_since_epoch().count();
      std::int64_t old = tat.load(std::memory_order_relaxed);
      for (;;) {
        const std::int64_t next = (old > now ? old : now) + 1;
        if (next - now > 1'000'000'000) break;
        if (tat.compare_exchange_weak(old, next, std::memory_order_acq_rel, std::memory_order_relaxed)) break;
      }
    }
    CALLGRIND_STOP_INSTRUMENTATION;
    return 0;
  }
  const KeyStream keys(kKeys);
  std::unordered_map<std::string, std::int64_t, ViewHash, std::equal_to<>> tats;
  tats.reserve(kKeys);
  for (std::size_t i = 0; i < kKeys; ++i) tats.emplace(keys.key(i), 0);
  const std::int64_t now = Clock::now().time_since_epoch().count();
  CALLGRIND_START_INSTRUMENTATION;
  for (std::size_t i = 0; i < checks; ++i) {
    auto it = tats.find(keys.key(i % kKeys));
    const std::int64_t next = (it->second > now ? it->second : now) + 1000;
    if (next - now <= 1'000'000'000) it->second = next;
    g_sink = it->second > 0;
  }
  CALLGRIND_STOP_INSTRUMENTATION;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s hot|hot_caller_time|keys_1m|floor_hot|floor_map <policy> <checks>\n", argv[0]);
    return 1;
  }
  const std::string_view which = argv[1], policy = argv[2];
  const std::size_t checks = std::stoul(argv[3]);
  if (which.starts_with("floor_")) return floor_case(which, checks);
  if (policy == "gcra") return run<ratelimit::Gcra>(which, checks);
  if (policy == "token_bucket") return run<ratelimit::TokenBucket>(which, checks);
  if (policy == "fixed_window") return run<ratelimit::FixedWindow>(which, checks);
  if (policy == "sliding_window_counter") return run<ratelimit::SlidingWindowCounter>(which, checks);
  if (policy == "sliding_window_log") return run<ratelimit::SlidingWindowLog>(which, checks);
  return 1;
}
