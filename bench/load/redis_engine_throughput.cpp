// The Redis engine against raw hiredis, in one run on one redis-server it starts itself
// (include/ratelimit/redis/README.md "Redis engine", measured): checks per second of
//   raw hiredis EVALSHA, synchronous                      (the sync floor)
//   raw hiredis, 16-deep and 64-deep pipelines            (the pipeline floors)
//   RedisLimiter::allow, 1 thread                         vs the sync floor
//   RedisLimiter::allow, 8 threads, pool_size = 1         vs the 16-deep floor
//   RedisLimiter::check_async, 64 in flight, 1 connection vs the 64-deep floor
// Each phase runs `seconds` and the whole set `repetitions` times, interleaved; medians are printed, with
// each phase's client CPU (this process, all threads) and redis-server CPU per check, and for the limiter
// the mean number of commands per socket write (its batch size).
// Usage: ratelimit_redis_engine_throughput [seconds per phase = 1] [repetitions = 5]
#include <hiredis/hiredis.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "redis_server.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

/// CPU seconds of this process (every thread) so far.
double client_cpu() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/// CPU seconds of process `pid` so far (utime + stime of /proc/<pid>/stat).
double process_cpu(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::size_t pos = close + 2;
  for (int field = 3; field < 14; ++field) pos = stat.find(' ', pos) + 1;  // to field 14, utime
  char* end = nullptr;
  const double utime = std::strtod(stat.c_str() + pos, &end);
  const double stime = std::strtod(end, nullptr);
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

/// One phase's figures: checks/s, and CPU microseconds per check of the client and of the server.
struct Sample {
  double rate = 0, client_us = 0, server_us = 0, batch = 0;
};

/// Runs `phase` (returns checks/s over `seconds`) and measures the CPU it took; `writes` counts the
/// limiter's socket writes (null for raw hiredis).
template <class F>
Sample measure(pid_t server, double seconds, F phase, const std::function<std::uint64_t()>& writes = {}) {
  const double c0 = client_cpu(), s0 = process_cpu(server);
  const std::uint64_t w0 = writes ? writes() : 0;
  Sample s;
  s.rate = phase();
  const double checks = s.rate * seconds;
  s.client_us = (client_cpu() - c0) / checks * 1e6;
  s.server_us = (process_cpu(server) - s0) / checks * 1e6;
  if (writes) s.batch = checks / static_cast<double>(writes() - w0);
  return s;
}

/// Raw hiredis: `depth` commands appended, then their replies read, for `seconds`. `window`: instead
/// `depth` kept in flight, as many written as replies read (the most any `depth` callers that each wait
/// for their reply could have outstanding on one connection, with no thread costs).
double raw(int port, const std::vector<std::string>& args, int depth, double seconds, bool window = false) {
  redisContext* c = redisConnect("127.0.0.1", port);
  if (c == nullptr || c->err != 0) std::abort();
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  long n = 0;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  auto append = [&] { redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()); };
  auto flush = [&] {
    for (int done = 0; done == 0;) {
      if (redisBufferWrite(c, &done) != REDIS_OK) std::abort();
    }
  };
  if (window) {
    for (int i = 0; i < depth; ++i) append();
    flush();
    while (Clock::now() < end) {
      if (redisBufferRead(c) != REDIS_OK) std::abort();
      void* r = nullptr;
      int got = 0;
      while (redisGetReplyFromReader(c, &r) == REDIS_OK && r != nullptr) {
        freeReplyObject(r);
        ++got;
      }
      n += got;
      for (int i = 0; i < got; ++i) append();
      flush();
    }
    for (int i = 0; i < depth; ++i) {
      void* r = nullptr;
      if (redisGetReply(c, &r) != REDIS_OK || r == nullptr) std::abort();
      freeReplyObject(r);
    }
  }
  while (!window && Clock::now() < end) {
    for (int i = 0; i < depth; ++i) redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data());
    for (int i = 0; i < depth; ++i) {
      void* r = nullptr;
      if (redisGetReply(c, &r) != REDIS_OK || r == nullptr) std::abort();
      freeReplyObject(r);
    }
    n += depth;
  }
  const double rate = static_cast<double>(n) / std::chrono::duration<double>(Clock::now() - start).count();
  redisFree(c);
  return rate;
}

template <class L>
double sync_threads(L& limiter, int threads, double seconds) {
  std::atomic<long> n{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> ts;
  const auto start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      const std::string key = "k" + std::to_string(t);
      long mine = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        if (limiter.check(key).outcome != ratelimit::Outcome::decided) std::abort();
        ++mine;
      }
      n += mine;
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : ts) t.join();
  return static_cast<double>(n.load()) / std::chrono::duration<double>(Clock::now() - start).count();
}

/// `depth` async calls kept in flight: each completion starts the next until the time is up.
template <class L>
double async_in_flight(L& limiter, int depth, double seconds) {
  std::atomic<long> n{0};
  std::atomic<int> running{0};
  std::mutex m;
  std::condition_variable cv;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  struct Loop {
    L* limiter;
    std::atomic<long>* n;
    std::atomic<int>* running;
    std::mutex* m;
    std::condition_variable* cv;
    Clock::time_point end;
    void next() {
      limiter->check_async("a", 1, [self = *this](std::exception_ptr e, ratelimit::CheckResult r) mutable {
        if (e || r.outcome != ratelimit::Outcome::decided) std::abort();
        self.n->fetch_add(1, std::memory_order_relaxed);
        if (Clock::now() < self.end) {
          self.next();
        } else if (self.running->fetch_sub(1) == 1) {
          const std::lock_guard lock(*self.m);
          self.cv->notify_one();
        }
      });
    }
  };
  running = depth;
  for (int i = 0; i < depth; ++i) Loop{&limiter, &n, &running, &m, &cv, end}.next();
  std::unique_lock lock(m);
  cv.wait(lock, [&] { return running.load() == 0; });
  return static_cast<double>(n.load()) / std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  const int repetitions = argc > 2 ? std::atoi(argv[2]) : 5;
  const auto binary = ratelimit_test::find_redis_server();
  if (!binary) {
    std::fprintf(stderr, "redis-server not found\n");
    return 2;
  }
  ratelimit_test::RedisServer server(*binary);
  ratelimit::redis::RedisOptions o = server.options();
  o.key_prefix = "bench:";
  o.on_error = ratelimit::FailurePolicy::raise;
  o.pool_size = 1;
  o.command_timeout = 2s;
  const ratelimit::Gcra policy{.limit = 1'000'000, .period = 1s, .burst = 1000};
  auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(o.connection(), o.limiter());
  ratelimit::redis::RedisLimiter limiter(policy, pool);
  (void)limiter.allow("k");  // loads the script

  // The very command the limiter sends: EVALSHA <sha> 1 <key> "" <cost> <mode> <B> <T>.
  const auto& rules = limiter.rules();
  const std::vector<std::string> args{"EVALSHA",
                                      std::string(limiter.script().sha1),
                                      "1",
                                      limiter.redis_key("k"),
                                      "",
                                      "1",
                                      "0",
                                      std::to_string(rules.limit()),
                                      std::to_string(rules.emission_interval())};

  const pid_t sp = server.pid();
  const std::function<std::uint64_t()> writes = [&] { return pool->pipeline().writes(); };
  enum : std::size_t { kFloor1, kSync1, kFloor16, kWindow8, kSync8, kFloor64, kAsync64, kPhases };
  std::vector<std::vector<Sample>> runs(kPhases);
  for (int r = 0; r < repetitions; ++r) {
    runs[kFloor1].push_back(measure(sp, seconds, [&] { return raw(server.port(), args, 1, seconds); }));
    runs[kSync1].push_back(measure(
        sp, seconds, [&] { return sync_threads(limiter, 1, seconds); }, writes));
    runs[kFloor16].push_back(measure(sp, seconds, [&] { return raw(server.port(), args, 16, seconds); }));
    runs[kWindow8].push_back(measure(sp, seconds, [&] { return raw(server.port(), args, 8, seconds, true); }));
    runs[kSync8].push_back(measure(
        sp, seconds, [&] { return sync_threads(limiter, 8, seconds); }, writes));
    runs[kFloor64].push_back(measure(sp, seconds, [&] { return raw(server.port(), args, 64, seconds); }));
    runs[kAsync64].push_back(measure(
        sp, seconds, [&] { return async_in_flight(limiter, 64, seconds); }, writes));
    std::fprintf(stderr, "rep %d: %.0f %.0f (%.2fx) | %.0f %.0f %.0f (%.2fx %.2fx) | %.0f %.0f (%.2fx)\n", r + 1,
                 runs[kFloor1].back().rate, runs[kSync1].back().rate,
                 runs[kSync1].back().rate / runs[kFloor1].back().rate, runs[kFloor16].back().rate,
                 runs[kWindow8].back().rate, runs[kSync8].back().rate,
                 runs[kWindow8].back().rate / runs[kFloor16].back().rate,
                 runs[kSync8].back().rate / runs[kFloor16].back().rate, runs[kFloor64].back().rate,
                 runs[kAsync64].back().rate, runs[kAsync64].back().rate / runs[kFloor64].back().rate);
  }
  auto med = [&](std::size_t phase, double Sample::*field) {
    std::vector<double> v;
    for (const Sample& x : runs[phase]) v.push_back(x.*field);
    return median(v);
  };
  // Ratios are medians of the per-repetition ratios: a floor and its case run back to back, so a
  // repetition's ratio is taken under one load.
  auto ratio = [&](std::size_t phase, std::size_t floor) {
    std::vector<double> v;
    for (std::size_t r = 0; r < runs[phase].size(); ++r) v.push_back(runs[phase][r].rate / runs[floor][r].rate);
    return median(v);
  };
  std::printf("GCRA on one local redis-server, %.1f s per phase, median of %d repetitions\n", seconds, repetitions);
  std::printf("  %-40s %9s %8s %10s %10s %6s\n", "phase", "checks/s", "ratio", "client us", "server us", "batch");
  const struct {
    std::size_t phase, floor;
    const char* name;
    const char* of;
  } rows[] = {{kFloor1, kPhases, "raw hiredis EVALSHA, synchronous", ""},
              {kFloor16, kPhases, "raw hiredis, 16-deep pipeline", ""},
              {kFloor64, kPhases, "raw hiredis, 64-deep pipeline", ""},
              {kWindow8, kFloor16, "raw hiredis, 8 in flight (window)", "16-deep"},
              {kSync1, kFloor1, "RedisLimiter 1 thread, sync", "sync"},
              {kSync8, kFloor16, "RedisLimiter 8 threads, pool_size 1", "16-deep"},
              {kAsync64, kFloor64, "RedisLimiter 64 async in flight, 1 conn", "64-deep"}};
  for (const auto& row : rows) {
    std::printf("  %-40s %9.0f ", row.name, med(row.phase, &Sample::rate));
    if (row.floor != kPhases) {
      std::printf("%7.2fx ", ratio(row.phase, row.floor));
    } else {
      std::printf("%8s ", "");
    }
    std::printf("%10.2f %10.2f ", med(row.phase, &Sample::client_us), med(row.phase, &Sample::server_us));
    if (row.floor != kPhases) {
      const double batch = med(row.phase, &Sample::batch);
      if (batch > 0) {
        std::printf("%6.1f", batch);
      } else {
        std::printf("%6s", "");  // raw hiredis: no write count
      }
      std::printf("  (vs the %s floor)\n", row.of);
    } else {
      std::printf("%6s\n", "");
    }
  }
  const auto s = limiter.stats();
  std::printf("  failures %llu, connects %llu\n", static_cast<unsigned long long>(s.failures),
              static_cast<unsigned long long>(s.connects));
  return s.failures == 0 ? 0 : 1;
}
