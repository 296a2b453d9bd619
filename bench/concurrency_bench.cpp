// Concurrency limits, in one run: the uncontended in-memory acquire+release, and on Redis (a redis-server
// started here on a free loopback port) acquire+release round trips beside a PING floor, and the
// hand-off between processes (a release seen by a waiter polling from another pool: polling's latency).
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <ratelimit/concurrency.hpp>
#include <ratelimit/redis.hpp>

#include "bench_redis_server.hpp"

using namespace std::chrono_literals;

namespace {

using bench::server;
using bench::skip_without_server;

ratelimit::redis::RedisOptions options() {
  ratelimit::redis::RedisOptions o = server()->options();
  o.command_timeout = 2s;
  o.key_prefix = "bench:";
  return o;
}

// Arg 0: the key is inserted and erased each time; arg 1: a permit already holds it (no insertion).
void memory_acquire_release(benchmark::State& state) {
  ratelimit::ConcurrencyLimiter<> limiter({.permits = 4});
  ratelimit::PermitResult held;
  if (state.range(0) == 1) held = limiter.try_acquire("key");
  for (auto _ : state) {
    ratelimit::PermitResult r = limiter.try_acquire("key");
    benchmark::DoNotOptimize(r.in_flight);
    r.permit.release();
  }
}
BENCHMARK(memory_acquire_release)->Arg(0)->Arg(1);

void redis_ping_floor(benchmark::State& state) {
  if (skip_without_server(state)) return;
  auto connection = ratelimit::redis::engine::Connection::open(options().connection());
  for (auto _ : state) {
    benchmark::DoNotOptimize(connection.command({"PING"}));
  }
}
BENCHMARK(redis_ping_floor)->UseRealTime();

// Two scripts (acquire, release): two round trips.
void redis_acquire_release(benchmark::State& state) {
  if (skip_without_server(state)) return;
  ratelimit::redis::RedisConcurrencyLimiter limiter({.permits = 4, .name = "bench"}, options());
  for (auto _ : state) {
    ratelimit::PermitResult r = limiter.try_acquire("key");
    if (!r) return state.SkipWithError("not acquired");
    r.permit.release();
  }
}
BENCHMARK(redis_acquire_release)->UseRealTime();

// From a release in one limiter (its own pool, as another process) to the acquisition by a waiter of
// another: polling with backoff (poll_min 2 ms, poll_max 50 ms); the holder waits `hold` first.
void redis_cross_process_handoff(benchmark::State& state) {
  if (skip_without_server(state)) return;
  const auto hold = std::chrono::milliseconds(state.range(0));
  ratelimit::redis::RedisConcurrencyLimiter a({.permits = 1, .name = "handoff"}, options());
  ratelimit::redis::RedisConcurrencyLimiter b({.permits = 1, .name = "handoff"}, options());
  std::uint64_t polls = b.polls();
  for (auto _ : state) {
    ratelimit::PermitResult held = a.try_acquire("key");
    std::chrono::steady_clock::time_point released;
    std::thread holder([&] {
      std::this_thread::sleep_for(hold);
      released = std::chrono::steady_clock::now();
      held.permit.release();
    });
    ratelimit::PermitResult got = b.acquire("key", 1, 5s);
    const auto acquired = std::chrono::steady_clock::now();
    holder.join();
    if (!got) return state.SkipWithError("not acquired");
    state.SetIterationTime(std::chrono::duration<double>(acquired - released).count());
  }
  state.counters["polls_per_wait"] =
      benchmark::Counter(static_cast<double>(b.polls() - polls) / static_cast<double>(state.iterations()));
}
BENCHMARK(redis_cross_process_handoff)
    ->Arg(10)
    ->Arg(100)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(30);

}  // namespace

BENCHMARK_MAIN();
