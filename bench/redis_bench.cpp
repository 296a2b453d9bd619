// Cost per check of RedisLimiter beside floors measured in the same run against the same redis-server
// (started here on a free loopback port): raw hiredis EVALSHA of the same script, synchronous and
// pipelined 8, 16 and 64 deep, and raw INCR. Read the results as ratios (bench/summarize.py, and
// bench/redis_floors.sh for the Redis engine floors: one connection shared by 8 threads against a raw
// 8-deep pipeline, one thread against raw sync, 64 async calls in flight against a raw 64-deep pipeline).
//
// Every case also reports, per check, where the time goes: the server's CPU (INFO cpu), this process's CPU
// and context switches (getrusage: the benchmark's threads and the library's I/O threads), and how many
// commands the server read per read event and answered per write event (INFO stats
// total_reads_processed / total_writes_processed): the batch depth the pipeline reached, seen by Redis.
// floor/thread_handoff is the machine's price of a sync wait: one thread waking another through a futex.
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "bench_redis_server.hpp"

using namespace std::chrono_literals;

namespace {

using bench::server;
using bench::skip_without_server;
using Limiter = ratelimit::redis::RedisLimiter<ratelimit::Gcra>;

// Every check admitted (and so written): the script's full path on both sides.
const ratelimit::Gcra kPolicy{.limit = 1'000'000, .period = 1s, .burst = 1'000'000};

ratelimit::redis::RedisOptions options(int pool_size) {
  ratelimit::redis::RedisOptions o = server()->options();
  o.pool_size = static_cast<std::size_t>(pool_size);
  o.command_timeout = 2s;
  o.key_prefix = "bench:";
  return o;
}

using Context = std::unique_ptr<redisContext, decltype(&redisFree)>;

Context connect_raw() {
  Context c(redisConnect("127.0.0.1", server()->port()), &redisFree);
  if (c == nullptr || c->err != 0) {
    std::fprintf(stderr, "bench_redis: cannot connect to the benchmark's redis-server: %s\n",
                 c == nullptr ? "out of memory" : c->errstr);
    std::abort();
  }
  return c;
}

/// A reply that must not be an error: a floor answered with errors would measure less work than a check.
redisReply* checked(redisContext* c, void* reply) {
  auto* r = static_cast<redisReply*>(reply);
  if (r == nullptr || r->type == REDIS_REPLY_ERROR) {
    std::fprintf(stderr, "bench_redis: %s\n", r == nullptr ? c->errstr : r->str);
    std::abort();
  }
  return r;
}

/// A plain hiredis context: the floor has none of the library's code.
struct RawConnection {
  Context context = connect_raw();
  std::string sha1;

  RawConnection() {
    const auto& script = ratelimit::redis::detail::script_for(ratelimit::Gcra::kind);
    auto* reply =
        checked(context.get(), redisCommand(context.get(), "SCRIPT LOAD %b", script.body.data(), script.body.size()));
    sha1.assign(reply->str, reply->len);
    freeReplyObject(reply);
  }
};

// The same command RedisLimiter sends: EVALSHA sha 1 key now("": server time) cost mode(0: check) B T tau.
std::vector<std::string> gcra_args(const std::string& sha1, const std::string& key) {
  const auto rules = kPolicy.rules(1000);
  return {"EVALSHA",
          sha1,
          "1",
          key,
          "",
          "1",
          "0",
          std::to_string(rules.limit()),
          std::to_string(rules.emission_interval()),
          std::to_string(rules.tolerance())};
}

void send(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lengths.data());
}

void receive(redisContext* c) {
  void* reply = nullptr;
  if (redisGetReply(c, &reply) != REDIS_OK) std::abort();
  freeReplyObject(checked(c, reply));
}

/// What a case costs besides its wall time, read before and after the timed loop.
struct Usage {
  double server_cpu_s = 0;    // INFO cpu: used_cpu_sys + used_cpu_user
  double server_reads = 0;    // INFO stats: total_reads_processed (read events, each one read syscall)
  double server_writes = 0;   // INFO stats: total_writes_processed
  double server_scripts = 0;  // INFO commandstats: EVALSHA + EVAL calls
  double client_cpu_s = 0;    // getrusage(RUSAGE_SELF): every thread of this process
  double voluntary = 0;       // context switches: waits (futex, poll, a read with nothing to read)
  double involuntary = 0;     // preemptions (more runnable threads than cores)
};

double info_field(const std::string& info, const char* name) {
  const auto p = info.find(name);
  return p == std::string::npos ? 0 : std::strtod(info.c_str() + p + std::strlen(name), nullptr);
}

/// User + system CPU of a getrusage result, in us.
double cpu_us(const rusage& r) {
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

Usage usage_now(redisContext* admin) {
  Usage u;
  auto* reply = checked(admin, redisCommand(admin, "INFO cpu stats commandstats"));
  const std::string info(reply->str, reply->len);
  freeReplyObject(reply);
  u.server_cpu_s = info_field(info, "used_cpu_sys:") + info_field(info, "used_cpu_user:");
  u.server_reads = info_field(info, "total_reads_processed:");
  u.server_writes = info_field(info, "total_writes_processed:");
  u.server_scripts = info_field(info, "cmdstat_evalsha:calls=") + info_field(info, "cmdstat_eval:calls=");
  rusage r{};
  ::getrusage(RUSAGE_SELF, &r);
  u.client_cpu_s = cpu_us(r) / 1e6;
  u.voluntary = static_cast<double>(r.ru_nvcsw);
  u.involuntary = static_cast<double>(r.ru_nivcsw);
  return u;
}

/// Measures a case's Usage per check: `start` before the timed loop, `report` after it (thread 0 only: Google
/// Benchmark sums a counter over threads, and its barriers put every thread's loop between the two).
class UsageProbe {
 public:
  void start() { before_ = usage_now(admin_.get()); }

  void report(benchmark::State& state, double checks) {
    const Usage after = usage_now(admin_.get());
    // The probe's own INFO is one read, one write and no script per snapshot.
    const double reads = after.server_reads - before_.server_reads - 1;
    const double writes = after.server_writes - before_.server_writes - 1;
    const double scripts = after.server_scripts - before_.server_scripts;
    const double n = std::max(1.0, checks);
    state.counters["redis_cpu_us"] = (after.server_cpu_s - before_.server_cpu_s) * 1e6 / n;
    state.counters["client_cpu_us"] = (after.client_cpu_s - before_.client_cpu_s) * 1e6 / n;
    state.counters["vol_cs"] = (after.voluntary - before_.voluntary) / n;
    state.counters["invol_cs"] = (after.involuntary - before_.involuntary) / n;
    state.counters["cmds_per_read"] = scripts / std::max(1.0, reads);
    state.counters["replies_per_write"] = scripts / std::max(1.0, writes);
  }

 private:
  Context admin_ = connect_raw();
  Usage before_;
};

void floor_incr(benchmark::State& state) {
  if (skip_without_server(state)) return;
  RawConnection raw;
  const std::vector<std::string> args{"INCR", "bench:incr"};
  for (auto _ : state) {
    send(raw.context.get(), args);
    receive(raw.context.get());
  }
  state.SetItemsProcessed(state.iterations());
}

void floor_evalsha(benchmark::State& state) {
  if (skip_without_server(state)) return;
  RawConnection raw;
  UsageProbe probe;
  const auto args = gcra_args(raw.sha1, "bench:gcra{raw}:state");
  probe.start();
  for (auto _ : state) {
    send(raw.context.get(), args);
    receive(raw.context.get());
  }
  probe.report(state, static_cast<double>(state.iterations()));
  state.SetItemsProcessed(state.iterations());
}

/// One client, no threads: writes `depth` EVALSHA calls, then reads their `depth` replies, round after round.
void floor_evalsha_pipelined(benchmark::State& state) {
  if (skip_without_server(state)) return;
  RawConnection raw;
  UsageProbe probe;
  const auto depth = state.range(0);
  const auto args = gcra_args(raw.sha1, "bench:gcra{raw}:state");
  probe.start();
  for (auto _ : state) {
    for (std::int64_t i = 0; i < depth; ++i) send(raw.context.get(), args);
    for (std::int64_t i = 0; i < depth; ++i) receive(raw.context.get());
  }
  probe.report(state, static_cast<double>(state.iterations() * depth));
  state.SetItemsProcessed(state.iterations() * depth);
}

/// Sync `allow` from every thread of the case on `limiters` limiters of `pool_size` connections each (thread i
/// on limiter i % limiters).
void run_allow(benchmark::State& state, int pool_size, int limiters = 1) {
  if (skip_without_server(state)) return;
  static std::vector<std::unique_ptr<Limiter>> shared;
  static std::unique_ptr<UsageProbe> probe;
  if (state.thread_index() == 0) {
    for (int i = 0; i < limiters; ++i) {
      shared.push_back(std::make_unique<Limiter>(kPolicy, options(pool_size)));
      shared.back()->allow("warm-up");
    }
    probe = std::make_unique<UsageProbe>();
    probe->start();
  }
  // Read inside the loop: only its start waits for thread 0 to make the limiters.
  const auto mine = static_cast<std::size_t>(state.thread_index() % limiters);
  const std::string key = "client-" + std::to_string(state.thread_index());
  for (auto _ : state) benchmark::DoNotOptimize(shared[mine]->allow(key));
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() != 0) return;
  probe->report(state, static_cast<double>(state.iterations() * state.threads()));
  for (const auto& l : shared) {
    if (l->stats().failures != 0) state.SkipWithError("backend failures");
  }
  shared.clear();
  probe.reset();
}

// pool_size = threads; the threads still share one connection (the next opens at 128 commands outstanding).
void limiter_allow(benchmark::State& state) { run_allow(state, state.threads()); }

// Every thread on one connection (pool_size = 1): the engine's batches against a raw pipeline as deep.
void limiter_allow_one_connection(benchmark::State& state) { run_allow(state, 1); }

// Half the threads on each of two limiters of one connection each: two batches in flight at once, which one
// connection's sync callers do not reach (bench/README.md "Redis engine floors").
void limiter_allow_two_connections(benchmark::State& state) { run_allow(state, 1, 2); }

/// One of `allow_async`'s chains: each completion starts the next call until `left` are done.
struct AsyncChain {
  Limiter* limiter = nullptr;
  std::string key;
  std::int64_t left = 0;
  std::latch* done = nullptr;
  std::atomic<std::int64_t>* failed = nullptr;

  void next() {
    limiter->allow_async(key, 1, [this](std::exception_ptr error, ratelimit::Decision) {
      if (error != nullptr) failed->fetch_add(1, std::memory_order_relaxed);
      if (--left > 0) {
        next();
      } else {
        done->count_down();
      }
    });
  }
};

// Checks per chain per iteration: the ramp down at an iteration's end (fewer than `depth` in flight) is
// under 1 % of its checks.
constexpr std::int64_t kChainLength = 256;

/// `depth` async calls kept in flight on one connection, each submitted from the last one's completion (on the
/// I/O thread); an iteration is `depth` chains of kChainLength checks, timed from the first call to the last
/// completion.
void limiter_allow_async(benchmark::State& state) {
  if (skip_without_server(state)) return;
  Limiter limiter(kPolicy, options(1));
  limiter.allow("warm-up");
  UsageProbe probe;
  const auto depth = state.range(0);
  std::vector<AsyncChain> chains(static_cast<std::size_t>(depth));
  std::atomic<std::int64_t> failed{0};
  probe.start();
  for (auto _ : state) {
    std::latch done(depth);
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < chains.size(); ++i) {
      chains[i] = {&limiter, "async-" + std::to_string(i), kChainLength, &done, &failed};
      chains[i].next();
    }
    done.wait();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  probe.report(state, static_cast<double>(state.iterations() * depth * kChainLength));
  state.SetItemsProcessed(state.iterations() * depth * kChainLength);
  if (failed.load() != 0 || limiter.stats().failures != 0) state.SkipWithError("backend failures");
}

void limiter_allow_many(benchmark::State& state) {
  if (skip_without_server(state)) return;
  Limiter limiter(kPolicy, options(1));
  std::vector<std::string> keys;
  for (std::int64_t i = 0; i < state.range(0); ++i) keys.push_back("client-" + std::to_string(i));
  std::vector<ratelimit::redis::Request> batch;
  for (const auto& k : keys) batch.push_back({k, 1});
  for (auto _ : state) benchmark::DoNotOptimize(limiter.allow_many(batch));
  state.SetItemsProcessed(state.iterations() * state.range(0));
  if (limiter.stats().failures != 0) state.SkipWithError("backend failures");
}

/// Pins the calling thread to `cpu` (no effect where the machine has fewer).
void pin_to(unsigned cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)::pthread_setaffinity_np(::pthread_self(), sizeof set, &set);
}

/// A turn two threads hand back and forth through a futex, as a sync caller is woken with its reply.
struct Turn {
  std::atomic<std::uint32_t> value{0};

  void wait_for(std::uint32_t v) {
    for (std::uint32_t t = value.load(); t != v; t = value.load()) {
      ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&value), FUTEX_WAIT_PRIVATE, t, nullptr, nullptr, 0);
    }
  }
  void give(std::uint32_t v) {
    value.store(v);
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&value), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }
};

/// A machine floor of the sync path, not of Redis: wall time, process CPU and context switches per hand-off of
/// a turn between two threads, both on CPU 0 (argument 0) or on CPUs 0 and 1 (argument 1).
void floor_thread_handoff(benchmark::State& state) {
  cpu_set_t before;
  (void)::pthread_getaffinity_np(::pthread_self(), sizeof before, &before);
  Turn turn;
  std::atomic<bool> stop{false};
  pin_to(0);
  std::thread partner([&, cpu = state.range(0) == 0 ? 0U : 1U] {
    pin_to(cpu);
    for (std::uint32_t v = 1;; v += 2) {  // odd: the partner's turn
      turn.wait_for(v);
      if (stop.load()) return;
      turn.give(v + 1);
    }
  });
  rusage r0{}, r1{};
  ::getrusage(RUSAGE_SELF, &r0);
  std::uint32_t v = 1;
  for (auto _ : state) {
    turn.give(v);
    turn.wait_for(v + 1);
    v += 2;
  }
  ::getrusage(RUSAGE_SELF, &r1);
  stop = true;
  turn.give(v);
  partner.join();
  (void)::pthread_setaffinity_np(::pthread_self(), sizeof before, &before);
  const double n = 2.0 * static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations()));
  state.counters["client_cpu_us"] = (cpu_us(r1) - cpu_us(r0)) / n;
  state.counters["vol_cs"] = static_cast<double>(r1.ru_nvcsw - r0.ru_nvcsw) / n;
  state.SetItemsProcessed(state.iterations() * 2);
}

}  // namespace

BENCHMARK(floor_incr)->Name("redis_floor/incr")->UseRealTime();
BENCHMARK(floor_evalsha)->Name("redis_floor/evalsha_sync")->UseRealTime();
BENCHMARK(floor_evalsha_pipelined)->Name("redis_floor/evalsha_pipelined")->Arg(8)->Arg(16)->Arg(64)->UseRealTime();
BENCHMARK(limiter_allow)->Name("redis/gcra/allow")->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(limiter_allow_one_connection)->Name("redis/gcra/allow_one_connection")->Threads(8)->UseRealTime();
BENCHMARK(limiter_allow_two_connections)->Name("redis/gcra/allow_two_connections")->Threads(8)->UseRealTime();
BENCHMARK(limiter_allow_async)->Name("redis/gcra/allow_async")->Arg(64)->UseManualTime();
BENCHMARK(limiter_allow_many)->Name("redis/gcra/allow_many")->Arg(16)->Arg(64)->UseRealTime();
BENCHMARK(floor_thread_handoff)->Name("floor/thread_handoff")->ArgName("other_cpu")->Arg(0)->Arg(1)->UseRealTime();

// The server is started here, on the main thread, before any case: it is tied to the thread that starts it
// (PR_SET_PDEATHSIG), and a multi-threaded case's first caller may be a worker thread that exits after the case.
int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  (void)server();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
