// Cost per check and memory per key of MemoryLimiter, for every policy, beside floors measured in the
// same run: a clock read, one atomic GCRA step, and a std::unordered_map lookup plus a GCRA step.
// This machine is shared and noisy, so read the results as ratios to the floors (bench/summarize.py).
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstring>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <ratelimit/ratelimit.hpp>

#include "alloc_counter.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kManyKeys = 1'000'000;
constexpr std::size_t kKeyBytes = 16;

/// 1,000,000 distinct 16-byte keys in one buffer, and a random visiting order.
struct Keys {
  std::string bytes;
  std::vector<std::uint32_t> order;

  explicit Keys(std::size_t count, std::uint64_t seed = 1) : bytes(count * kKeyBytes, '\0'), order(1u << 22) {
    std::mt19937_64 random(seed);
    for (std::size_t i = 0; i < count; ++i) {
      const std::string key = std::to_string(i) + "-" + std::to_string(random());
      for (std::size_t j = 0; j < kKeyBytes; ++j) bytes[i * kKeyBytes + j] = key[j % key.size()];
      bytes[i * kKeyBytes + kKeyBytes - 1] = static_cast<char>(i & 0x7F);  // distinct in any case
    }
    for (std::size_t i = 0; i < count; ++i) {  // make every key distinct: write the index in the first bytes
      const auto index = static_cast<std::uint32_t>(i);
      std::memcpy(&bytes[i * kKeyBytes], &index, sizeof index);
    }
    for (auto& o : order) o = static_cast<std::uint32_t>(random() % count);
  }
  [[nodiscard]] std::string_view key(std::size_t i) const { return {bytes.data() + i * kKeyBytes, kKeyBytes}; }
  [[nodiscard]] std::string_view next(std::size_t& i) const { return key(order[i++ & (order.size() - 1)]); }
};

const Keys& many_keys() {
  static const Keys keys(kManyKeys);
  return keys;
}

std::int64_t now_ns() { return Clock::now().time_since_epoch().count(); }

// ---- Floors -------------------------------------------------------------------------------------------

void floor_clock(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(Clock::now());
}

/// One GCRA step on one std::atomic<int64_t> TAT: load + compare-exchange.
bool atomic_gcra(std::atomic<std::int64_t>& tat, std::int64_t now, std::int64_t interval, std::int64_t tolerance) {
  std::int64_t old = tat.load(std::memory_order_relaxed);
  for (;;) {
    const std::int64_t next = (old > now ? old : now) + interval;
    if (next - now > tolerance) return false;
    if (tat.compare_exchange_weak(old, next, std::memory_order_acq_rel, std::memory_order_relaxed)) return true;
  }
}

void floor_atomic_gcra(benchmark::State& state) {
  std::atomic<std::int64_t> tat{0};
  std::int64_t now = 1'000'000'000;
  for (auto _ : state) benchmark::DoNotOptimize(atomic_gcra(tat, now += 2, 1, 1'000'000));
}

void floor_atomic_gcra_clock(benchmark::State& state) {
  std::atomic<std::int64_t> tat{0};
  for (auto _ : state) benchmark::DoNotOptimize(atomic_gcra(tat, now_ns(), 1, 1'000'000'000));
}

/// std::unordered_map<std::string, int64_t> lookup + a GCRA step, clock read per check.
void floor_map_gcra_clock(benchmark::State& state) {
  const auto count = static_cast<std::size_t>(state.range(0));
  const Keys keys(count);
  std::unordered_map<std::string, std::int64_t> tats;
  for (std::size_t i = 0; i < count; ++i) tats.emplace(keys.key(i), 0);
  std::size_t i = 0;
  for (auto _ : state) {
    const std::int64_t now = now_ns();
    auto it = tats.find(std::string(count == 1 ? keys.key(0) : keys.next(i)));
    const std::int64_t next = (it->second > now ? it->second : now) + 1000;
    if (next - now <= 1'000'000'000) it->second = next;
    benchmark::DoNotOptimize(it->second);
  }
}

// ---- Policies -----------------------------------------------------------------------------------------

/// Parameters that admit every check at full speed (so the admitting path is measured).
template <class P>
P generous();
template <>
ratelimit::Gcra generous() { return {.limit = 1'000'000'000, .period = 1s, .burst = 1'000'000'000}; }
template <>
ratelimit::TokenBucket generous() { return {.capacity = 1'000'000'000, .refill_tokens = 1'000'000'000, .refill_period = 1s}; }
template <>
ratelimit::FixedWindow generous() { return {.limit = 1'000'000'000'000, .window = 1s}; }
template <>
ratelimit::SlidingWindowCounter generous() { return {.limit = 1'000'000'000'000, .window = 1s}; }
// A log keeps one entry per admitted tick; a short window keeps it bounded at full speed.
template <>
ratelimit::SlidingWindowLog generous() { return {.limit = 1'000'000, .window = 10us}; }

/// Parameters under which every check after the first is denied.
template <class P>
P strict();
template <>
ratelimit::Gcra strict() { return {.limit = 1, .period = 1h, .burst = 1}; }
template <>
ratelimit::TokenBucket strict() { return {.capacity = 1, .refill_tokens = 1, .refill_period = 1h}; }
template <>
ratelimit::FixedWindow strict() { return {.limit = 1, .window = 1h}; }
template <>
ratelimit::SlidingWindowCounter strict() { return {.limit = 1, .window = 1h}; }
template <>
ratelimit::SlidingWindowLog strict() { return {.limit = 1, .window = 1h}; }

template <class P>
using Limiter = ratelimit::MemoryLimiter<P>;

template <class P>
void hot_key(benchmark::State& state) {
  Limiter<P> limiter(generous<P>());
  const std::string_view key = many_keys().key(0);
  for (auto _ : state) benchmark::DoNotOptimize(limiter.allow(key));
}

/// The caller reads the clock (e.g. once per request for several layers) and passes the time in.
template <class P>
void hot_key_caller_time(benchmark::State& state) {
  Limiter<P> limiter(generous<P>());
  const std::string_view key = many_keys().key(0);
  const Clock::time_point now = Clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(limiter.allow(key, 1, now));
}

template <class P>
void deny(benchmark::State& state) {
  Limiter<P> limiter(strict<P>());
  const std::string_view key = many_keys().key(0);
  limiter.allow(key);
  for (auto _ : state) benchmark::DoNotOptimize(limiter.allow(key));
}

template <class P>
P many_key_policy();
template <>
ratelimit::Gcra many_key_policy() { return {.limit = 1000, .period = 1h, .burst = 1000}; }
template <>
ratelimit::TokenBucket many_key_policy() { return {.capacity = 1000, .refill_tokens = 1000, .refill_period = 1h}; }
template <>
ratelimit::FixedWindow many_key_policy() { return {.limit = 1000, .window = 1h}; }
template <>
ratelimit::SlidingWindowCounter many_key_policy() { return {.limit = 1000, .window = 1h}; }
template <>
ratelimit::SlidingWindowLog many_key_policy() { return {.limit = 1000, .window = 1h}; }

/// 1,000,000 present keys in random order, clock read per check; also reports bytes per key.
template <class P>
void keys_1m(benchmark::State& state) {
  const Keys& keys = many_keys();
  const std::size_t before = bench::heap_bytes();
  auto limiter = std::make_unique<Limiter<P>>(many_key_policy<P>(), ratelimit::MemoryOptions{.max_keys = 2 * kManyKeys});
  for (std::size_t k = 0; k < kManyKeys; ++k) limiter->allow(keys.key(k));
  const std::size_t after = bench::heap_bytes();
  std::size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(limiter->allow(keys.next(i)));
  state.counters["bytes_per_key"] = static_cast<double>(after - before) / static_cast<double>(kManyKeys);
  state.counters["keys"] = static_cast<double>(limiter->size());
}

/// Two threads on one key: the per-key lock (or CAS) is contended.
template <class P>
void hot_key_threads(benchmark::State& state) {
  static std::unique_ptr<Limiter<P>> limiter;
  if (state.thread_index() == 0) limiter = std::make_unique<Limiter<P>>(generous<P>());
  const std::string_view key = many_keys().key(0);
  for (auto _ : state) benchmark::DoNotOptimize(limiter->allow(key));
  state.SetItemsProcessed(state.iterations());
}

/// Each thread on its own keys (64 per thread, present): shards run in parallel.
template <class P>
void distinct_keys_threads(benchmark::State& state) {
  static std::unique_ptr<Limiter<P>> limiter;
  if (state.thread_index() == 0) limiter = std::make_unique<Limiter<P>>(generous<P>());
  const Keys& keys = many_keys();
  const std::size_t base = 1 + static_cast<std::size_t>(state.thread_index()) * 64;
  std::size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(limiter->allow(keys.key(base + (i++ & 63))));
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

BENCHMARK(floor_clock)->Name("floor/clock");
BENCHMARK(floor_atomic_gcra)->Name("floor/atomic_gcra");
BENCHMARK(floor_atomic_gcra_clock)->Name("floor/atomic_gcra+clock");
BENCHMARK(floor_map_gcra_clock)->Name("floor/map_gcra+clock/keys:1")->Arg(1);
BENCHMARK(floor_map_gcra_clock)->Name("floor/map_gcra+clock/keys:1000000")->Arg(1'000'000);

#define RATELIMIT_POLICY_BENCHMARKS(P, name)                                                          \
  BENCHMARK(hot_key<P>)->Name(name "/hot_key");                                                       \
  BENCHMARK(hot_key_caller_time<P>)->Name(name "/hot_key_caller_time");                               \
  BENCHMARK(deny<P>)->Name(name "/deny");                                                             \
  BENCHMARK(keys_1m<P>)->Name(name "/keys:1000000");                                                  \
  BENCHMARK(hot_key_threads<P>)->Name(name "/hot_key")->Threads(2)->UseRealTime();                    \
  BENCHMARK(distinct_keys_threads<P>)->Name(name "/distinct_keys")->Threads(1)->UseRealTime();        \
  BENCHMARK(distinct_keys_threads<P>)->Name(name "/distinct_keys")->Threads(2)->UseRealTime()

RATELIMIT_POLICY_BENCHMARKS(ratelimit::Gcra, "gcra");
RATELIMIT_POLICY_BENCHMARKS(ratelimit::TokenBucket, "token_bucket");
RATELIMIT_POLICY_BENCHMARKS(ratelimit::FixedWindow, "fixed_window");
RATELIMIT_POLICY_BENCHMARKS(ratelimit::SlidingWindowCounter, "sliding_window_counter");
RATELIMIT_POLICY_BENCHMARKS(ratelimit::SlidingWindowLog, "sliding_window_log");

BENCHMARK_MAIN();
