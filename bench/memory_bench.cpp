// Cost per check and memory per key of MemoryLimiter, for every policy, beside floors measured in the
// same run: a clock read, one atomic GCRA step, and a std::unordered_map lookup plus a GCRA step. Keys are
// prepared before the timed loops (no formatting, no allocation inside them).
// This machine is shared and noisy, so read the results as ratios to the floors (bench/summarize.py).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
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
#include "memory_cases.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

using bench::generous;
using bench::KeyStream;
using bench::kManyKeys;
using bench::many_key_policy;

const KeyStream& many_keys() {
  static const KeyStream keys(kManyKeys);
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

/// The hot-key floor: a clock read and one atomic GCRA step.
void floor_atomic_gcra_clock(benchmark::State& state) {
  std::atomic<std::int64_t> tat{0};
  for (auto _ : state) benchmark::DoNotOptimize(atomic_gcra(tat, now_ns(), 1, 1'000'000'000));
}

/// std::hash<std::string_view>, usable for heterogeneous lookup (C++20): find() takes the key as it is,
/// without building a std::string (16 bytes is past libstdc++'s inline capacity: that would allocate).
struct ViewHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view key) const noexcept { return std::hash<std::string_view>{}(key); }
};

/// The many-keys floor: std::unordered_map<std::string, int64_t> lookup (no allocation) + a GCRA step, a
/// clock read per check, over the same key stream as the policies.
void floor_map_gcra_clock(benchmark::State& state) {
  const KeyStream& keys = many_keys();
  const auto count = static_cast<std::size_t>(state.range(0));
  std::unordered_map<std::string, std::int64_t, ViewHash, std::equal_to<>> tats;
  tats.reserve(count);
  for (std::size_t i = 0; i < count; ++i) tats.emplace(keys.key(i), 0);
  std::size_t i = 0;
  for (auto _ : state) {
    const std::int64_t now = now_ns();
    auto it = tats.find(count == 1 ? keys.key(0) : keys.next(i));
    const std::int64_t next = (it->second > now ? it->second : now) + 1000;
    if (next - now <= 1'000'000'000) it->second = next;
    benchmark::DoNotOptimize(it->second);
  }
}

// ---- Policies -----------------------------------------------------------------------------------------

/// Parameters under which every check after the first is denied.
template <class P>
P strict();
template <>
ratelimit::Gcra strict() {
  return {.limit = 1, .period = 1h, .burst = 1};
}
template <>
ratelimit::TokenBucket strict() {
  return {.capacity = 1, .refill_tokens = 1, .refill_period = 1h};
}
template <>
ratelimit::FixedWindow strict() {
  return {.limit = 1, .window = 1h};
}
template <>
ratelimit::SlidingWindowCounter strict() {
  return {.limit = 1, .window = 1h};
}
template <>
ratelimit::SlidingWindowLog strict() {
  return {.limit = 1, .window = 1h};
}

template <class P>
using Limiter = ratelimit::MemoryLimiter<P>;

/// A hot key's benchmark measured the admitting path only if its key admits at the end (the generous limits
/// are reached at one time: a log's 1,000,000, a GCRA's 1e9 checks).
template <class P>
void require_admitting(benchmark::State& state, Limiter<P>& limiter, std::string_view key, Clock::time_point now) {
  if (!limiter.peek(key, now).allowed) state.SkipWithError("the key denies: the run measured the deny path");
}

template <class P>
void hot_key(benchmark::State& state) {
  Limiter<P> limiter(generous<P>());
  const std::string_view key = many_keys().key(0);
  for (auto _ : state) benchmark::DoNotOptimize(limiter.allow(key));
  require_admitting(state, limiter, key, Clock::now());
}

/// The caller reads the clock (e.g. once per request for several layers) and passes the time in. The time
/// moves on by 40 ns per check, about what a check with its clock read takes: a caller's time is not
/// constant, and at one time the checks of a log merge into one entry that reaches its limit after 1,000,000.
template <class P>
void hot_key_caller_time(benchmark::State& state) {
  Limiter<P> limiter(generous<P>());
  const std::string_view key = many_keys().key(0);
  Clock::time_point now = Clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(limiter.allow(key, 1, now += 40ns));
  require_admitting(state, limiter, key, now);
}

template <class P>
void deny(benchmark::State& state) {
  Limiter<P> limiter(strict<P>());
  const std::string_view key = many_keys().key(0);
  limiter.allow(key);
  for (auto _ : state) benchmark::DoNotOptimize(limiter.allow(key));
}

/// The limiter of the many-keys benchmark running now, filled once and kept across Google Benchmark's calls
/// of one benchmark (it calls each several times to settle the iteration count): one at a time in memory.
std::shared_ptr<void> g_parked;
const void* g_parked_tag = nullptr;

template <class L, int Id, class Make>
L& parked(Make make) {
  static const char tag = 0;
  if (g_parked_tag != &tag) {
    g_parked.reset();
    g_parked = make();
    g_parked_tag = &tag;
  }
  return *static_cast<L*>(g_parked.get());
}

/// 1,000,000 present keys, checked in the stream's shuffled order (each once per pass), clock read per
/// check, `max_keys` 4,000,000. Every pass sees the same states: after it, untimed, every key's check is
/// given back (`give_back`). Without that a sliding log gains an entry per key per pass, so what is
/// measured would depend on how long the run was, and past the byte budget keys would be evicted and
/// inserted again. Reports heap bytes per key, the keys held and the evictions; a run that evicted or lost
/// a key measured insertions and stops with an error.
template <class P, int Entries>
double g_bytes_per_key = 0;

/// The limiter of `keys_1m` and `keys_1m_batch`, every key of the stream checked `Entries` times (a sliding
/// log: that many entries per key, at distinct times), made once for both.
template <class P, int Entries>
std::shared_ptr<Limiter<P>> filled_1m() {
  const KeyStream& keys = many_keys();
  const std::size_t before = bench::heap_bytes();
  auto made = std::make_shared<Limiter<P>>(many_key_policy<P>(), ratelimit::MemoryOptions{.max_keys = 4 * kManyKeys});
  for (int pass = 0; pass < Entries; ++pass) {
    for (std::size_t k = 0; k < kManyKeys; ++k) made->allow(keys.key(k));
  }
  g_bytes_per_key<P, Entries> = static_cast<double>(bench::heap_bytes() - before) / static_cast<double>(kManyKeys);
  return made;
}

/// Gives back one unit to each of the first `count` keys of the stream: the checks of the pass so far.
template <class P>
void give_back(Limiter<P>& limiter, std::size_t count) {
  const KeyStream& keys = many_keys();
  for (std::size_t k = 0; k < count; ++k) limiter.refund(keys.key(k), 1);
}

/// At the end of a pass (`next == kManyKeys`), untimed: gives it back, so the next one starts from the same
/// states, and starts the stream again.
template <class P>
void restart_pass_at_end(benchmark::State& state, Limiter<P>& limiter, std::size_t& next) {
  if (next != kManyKeys) [[likely]] return;
  state.PauseTiming();
  give_back(limiter, kManyKeys);
  state.ResumeTiming();
  next = 0;
}

/// Whether every 1000th key holds exactly the `Entries` units of the fill: what a pass given back leaves. A
/// pass not given back, or one given back wrongly, leaves more or fewer (evictions alone show it only once
/// a log's growth has reached the byte budget).
template <class P, int Entries>
bool same_states_as_filled(Limiter<P>& limiter) {
  const KeyStream& keys = many_keys();
  for (std::size_t k = 0; k < kManyKeys; k += 1000) {
    const ratelimit::Decision d = limiter.peek(keys.key(k));
    if (d.remaining != d.limit - Entries) return false;
  }
  return true;
}

template <class P, int Entries>
void report_many_keys(benchmark::State& state, Limiter<P>& limiter) {
  state.counters["bytes_per_key"] = g_bytes_per_key<P, Entries>;
  state.counters["keys"] = static_cast<double>(limiter.size());
  state.counters["evictions"] = static_cast<double>(limiter.evictions());
  if (limiter.size() != kManyKeys || limiter.evictions() != 0) {
    state.SkipWithError("keys were evicted or lost: the run measured insertions, not checks of present keys");
  } else if (!same_states_as_filled<P, Entries>(limiter)) {
    state.SkipWithError("the keys' states changed over the run: the passes were not given back");
  }
}

template <class P, int Entries = 1>
void keys_1m(benchmark::State& state) {
  const KeyStream& keys = many_keys();
  Limiter<P>& limiter = parked<Limiter<P>, Entries>(filled_1m<P, Entries>);
  std::size_t i = 0;
  for (auto _ : state) {
    restart_pass_at_end(state, limiter, i);
    benchmark::DoNotOptimize(limiter.allow(keys.key(i++)));
  }
  give_back(limiter, i);
  report_many_keys<P, Entries>(state, limiter);
}

/// As `keys_1m`, in batches of 64 requests (`allow_many`, one clock read per batch, decisions into one reused
/// array); an iteration is one request, so the time is per check. 64 divides 1,000,000: a batch never
/// spans two passes.
template <class P, int Entries = 1>
void keys_1m_batch(benchmark::State& state) {
  constexpr std::size_t kBatch = 64;
  static_assert(kManyKeys % kBatch == 0);
  const KeyStream& keys = many_keys();
  Limiter<P>& limiter = parked<Limiter<P>, Entries>(filled_1m<P, Entries>);
  std::array<ratelimit::BatchRequest, kBatch> batch{};
  std::array<ratelimit::Decision, kBatch> decisions{};
  std::size_t i = 0;
  std::int64_t admitted = 0;
  while (state.KeepRunningBatch(kBatch)) {
    restart_pass_at_end(state, limiter, i);
    for (ratelimit::BatchRequest& r : batch) r.key = keys.key(i++);
    limiter.allow_many(batch, decisions, Clock::now());
    for (const ratelimit::Decision& d : decisions) admitted += d.allowed ? 1 : 0;
    benchmark::DoNotOptimize(admitted);
  }
  give_back(limiter, i);
  state.counters["denied"] = static_cast<double>(static_cast<std::int64_t>(state.iterations()) - admitted);
  report_many_keys<P, Entries>(state, limiter);
}

/// Parameters under which a key is full again 10 ms after its check (a window rolls over, the TAT passes),
/// long before the stream comes back to it: a pass over 1,000,000 keys takes far more (about 0.2 s at
/// 200 ns a check), as traffic over many clients does. With a second (as before) the stream came back after
/// 0.2 to 0.3 s, so no GCRA, bucket, counter or log key was ever full again (`full_before` 0; a log kept
/// several entries in a heap ring), and only the fixed window's rolled over, for 63 % of its checks.
template <class P>
P rolling_policy();
template <>
ratelimit::Gcra rolling_policy() {
  return {.limit = 1, .period = 10ms, .burst = 1000};
}
template <>
ratelimit::TokenBucket rolling_policy() {
  return {.capacity = 1000, .refill_tokens = 1, .refill_period = 10ms};
}
template <>
ratelimit::FixedWindow rolling_policy() {
  return {.limit = 1000, .window = 10ms};
}
template <>
ratelimit::SlidingWindowCounter rolling_policy() {
  return {.limit = 1000, .window = 5ms};  // both counts gone two windows after the check
}
template <>
ratelimit::SlidingWindowLog rolling_policy() {
  return {.limit = 1000, .window = 10ms};
}

/// As `keys_1m`, with `rolling_policy`: present keys whose state became full are revisited. `full_before` is the
/// share of checks that found their key full (1 when the case measures what it says).
template <class P>
void keys_1m_rolling(benchmark::State& state) {
  const KeyStream& keys = many_keys();
  Limiter<P>& limiter = parked<Limiter<P>, -1>([&] {
    auto made = std::make_shared<Limiter<P>>(rolling_policy<P>(), ratelimit::MemoryOptions{.max_keys = 4 * kManyKeys});
    // All at one time: a key full again by the clock would be reclaimed when the table grows during the fill.
    const Clock::time_point at = Clock::now();
    for (std::size_t k = 0; k < kManyKeys; ++k) made->allow(keys.key(k), 1, at);
    return made;
  });
  std::size_t i = 0;
  std::int64_t full = 0;  // checks that found their key full (a cost-1 check of it leaves limit - 1)
  for (auto _ : state) {
    const ratelimit::Decision d = limiter.allow(keys.next(i));
    full += d.remaining == d.limit - 1 ? 1 : 0;
    benchmark::DoNotOptimize(full);
  }
  state.counters["full_before"] = static_cast<double>(full) / static_cast<double>(state.iterations());
  state.counters["keys"] = static_cast<double>(limiter.size());
  state.counters["table_MB"] = static_cast<double>(limiter.table_bytes()) / 1e6;
  if (limiter.size() != kManyKeys) state.SkipWithError("keys were reclaimed: the run measured insertions");
}

/// One limiter per benchmark, shared by its threads (a function-local static: initialized once, race-free).
/// One memory access to a table the size of 1,000,000 keys' slots (64 MiB of lines, past every cache), its
/// address depending on the previous one (a pointer chase in a random cycle): what a check of a key whose
/// slot is in memory waits for at least, unless consecutive checks overlap their misses.
void floor_dependent_load(benchmark::State& state) {
  struct alignas(64) Line {
    std::size_t next;
  };
  static const std::vector<Line> lines = [] {
    const std::size_t n = (std::size_t{64} << 20) / sizeof(Line);
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937_64(3));
    std::vector<Line> cycle(n);
    for (std::size_t i = 0; i < n; ++i) cycle[order[i]].next = order[(i + 1) % n];
    return cycle;
  }();
  std::size_t at = 0;
  for (auto _ : state) {
    at = lines[at].next;
    benchmark::DoNotOptimize(at);
  }
  state.SetItemsProcessed(state.iterations());
}

template <class P, int Id>
Limiter<P>& shared_limiter() {
  static Limiter<P> limiter(generous<P>());
  return limiter;
}

/// Two threads on one key: the per-key lock (or CAS) is contended.
template <class P>
void hot_key_threads(benchmark::State& state) {
  Limiter<P>& limiter = shared_limiter<P, 0>();
  const std::string_view key = many_keys().key(0);
  for (auto _ : state) benchmark::DoNotOptimize(limiter.allow(key));
  state.SetItemsProcessed(state.iterations());
}

/// Each thread on its own 16 keys, all in shards that no other thread uses (thread t takes keys whose shard
/// is t modulo 2): nothing is shared but the limiter's immutable parts, so 2 threads should do twice the
/// checks of one.
template <class P>
void distinct_keys_threads(benchmark::State& state) {
  Limiter<P>& limiter = shared_limiter<P, 1>();
  const KeyStream& keys = many_keys();
  const auto parity = static_cast<std::size_t>(state.thread_index()) % 2;
  std::vector<std::string_view> mine;
  for (std::size_t k = 1; mine.size() < 16; ++k) {
    if (limiter.shard_count() == 1 || limiter.shard_of(keys.key(k)) % 2 == parity) mine.push_back(keys.key(k));
  }
  std::size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(limiter.allow(mine[i++ & 15]));
  state.SetItemsProcessed(state.iterations());
}

/// Each thread on its own 64 keys, wherever they hash: threads share shards (their locks and touch counts),
/// as a server's threads on many clients do.
template <class P>
void distinct_keys_any_shard_threads(benchmark::State& state) {
  Limiter<P>& limiter = shared_limiter<P, 2>();
  const KeyStream& keys = many_keys();
  const std::size_t base = 1 + static_cast<std::size_t>(state.thread_index()) * 64;
  std::size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(limiter.allow(keys.key(base + (i++ & 63))));
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

BENCHMARK(floor_clock)->Name("floor/clock");
BENCHMARK(floor_atomic_gcra)->Name("floor/atomic_gcra");
BENCHMARK(floor_atomic_gcra_clock)->Name("floor/atomic_gcra+clock");
BENCHMARK(floor_map_gcra_clock)->Name("floor/map_gcra+clock/keys:1")->Arg(1);
BENCHMARK(floor_map_gcra_clock)->Name("floor/map_gcra+clock/keys:1000000")->Arg(1'000'000);
BENCHMARK(floor_dependent_load)->Name("floor/dependent_load/64MiB");

#define RATELIMIT_POLICY_BENCHMARKS(P, name)                                                                       \
  BENCHMARK(hot_key<P>)->Name(name "/hot_key");                                                                    \
  BENCHMARK(hot_key_caller_time<P>)->Name(name "/hot_key_caller_time");                                            \
  BENCHMARK(deny<P>)->Name(name "/deny");                                                                          \
  BENCHMARK(keys_1m<P>)->Name(name "/keys:1000000");                                                               \
  BENCHMARK(keys_1m_batch<P>)->Name(name "/keys:1000000/allow_many:64");                                           \
  BENCHMARK(keys_1m_rolling<P>)->Name(name "/keys:1000000/rolling");                                               \
  BENCHMARK(hot_key_threads<P>)->Name(name "/hot_key")->Threads(2)->UseRealTime();                                 \
  BENCHMARK(distinct_keys_threads<P>)->Name(name "/distinct_keys")->Threads(1)->UseRealTime();                     \
  BENCHMARK(distinct_keys_threads<P>)->Name(name "/distinct_keys")->Threads(2)->UseRealTime();                     \
  BENCHMARK(distinct_keys_any_shard_threads<P>)->Name(name "/distinct_keys_any_shard")->Threads(1)->UseRealTime(); \
  BENCHMARK(distinct_keys_any_shard_threads<P>)->Name(name "/distinct_keys_any_shard")->Threads(2)->UseRealTime()

RATELIMIT_POLICY_BENCHMARKS(ratelimit::Gcra, "gcra");
RATELIMIT_POLICY_BENCHMARKS(ratelimit::TokenBucket, "token_bucket");
RATELIMIT_POLICY_BENCHMARKS(ratelimit::FixedWindow, "fixed_window");
RATELIMIT_POLICY_BENCHMARKS(ratelimit::SlidingWindowCounter, "sliding_window_counter");
RATELIMIT_POLICY_BENCHMARKS(ratelimit::SlidingWindowLog, "sliding_window_log");
// A busy key of a log: 6 entries before each check, in its heap ring (the cases above hold one or two, inline).
BENCHMARK(keys_1m<ratelimit::SlidingWindowLog, 6>)->Name("sliding_window_log/keys:1000000/entries:6");
BENCHMARK(keys_1m_batch<ratelimit::SlidingWindowLog, 6>)
    ->Name("sliding_window_log/keys:1000000/entries:6/allow_many:64");

BENCHMARK_MAIN();
