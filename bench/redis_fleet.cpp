// bench_redis_fleet: a fleet of processes (fork/exec of this program) sharing one hot key and many cold keys on
// one redis-server, with LeasedLimiter or RedisLimiter (include/ratelimit/redis/README.md "Budget leases").
//
// Paced phase: the hot key driven at --hot-factor (10) times its limit fleet-wide, plus cold keys; every served
// hot unit is stamped (CLOCK_REALTIME, the clock Redis's TIME reads on this host) when served. The parent checks
// the stamps against the bound in every interval (GCRA / token bucket: B + floor(d / T) over all intervals
// ending at a served unit; fixed window: limit per window). Throughput phase: unpaced checks/s per process on
// the hot key, beside MemoryLimiter in the same run. The last line of standard output is one JSON object.
//
// --kill-redis-at S --restart-after R: the parent SIGKILLs its own redis-server S seconds into the paced phase
// and starts it again (same port, empty: no persistence) R seconds later. Intervals over the normal bound are
// reported apart, each against the outage bound (include/ratelimit/redis/README.md "Fallback during outages"): the
// normal bound plus every process's fallback burst, the leases outstanding (one slice per process) and the restarted
// server's fresh burst. Use it with --on-error fallback.
//
// --pool N: each process's pool_size (default: threads + 1). --pool-sweep: instead of the phases above, unpaced
// checks of one key with default options (RedisLimiter, GCRA) for each shape of --shapes (PxT: P processes x T
// threads of sync checks; PxKa: P processes x K async calls in flight) and each pool setting (the default
// options, then pool_size 1, 2, 4, 8), in --rounds interleaved rounds of --seconds each. Prints, per shape and
// setting, the median checks/s and Redis CPU per check (INFO cpu's used_cpu_sys + used_cpu_user over the
// round, divided by the checks Redis decided; those the failure policy answered are counted apart as failed)
// with their spread, and the default's ratios to the best of pool_size 1..8; when every setting opened one
// connection per process (the same code), the spread of pool_size 1..8's medians: the machine's noise; and the
// default against the setting of its own pool_size (the same configuration twice).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis.hpp>
#include <ratelimit/redis/leased_limiter.hpp>

#include "../tests/redis/redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string limiter = "leased";
  std::string policy = "gcra";
  int processes = 8;
  int threads = 2;
  double seconds = 5;
  std::string redis;  // HOST:PORT, else our own server
  double hot_factor = 10;
  std::int64_t limit = 2000;  // per second (GCRA limit / token refill / window limit per 1 s)
  std::int64_t burst = 1000;  // GCRA burst / bucket capacity
  std::int64_t lifetime_ms = 100;
  bool check = false;               // exit 1 when over_bound_intervals > 0
  std::string on_error = "closed";  // closed | open | fallback (each process 1 / processes of the quota)
  double kill_at = -1;              // seconds into the paced phase; < 0: Redis stays up
  double restart_after = 1;         // seconds after the kill
  int pool = 0;                     // pool_size; 0: threads + 1 (phases), the default options (sweep)
  bool sweep = false;
  int rounds = 5;
  std::string shapes = "4x8,1x8";
  int inflight = 0;  // sweep child: async calls in flight per process (0: sync threads)
  // child only
  std::string child;  // "paced" or "throughput"
  std::string out;
  std::int64_t start_us = 0;
  std::string prefix = "fleet:";
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "%s\nusage: bench_redis_fleet [--limiter leased|redis] [--policy gcra|token_bucket|fixed_window]\n"
               "  [--processes N (8)] [--threads T (2)] [--seconds S (5)] [--redis HOST:PORT] [--hot-factor F (10)]\n"
               "  [--limit per_s (2000)] [--burst B (1000)] [--lifetime-ms L (100)] [--check]\n"
               "  [--on-error closed|open|fallback] [--kill-redis-at S --restart-after S (1)] [--pool N]\n"
               "  [--pool-sweep [--rounds R (5)] [--shapes 4x8,1x8,1x32a,...]]\n",
               why);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + f).c_str());
      return argv[++i];
    };
    if (f == "--limiter")
      a.limiter = next();
    else if (f == "--policy")
      a.policy = next();
    else if (f == "--processes")
      a.processes = std::stoi(next());
    else if (f == "--threads")
      a.threads = std::stoi(next());
    else if (f == "--seconds")
      a.seconds = std::stod(next());
    else if (f == "--redis")
      a.redis = next();
    else if (f == "--hot-factor")
      a.hot_factor = std::stod(next());
    else if (f == "--limit")
      a.limit = std::stoll(next());
    else if (f == "--burst")
      a.burst = std::stoll(next());
    else if (f == "--lifetime-ms")
      a.lifetime_ms = std::stoll(next());
    else if (f == "--check")
      a.check = true;
    else if (f == "--on-error")
      a.on_error = next();
    else if (f == "--kill-redis-at")
      a.kill_at = std::stod(next());
    else if (f == "--restart-after")
      a.restart_after = std::stod(next());
    else if (f == "--pool")
      a.pool = std::stoi(next());
    else if (f == "--pool-sweep")
      a.sweep = true;
    else if (f == "--rounds")
      a.rounds = std::stoi(next());
    else if (f == "--shapes")
      a.shapes = next();
    else if (f == "--inflight")
      a.inflight = std::stoi(next());
    else if (f == "--child")
      a.child = next();
    else if (f == "--out")
      a.out = next();
    else if (f == "--start-us")
      a.start_us = std::stoll(next());
    else if (f == "--prefix")
      a.prefix = next();
    else
      usage(("unknown flag " + f).c_str());
  }
  if (a.limiter != "leased" && a.limiter != "redis") usage("--limiter: leased or redis");
  if (a.policy != "gcra" && a.policy != "token_bucket" && a.policy != "fixed_window") usage("--policy");
  if (a.on_error != "closed" && a.on_error != "open" && a.on_error != "fallback") usage("--on-error");
  if (a.kill_at >= 0 && !a.redis.empty() && a.child.empty()) usage("--kill-redis-at needs the program's own server");
  if (a.restart_after <= 0) usage("--restart-after: > 0");
  if (a.kill_at >= 0 && a.kill_at + a.restart_after >= a.seconds) {
    usage("--kill-redis-at + --restart-after: < --seconds");
  }
  if (a.processes < 1 || a.threads < 1 || a.seconds <= 0 || a.limit < 1 || a.burst < 1) usage("bad number");
  if (a.pool < 0 || a.pool > 1024 || a.rounds < 1 || a.inflight < 0) usage("bad number");
  return a;
}

std::int64_t realtime_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The emission interval T in us (GCRA / token bucket).
std::int64_t emission_us(const Args& a) { return (1'000'000 + a.limit - 1) / a.limit; }

ratelimit::redis::RedisOptions redis_options(const Args& a) {
  ratelimit::redis::RedisOptions o;
  const auto colon = a.redis.rfind(':');
  o.host = a.redis.substr(0, colon);
  o.port = std::stoi(a.redis.substr(colon + 1));
  o.key_prefix = a.prefix;
  o.on_error = a.on_error == "fallback" ? ratelimit::FailurePolicy::fallback
               : a.on_error == "open"   ? ratelimit::FailurePolicy::fail_open
                                        : ratelimit::FailurePolicy::fail_closed;
  o.fallback.instances = a.processes;
  o.reconnect_backoff_max = 200ms;  // include/ratelimit/redis/README.md "Fallback during outages": <= breaker.open_max
  o.pool_size = static_cast<std::size_t>(a.pool > 0 ? a.pool : a.threads + 1);
  o.command_timeout = 1000ms;
  o.connect_timeout = 1000ms;
  return o;
}

// One checker per thread kind: any limiter behind one call.
struct Checker {
  std::function<bool(std::string_view)> allow;
  std::function<std::uint64_t()> redis_calls;
};

template <class P>
void run_child_typed(const Args& a, const P& policy) {
  const auto o = redis_options(a);
  ratelimit::redis::LeaseOptions lease;
  lease.lifetime = std::chrono::milliseconds(a.lifetime_ms);
  lease.max_fraction = 0.1;
  // Two limiters on the same keys' namespace: the hot key's calls are counted on their own.
  std::unique_ptr<ratelimit::redis::LeasedLimiter<P>> leased_hot, leased_cold;
  std::unique_ptr<ratelimit::redis::RedisLimiter<P>> redis_hot, redis_cold;
  Checker hot, cold;
  if (a.limiter == "leased") {
    leased_hot = std::make_unique<ratelimit::redis::LeasedLimiter<P>>(policy, o, lease);
    leased_cold = std::make_unique<ratelimit::redis::LeasedLimiter<P>>(policy, o, lease);
    hot = {[&](std::string_view k) { return leased_hot->allow(k).allowed; },
           [&] { return leased_hot->stats().redis_calls; }};
    cold = {[&](std::string_view k) { return leased_cold->allow(k).allowed; },
            [&] { return leased_cold->stats().redis_calls; }};
  } else {
    redis_hot = std::make_unique<ratelimit::redis::RedisLimiter<P>>(policy, o);
    redis_cold = std::make_unique<ratelimit::redis::RedisLimiter<P>>(policy, o);
    hot = {[&](std::string_view k) { return redis_hot->allow(k).allowed; }, [&] { return redis_hot->stats().calls; }};
    cold = {[&](std::string_view k) { return redis_cold->allow(k).allowed; },
            [&] { return redis_cold->stats().calls; }};
  }
  std::ofstream out(a.out);
  const auto start = std::chrono::system_clock::time_point(std::chrono::microseconds(a.start_us));
  std::this_thread::sleep_until(start);
  const auto t0 = Clock::now();
  const auto t_end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds));

  if (a.child == "paced") {
    // Hot checks per second per thread, and one cold check per 10 hot ones.
    const double hot_rate = a.hot_factor * static_cast<double>(a.limit) / (a.processes * a.threads);
    const auto interval = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / hot_rate));
    struct Result {
      std::vector<std::int64_t> stamps;
      std::vector<std::int32_t> latency_ns;
      std::uint64_t hot_checks = 0, cold_checks = 0;
    };
    std::vector<Result> results(static_cast<std::size_t>(a.threads));
    std::vector<std::thread> threads;
    for (int t = 0; t < a.threads; ++t) {
      threads.emplace_back([&, t] {
        Result& r = results[static_cast<std::size_t>(t)];
        std::mt19937 rng(static_cast<unsigned>(::getpid() * 31 + t));
        auto next = t0 + interval * t / a.threads;
        std::uint64_t i = 0;
        while (Clock::now() < t_end) {
          std::this_thread::sleep_until(next);
          next += interval;
          const auto c0 = Clock::now();
          const bool ok = hot.allow("hot");
          const auto c1 = Clock::now();
          if (ok) r.stamps.push_back(realtime_us());
          if (r.latency_ns.size() < 2'000'000) {
            r.latency_ns.push_back(static_cast<std::int32_t>(std::min<std::int64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(c1 - c0).count(), INT32_MAX)));
          }
          ++r.hot_checks;
          if (++i % 10 == 0) {
            cold.allow("cold:" + std::to_string(rng() % 10'000));
            ++r.cold_checks;
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    std::uint64_t hot_checks = 0, cold_checks = 0;
    std::vector<std::int32_t> lat;
    for (auto& r : results) {
      hot_checks += r.hot_checks;
      cold_checks += r.cold_checks;
      lat.insert(lat.end(), r.latency_ns.begin(), r.latency_ns.end());
    }
    out << "hot_checks " << hot_checks << "\ncold_checks " << cold_checks << "\nhot_calls " << hot.redis_calls()
        << "\ncold_calls " << cold.redis_calls() << "\n";
    std::sort(lat.begin(), lat.end());
    if (!lat.empty()) {
      out << "p50_ns " << lat[lat.size() / 2] << "\np99_ns " << lat[lat.size() * 99 / 100] << "\n";
    }
    for (auto& r : results) {
      for (const std::int64_t s : r.stamps) out << "s " << s << "\n";
    }
  } else {
    // Unpaced: as many checks as the threads can do, with this limiter, then with MemoryLimiter.
    auto unpaced = [&](const std::function<bool(std::string_view)>& hot_allow,
                       const std::function<bool(std::string_view)>& cold_allow, Clock::time_point until) {
      std::atomic<std::uint64_t> total{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < a.threads; ++t) {
        threads.emplace_back([&, t] {
          std::mt19937 rng(static_cast<unsigned>(::getpid() * 17 + t));
          std::uint64_t n = 0;
          // The hot key only: a cold key costs one round trip with either limiter (the paced phase has them).
          (void)cold_allow;
          (void)rng;
          while (Clock::now() < until) {
            for (int j = 0; j < 16; ++j) (void)hot_allow("hot");
            n += 16;
          }
          total += n;
        });
      }
      for (auto& th : threads) th.join();
      return static_cast<double>(total.load());
    };
    const auto half = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds / 2));
    const double ours = unpaced(hot.allow, cold.allow, t0 + half) / (a.seconds / 2);
    ratelimit::MemoryLimiter<P> memory(policy);
    const auto m = [&](std::string_view k) { return memory.allow(k).allowed; };
    const auto t1 = Clock::now();
    const double mem = unpaced(m, m, t1 + half) / (a.seconds / 2);
    out << "checks_per_s " << static_cast<std::int64_t>(ours) << "\nmemory_checks_per_s "
        << static_cast<std::int64_t>(mem) << "\n";
  }
}

// Sweep child: unpaced checks of one key with the default options (but --pool), for --seconds from --start-us:
// --threads threads of sync checks, or with --inflight K, K async calls kept in flight.
int run_sweep_child(const Args& a) {
  ratelimit::redis::RedisOptions o;
  const auto colon = a.redis.rfind(':');
  o.host = a.redis.substr(0, colon);
  o.port = std::stoi(a.redis.substr(colon + 1));
  o.key_prefix = a.prefix;
  if (a.pool > 0) o.pool_size = static_cast<std::size_t>(a.pool);
  using Limiter = ratelimit::redis::RedisLimiter<ratelimit::Gcra>;
  Limiter l(ratelimit::Gcra{.limit = a.limit, .period = 1s, .burst = a.burst}, o);
  std::ofstream out(a.out);
  std::this_thread::sleep_until(std::chrono::system_clock::time_point(std::chrono::microseconds(a.start_us)));
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds));
  std::atomic<std::uint64_t> decided{0}, failed{0};
  auto count = [&](const ratelimit::CheckResult& r) {
    (r.outcome == ratelimit::Outcome::decided ? decided : failed).fetch_add(1, std::memory_order_relaxed);
  };
  if (a.inflight == 0) {
    std::vector<std::thread> threads;
    for (int t = 0; t < a.threads; ++t) {
      threads.emplace_back([&] {
        while (Clock::now() < end) count(l.check("hot"));
      });
    }
    for (auto& th : threads) th.join();
  } else {
    // Each chain submits its next call from the last one's completion until the end.
    std::atomic<int> live{a.inflight};
    std::function<void()> chain = [&] {
      l.check_async("hot", 1, [&](std::exception_ptr e, ratelimit::CheckResult r) {
        if (e != nullptr) r.outcome = ratelimit::Outcome::failure_policy;
        count(r);
        if (Clock::now() < end) {
          chain();
        } else {
          live.fetch_sub(1);
        }
      });
    };
    for (int i = 0; i < a.inflight; ++i) chain();
    while (live.load() > 0) std::this_thread::sleep_for(1ms);
  }
  out << "checks " << decided.load() << "\nfailed " << failed.load() << "\nconnects " << l.stats().connects << "\n";
  return 0;
}

int run_child(const Args& a) {
  if (a.child == "sweep") return run_sweep_child(a);
  const std::int64_t T = emission_us(a);
  if (a.policy == "gcra") {
    run_child_typed(a, ratelimit::Gcra{.limit = a.limit, .period = 1s, .burst = a.burst});
  } else if (a.policy == "token_bucket") {
    run_child_typed(a, ratelimit::TokenBucket{.capacity = a.burst, .refill_tokens = a.limit, .refill_period = 1s});
  } else {
    run_child_typed(a, ratelimit::FixedWindow{.limit = a.limit, .window = 1s});
  }
  (void)T;
  return 0;
}

std::map<std::string, std::int64_t> read_counts(const std::string& path, std::vector<std::int64_t>* stamps) {
  std::map<std::string, std::int64_t> m;
  std::ifstream in(path);
  std::string k;
  std::int64_t v = 0;
  while (in >> k >> v) {
    if (k == "s") {
      if (stamps) stamps->push_back(v);
    } else {
      m[k] += v;
    }
  }
  return m;
}

// Script calls the server ran (EVALSHA + EVAL), from INFO commandstats.
std::int64_t server_script_calls(ratelimit::redis::engine::Connection& admin) {
  const auto r = admin.command({"INFO", "commandstats"});
  const std::string s(ratelimit::redis::engine::text(*r));
  std::int64_t total = 0;
  for (const char* name : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="}) {
    const auto p = s.find(name);
    if (p != std::string::npos) total += std::stoll(s.substr(p + std::strlen(name)));
  }
  return total;
}

// Spawns the children for one phase and waits for them; returns their output files.
std::vector<std::string> run_phase(const Args& a, const std::string& phase, const char* self, std::int64_t start_us) {
  std::vector<std::string> files;
  std::vector<pid_t> pids;
  for (int p = 0; p < a.processes; ++p) {
    const std::string file =
        "/tmp/bench_redis_fleet." + std::to_string(::getpid()) + "." + phase + "." + std::to_string(p);
    files.push_back(file);
    std::vector<std::string> args{self,
                                  "--child",
                                  phase,
                                  "--out",
                                  file,
                                  "--start-us",
                                  std::to_string(start_us),
                                  "--limiter",
                                  a.limiter,
                                  "--policy",
                                  a.policy,
                                  "--processes",
                                  std::to_string(a.processes),
                                  "--threads",
                                  std::to_string(a.threads),
                                  "--seconds",
                                  std::to_string(a.seconds),
                                  "--redis",
                                  a.redis,
                                  "--hot-factor",
                                  std::to_string(a.hot_factor),
                                  "--limit",
                                  std::to_string(a.limit),
                                  "--burst",
                                  std::to_string(a.burst),
                                  "--lifetime-ms",
                                  std::to_string(a.lifetime_ms),
                                  "--on-error",
                                  a.on_error,
                                  "--prefix",
                                  a.prefix,
                                  "--pool",
                                  std::to_string(a.pool),
                                  "--inflight",
                                  std::to_string(a.inflight)};
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      std::vector<char*> argv;
      for (auto& s : args) argv.push_back(s.data());
      argv.push_back(nullptr);
      ::execv(self, argv.data());
      std::perror("execv");
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  for (const pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("a child process failed");
  }
  return files;
}

// Seconds of CPU the server has used (INFO cpu: used_cpu_sys + used_cpu_user).
double server_cpu_s(ratelimit::redis::engine::Connection& admin) {
  const auto r = admin.command({"INFO", "cpu"});
  const std::string s(ratelimit::redis::engine::text(*r));
  double total = 0;
  for (const char* name : {"used_cpu_sys:", "used_cpu_user:"}) {
    const auto p = s.find(name);
    if (p != std::string::npos) total += std::stod(s.substr(p + std::strlen(name)));
  }
  return total;
}

// A sweep shape: "PxT" (P processes x T threads of sync checks) or "PxKa" (P processes x K async calls in flight).
struct Shape {
  std::string name;
  int processes = 1;
  int callers = 1;
  bool async = false;
};

std::vector<Shape> parse_shapes(const std::string& list) {
  std::vector<Shape> shapes;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    Shape s{item};
    const auto x = item.find('x');
    if (x == std::string::npos) usage("--shapes: PxT or PxKa, comma-separated");
    s.async = item.back() == 'a';
    s.processes = std::stoi(item.substr(0, x));
    s.callers = std::stoi(item.substr(x + 1));
    if (s.processes < 1 || s.callers < 1) usage("--shapes: counts >= 1");
    shapes.push_back(s);
  }
  return shapes;
}

struct Sample {
  double checks_per_s = 0;
  double cpu_us_per_check = 0;
  std::int64_t failed = 0;
  double connects = 0;  // connections opened per process
};

// One measurement: the shape's processes for --seconds with `pool` (0: the default options).
Sample sweep_once(Args a, const Shape& shape, int pool, const char* self, ratelimit::redis::engine::Connection& admin) {
  static int run = 0;
  a.processes = shape.processes;
  a.threads = shape.async ? 1 : shape.callers;
  a.inflight = shape.async ? shape.callers : 0;
  a.pool = pool;
  a.prefix += std::to_string(run++) + ":";
  const double cpu0 = server_cpu_s(admin);
  const auto files = run_phase(a, "sweep", self, realtime_us() + 300'000);
  const double cpu1 = server_cpu_s(admin);
  std::int64_t checks = 0, failed = 0, connects = 0;
  for (const auto& f : files) {
    auto m = read_counts(f, nullptr);
    checks += m["checks"];
    failed += m["failed"];
    connects += m["connects"];
    std::remove(f.c_str());
  }
  // Checks Redis decided: a failed one (the failure policy answered, e.g. no reply by its deadline on a
  // stalled machine) is counted apart, not as throughput.
  const double n = static_cast<double>(std::max<std::int64_t>(1, checks));
  return {n / a.seconds, (cpu1 - cpu0) * 1e6 / n, failed, static_cast<double>(connects) / shape.processes};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// The pool settings of the sweep: 0 is the default options.
constexpr int kSweepPools[] = {0, 1, 2, 4, 8};
constexpr std::size_t kSweepSettings = std::size(kSweepPools);

// Prints one shape's table and returns its JSON object.
std::string report_shape(const Args& a, const Shape& shape, const std::vector<std::vector<Sample>>& samples) {
  std::printf("\n%d process%s x %d %s, %d interleaved rounds of %.1f s\n", shape.processes,
              shape.processes == 1 ? "" : "es", shape.callers,
              shape.async ? "async calls in flight" : "threads of sync checks", a.rounds, a.seconds);
  std::printf("%-10s %28s %34s %8s %12s\n", "pool_size", "checks/s median [min - max]",
              "Redis CPU us/check median [min - max]", "failed", "connections");
  std::vector<double> tp_med(kSweepSettings), cpu_med(kSweepSettings);
  std::int64_t failed_all = 0;
  double most_connections = 0;
  for (std::size_t i = 0; i < kSweepSettings; ++i) {
    std::vector<double> tp, cpu, conns;
    std::int64_t failed = 0;
    for (const Sample& x : samples[i]) {
      tp.push_back(x.checks_per_s);
      cpu.push_back(x.cpu_us_per_check);
      conns.push_back(x.connects);
      failed += x.failed;
    }
    tp_med[i] = median(tp);
    cpu_med[i] = median(cpu);
    const std::string name = kSweepPools[i] == 0 ? "default" : std::to_string(kSweepPools[i]);
    std::printf("%-10s %10.0f [%7.0f - %7.0f] %14.2f [%6.2f - %6.2f] %8lld %12.1f\n", name.c_str(), tp_med[i],
                *std::min_element(tp.begin(), tp.end()), *std::max_element(tp.begin(), tp.end()), cpu_med[i],
                *std::min_element(cpu.begin(), cpu.end()), *std::max_element(cpu.begin(), cpu.end()),
                static_cast<long long>(failed), median(conns));
    failed_all += failed;
    most_connections = std::max(most_connections, median(conns));
  }
  std::size_t best = 1, cheapest = 1;
  for (std::size_t i = 2; i < kSweepSettings; ++i) {
    if (tp_med[i] > tp_med[best]) best = i;
    if (cpu_med[i] < cpu_med[cheapest]) cheapest = i;
  }
  const double tp_ratio = tp_med[0] / tp_med[best], cpu_ratio = cpu_med[0] / cpu_med[cheapest];
  std::printf("default / best throughput (pool_size %d): %.3f; default CPU per check / lowest (pool_size %d): %.3f\n",
              kSweepPools[best], tp_ratio, kSweepPools[cheapest], cpu_ratio);
  // When every setting opened one connection per process they ran the same code: the spread of pool_size
  // 1..8's medians is then the machine's noise, the yardstick for the default's ratios.
  const auto [tp_lo, tp_hi] = std::minmax_element(tp_med.begin() + 1, tp_med.end());
  const auto [cpu_lo, cpu_hi] = std::minmax_element(cpu_med.begin() + 1, cpu_med.end());
  if (most_connections <= 1) {
    std::printf(
        "every setting opened one connection per process (the same code): pool_size 1..8's medians spread "
        "%.3f (lowest / highest checks/s) and %.3f (highest / lowest CPU per check)\n",
        *tp_lo / *tp_hi, *cpu_hi / *cpu_lo);
  }
  // The default options' own pool_size, when swept, runs the default's configuration a second time: an A/A pair.
  const auto default_pool = static_cast<int>(ratelimit::redis::RedisOptions{}.pool_size);
  double aa_tp = 0, aa_cpu = 0;
  for (std::size_t i = 1; i < kSweepSettings; ++i) {
    if (kSweepPools[i] != default_pool) continue;
    aa_tp = tp_med[0] / tp_med[i];
    aa_cpu = cpu_med[0] / cpu_med[i];
    std::printf(
        "the default options are pool_size %d, the same configuration: default / pool_size %d %.3f (checks/s), "
        "%.3f (CPU per check)\n",
        default_pool, default_pool, aa_tp, aa_cpu);
  }
  char json[640];
  std::snprintf(json, sizeof json,
                "{\"shape\": \"%s\", \"default_checks_per_s\": %.0f, \"default_cpu_us_per_check\": %.3f, "
                "\"throughput_ratio\": %.4f, \"cpu_ratio\": %.4f, \"failed_checks\": %lld, "
                "\"most_connections\": %.1f, \"same_code_throughput_spread\": %.4f, \"same_code_cpu_spread\": %.4f, "
                "\"default_pool_size\": %d, \"same_config_throughput_ratio\": %.4f, \"same_config_cpu_ratio\": %.4f}",
                shape.name.c_str(), tp_med[0], cpu_med[0], tp_ratio, cpu_ratio, static_cast<long long>(failed_all),
                most_connections, *tp_lo / *tp_hi, *cpu_hi / *cpu_lo, default_pool, aa_tp, aa_cpu);
  return json;
}

// --pool-sweep: every shape and pool setting once per round, the order rotating from round to round so that
// neighbours' noise (a shared machine) spreads over all settings; then the medians.
int run_sweep(Args a, const char* self, ratelimit::redis::engine::Connection& admin) {
  const auto shapes = parse_shapes(a.shapes);
  std::vector<std::vector<std::vector<Sample>>> samples(shapes.size(),
                                                        std::vector<std::vector<Sample>>(kSweepSettings));
  for (int r = 0; r < a.rounds; ++r) {
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      const std::size_t s = (k + static_cast<std::size_t>(r)) % shapes.size();
      for (std::size_t j = 0; j < kSweepSettings; ++j) {
        const std::size_t i = (j + static_cast<std::size_t>(r)) % kSweepSettings;
        samples[s][i].push_back(sweep_once(a, shapes[s], kSweepPools[i], self, admin));
      }
    }
    std::fprintf(stderr, "round %d of %d done\n", r + 1, a.rounds);
  }
  std::string json = "{\"pool_sweep\": [";
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    json += (s == 0 ? "" : ", ") + report_shape(a, shapes[s], samples[s]);
  }
  std::printf("%s]}\n", json.c_str());
  return 0;
}

int run_parent(Args a, const char* self) {
  std::unique_ptr<ratelimit_test::RedisServer> server;
  if (a.redis.empty()) {
    const auto binary = ratelimit_test::find_redis_server();
    if (!binary) throw std::runtime_error("redis-server not found (or give --redis HOST:PORT)");
    server = std::make_unique<ratelimit_test::RedisServer>(*binary);
    a.redis = "127.0.0.1:" + std::to_string(server->port());
  }
  a.prefix = "fleet:" + std::to_string(::getpid()) + ":" + std::to_string(realtime_us()) + ":";
  ratelimit::redis::RedisOptions ao;
  const auto colon = a.redis.rfind(':');
  ao.host = a.redis.substr(0, colon);
  ao.port = std::stoi(a.redis.substr(colon + 1));
  ao.command_timeout = 2000ms;
  auto admin = ratelimit::redis::engine::Connection::open(ao);
  if (a.sweep) return run_sweep(a, self, admin);

  // Paced phase: start on a whole second (fixed windows align to it) at least 0.5 s from now.
  const std::int64_t start_us = (realtime_us() / 1'000'000 + 2) * 1'000'000;
  const std::int64_t calls0 = server_script_calls(admin);
  // The outage: SIGKILL at start + kill_at, a fresh server on the same port restart_after later. The thread
  // that starts it lives until the run ends: the server is tied to it (PR_SET_PDEATHSIG fires when the thread
  // that forked it exits).
  std::atomic<std::int64_t> killed_us{0}, restarted_us{0};
  struct Killer {
    std::promise<void> done;
    std::thread thread;
    ~Killer() {
      if (!thread.joinable()) return;
      done.set_value();
      thread.join();
    }
  } killer;
  if (a.kill_at >= 0) {
    killer.thread = std::thread([&, finished = killer.done.get_future()] {
      std::this_thread::sleep_until(std::chrono::system_clock::time_point(
          std::chrono::microseconds(start_us + static_cast<std::int64_t>(a.kill_at * 1e6))));
      killed_us = realtime_us();
      server->kill_hard();
      std::this_thread::sleep_for(std::chrono::duration<double>(a.restart_after));
      server->start();
      restarted_us = realtime_us();
      finished.wait();
    });
  }
  const auto paced = run_phase(a, "paced", self, start_us);
  if (a.kill_at >= 0) {
    while (restarted_us.load() == 0) std::this_thread::sleep_for(10ms);
    admin = ratelimit::redis::engine::Connection::open(ao);  // the old connection died with the server
  }
  // The restarted server counts from zero: with an outage, the script calls after the restart only.
  const std::int64_t calls1 = server_script_calls(admin) + (a.kill_at >= 0 ? calls0 : 0);
  std::vector<std::int64_t> stamps;
  std::map<std::string, std::int64_t> sum;
  std::vector<std::int64_t> p50, p99;
  for (const auto& f : paced) {
    auto m = read_counts(f, &stamps);
    for (auto& [k, v] : m) sum[k] += v;
    p50.push_back(m["p50_ns"]);
    p99.push_back(m["p99_ns"]);
    std::remove(f.c_str());
  }
  std::sort(stamps.begin(), stamps.end());
  const auto duration_us = static_cast<std::int64_t>(a.seconds * 1e6);
  const std::int64_t end_us = start_us + duration_us;

  std::int64_t over = 0;
  double bound_total = 0;
  const std::int64_t T = emission_us(a);
  // The outage allowance over the normal bound (include/ratelimit/redis/README.md "Fallback during outages"): each
  // process's fallback burst (its share's), the slice each may still hold from before the kill, and the restarted
  // (empty) server's fresh burst.
  const std::int64_t base = a.policy == "fixed_window" ? a.limit : a.burst;
  const std::int64_t share_burst = std::max<std::int64_t>(1, base / a.processes);
  // A slice: max_fraction (0.1) of the lease-mode limit (GCRA / token bucket: the burst less L / T), at most 1000.
  const std::int64_t lease_limit = a.policy == "fixed_window" ? a.limit : a.burst - a.lifetime_ms * 1000 / T;
  const std::int64_t slice = a.limiter == "leased" ? std::clamp<std::int64_t>(lease_limit / 10, 1, 1000) : 0;
  // While some processes are back on Redis and others still on their fallback (at most the fallback's probe_max
  // + the breaker's open_max after Redis returns), the latter's shares admit beside Redis's full rate.
  const auto overlap_us =
      std::chrono::duration_cast<std::chrono::microseconds>(ratelimit::redis::FallbackOptions{}.probe_max +
                                                            ratelimit::redis::CircuitBreakerOptions{}.open_max)
          .count();
  const std::int64_t overlap = a.policy == "fixed_window" ? 0 : (a.processes - 1) * (overlap_us / T) / a.processes;
  const std::int64_t allowance = a.kill_at >= 0 ? a.processes * (share_burst + slice) + base + overlap : 0;
  std::int64_t over_outage = 0;  // intervals over the normal bound + the allowance
  std::int64_t max_excess = 0;
  std::printf("paced phase: %d processes x %d threads, %.1f s, hot key at %.0fx its limit (%s, %s)\n", a.processes,
              a.threads, a.seconds, a.hot_factor, a.limiter.c_str(), a.policy.c_str());
  if (a.policy == "fixed_window") {
    std::map<std::int64_t, std::int64_t> per_window;
    for (const std::int64_t s : stamps) ++per_window[s / 1'000'000];
    std::printf("%-12s %10s %10s\n", "window (s)", "admitted", "bound");
    for (const auto& [w, n] : per_window) {
      std::printf("%-12lld %10lld %10lld%s\n", static_cast<long long>(w - start_us / 1'000'000),
                  static_cast<long long>(n), static_cast<long long>(a.limit), n > a.limit ? "  OVER" : "");
      if (n > a.limit) ++over;
      max_excess = std::max(max_excess, n - a.limit);
      if (n > a.limit + allowance) ++over_outage;
    }
    // Every window the phase touched (its last checks may land in the window after the nominal end).
    const std::int64_t windows = stamps.empty() ? 1 : stamps.back() / 1'000'000 - stamps.front() / 1'000'000 + 1;
    bound_total = static_cast<double>(a.limit * windows);
  } else {
    // Every interval [stamp i, stamp j]: count - (B + floor(d / T)) must be <= 0; each end j over it counts once.
    for (std::size_t j = 0; j < stamps.size(); ++j) {
      std::int64_t excess = 0;  // the most any interval ending at stamp j exceeds the normal bound by
      for (std::size_t i = j + 1; i-- > 0;) {
        const auto count = static_cast<std::int64_t>(j - i + 1);
        const std::int64_t d = stamps[j] - stamps[i];
        excess = std::max(excess, count - (a.burst + d / T));
        if (excess > 0 && a.kill_at < 0) break;  // without an outage, one violation is enough
      }
      if (excess > 0) ++over;
      if (excess > allowance) ++over_outage;
      max_excess = std::max(max_excess, excess);
    }
    // Per 500 ms interval, against its own bound.
    std::printf("%-14s %10s %10s\n", "interval (ms)", "admitted", "bound");
    for (std::int64_t t = start_us; t < end_us; t += 500'000) {
      const auto lo = std::lower_bound(stamps.begin(), stamps.end(), t);
      const auto hi = std::upper_bound(stamps.begin(), stamps.end(), t + 500'000 - 1);
      const std::int64_t n = hi - lo;
      const std::int64_t b = a.burst + (500'000 - 1) / T;
      std::printf("%6lld-%-7lld %10lld %10lld%s\n", static_cast<long long>((t - start_us) / 1000),
                  static_cast<long long>((t - start_us) / 1000 + 500), static_cast<long long>(n),
                  static_cast<long long>(b), n > b ? "  OVER" : "");
    }
    bound_total = static_cast<double>(a.burst + duration_us / T);
  }
  const auto admitted = static_cast<double>(stamps.size());
  const double fraction = admitted / bound_total;
  const double hot_calls_per_check =
      static_cast<double>(sum["hot_calls"]) / static_cast<double>(std::max<std::int64_t>(1, sum["hot_checks"]));
  const double all_calls_per_check =
      static_cast<double>(calls1 - calls0) /
      static_cast<double>(std::max<std::int64_t>(1, sum["hot_checks"] + sum["cold_checks"]));
  std::sort(p50.begin(), p50.end());
  std::sort(p99.begin(), p99.end());
  std::printf("hot key: %lld checks, %.0f admitted of a bound of %.0f (%.3f); intervals over the bound: %lld\n",
              static_cast<long long>(sum["hot_checks"]), admitted, bound_total, fraction, static_cast<long long>(over));
  std::printf(
      "Redis calls per check: hot key %.4f (limiter counters), all keys %.4f (INFO commandstats, %lld "
      "script calls for %lld checks)\n",
      hot_calls_per_check, all_calls_per_check, static_cast<long long>(calls1 - calls0),
      static_cast<long long>(sum["hot_checks"] + sum["cold_checks"]));
  if (a.kill_at >= 0) {
    std::printf(
        "outage: Redis SIGKILLed at %.3f s, restarted at %.3f s; intervals over the normal bound: %lld "
        "(most over it: %lld units); over the outage bound (normal + %lld = %d x (fallback burst %lld + "
        "slice %lld) + fresh burst %lld + recovery overlap %lld): %lld\n",
        static_cast<double>(killed_us.load() - start_us) / 1e6,
        static_cast<double>(restarted_us.load() - start_us) / 1e6, static_cast<long long>(over),
        static_cast<long long>(max_excess), static_cast<long long>(allowance), a.processes,
        static_cast<long long>(share_burst), static_cast<long long>(slice), static_cast<long long>(base),
        static_cast<long long>(overlap), static_cast<long long>(over_outage));
  }
  std::printf("hot check latency (median over processes): p50 %.1f us, p99 %.1f us\n",
              static_cast<double>(p50[p50.size() / 2]) / 1e3, static_cast<double>(p99[p99.size() / 2]) / 1e3);

  // Throughput phase (fresh keys).
  a.prefix += "tp:";
  const std::int64_t tp_start = (realtime_us() / 1'000'000 + 2) * 1'000'000;
  const auto tp = run_phase(a, "throughput", self, tp_start);
  double ours = 0, mem = 0;
  for (const auto& f : tp) {
    auto m = read_counts(f, nullptr);
    ours += static_cast<double>(m["checks_per_s"]);
    mem += static_cast<double>(m["memory_checks_per_s"]);
    std::remove(f.c_str());
  }
  const double ratio = mem > 0 ? ours / mem : 0;
  std::printf(
      "throughput phase (hot key, unpaced): %.0f checks/s per process (%s) against %.0f (MemoryLimiter): ratio %.3f\n",
      ours / a.processes, a.limiter.c_str(), mem / a.processes, ratio);
  std::printf(
      "{\"limiter\": \"%s\", \"policy\": \"%s\", \"processes\": %d, \"threads\": %d, \"seconds\": %.1f, "
      "\"over_bound_intervals\": %lld, \"admitted_fraction_of_bound\": %.4f, \"redis_calls_per_check\": %.5f, "
      "\"redis_commands_per_check_all_keys\": %.5f, \"checks_per_s_ratio\": %.4f, \"p50_us\": %.1f, "
      "\"p99_us\": %.1f, \"hot_admitted\": %.0f, \"bound\": %.0f, \"on_error\": \"%s\", "
      "\"kill_redis_at\": %.2f, \"over_outage_bound_intervals\": %lld, \"max_excess_over_bound\": %lld, "
      "\"outage_allowance\": %lld}\n",
      a.limiter.c_str(), a.policy.c_str(), a.processes, a.threads, a.seconds, static_cast<long long>(over), fraction,
      hot_calls_per_check, all_calls_per_check, ratio, static_cast<double>(p50[p50.size() / 2]) / 1e3,
      static_cast<double>(p99[p99.size() / 2]) / 1e3, admitted, bound_total, a.on_error.c_str(), a.kill_at,
      static_cast<long long>(over_outage), static_cast<long long>(max_excess), static_cast<long long>(allowance));
  // With an outage the check is against the outage bound; without one, against the normal bound.
  return a.check && (a.kill_at >= 0 ? over_outage : over) > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    if (!a.child.empty()) return run_child(a);
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) throw std::runtime_error("cannot find /proc/self/exe");
    self[n] = '\0';
    return run_parent(a, self);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_redis_fleet: %s\n", e.what());
    return 1;
  }
}
