// The Redis engine against raw hiredis, in one run on one redis-server it starts itself (README "Redis
// engine", measured): checks per second of
//   raw hiredis EVALSHA, synchronous                      (the sync floor)
//   raw hiredis, 16-deep and 64-deep pipelines            (the pipeline floors)
//   RedisLimiter::allow, 1 thread                         vs the sync floor
//   RedisLimiter::allow, 8 threads, pool_size = 1         vs the 16-deep floor
//   RedisLimiter::check_async, 64 in flight, 1 connection vs the 64-deep floor
// Each phase runs `seconds` and the whole set `repetitions` times, interleaved; medians are printed.
// Usage: ratelimit_redis_engine_throughput [seconds per phase = 1] [repetitions = 5]
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
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

/// Raw hiredis: `depth` commands appended, then their replies read, for `seconds`.
double raw(int port, const std::vector<std::string>& args, int depth, double seconds) {
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
  while (Clock::now() < end) {
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
  ratelimit::redis::RedisLimiter limiter(policy, o);
  (void)limiter.allow("k");  // loads the script

  // The very command the limiter sends: EVALSHA <sha> 1 <key> "" <cost> <mode> <B> <T> <tau>.
  const auto& rules = limiter.rules();
  const std::vector<std::string> args{"EVALSHA",
                                      std::string(limiter.script().sha1),
                                      "1",
                                      limiter.redis_key("k"),
                                      "",
                                      "1",
                                      "0",
                                      std::to_string(rules.limit()),
                                      std::to_string(rules.emission_interval()),
                                      std::to_string(rules.tolerance())};

  std::vector<double> floor1, floor16, floor64, sync1, sync8, async64;
  for (int r = 0; r < repetitions; ++r) {
    floor1.push_back(raw(server.port(), args, 1, seconds));
    sync1.push_back(sync_threads(limiter, 1, seconds));
    floor16.push_back(raw(server.port(), args, 16, seconds));
    sync8.push_back(sync_threads(limiter, 8, seconds));
    floor64.push_back(raw(server.port(), args, 64, seconds));
    async64.push_back(async_in_flight(limiter, 64, seconds));
    std::fprintf(stderr, "rep %d: %.0f %.0f | %.0f %.0f | %.0f %.0f\n", r + 1, floor1.back(), sync1.back(),
                 floor16.back(), sync8.back(), floor64.back(), async64.back());
  }
  const double f1 = median(floor1), f16 = median(floor16), f64 = median(floor64);
  const double s1 = median(sync1), s8 = median(sync8), a64 = median(async64);
  std::printf("GCRA on one local redis-server, %.1f s per phase, median of %d repetitions (checks/s)\n", seconds,
              repetitions);
  std::printf("  raw hiredis EVALSHA, synchronous          %9.0f\n", f1);
  std::printf("  raw hiredis, 16-deep pipeline             %9.0f\n", f16);
  std::printf("  raw hiredis, 64-deep pipeline             %9.0f\n", f64);
  std::printf("  RedisLimiter 1 thread, sync               %9.0f   %.2fx the sync floor\n", s1, s1 / f1);
  std::printf("  RedisLimiter 8 threads, pool_size 1       %9.0f   %.2fx the 16-deep floor\n", s8, s8 / f16);
  std::printf("  RedisLimiter 64 async in flight, 1 conn   %9.0f   %.2fx the 64-deep floor\n", a64, a64 / f64);
  const auto s = limiter.stats();
  std::printf("  failures %llu, connects %llu\n", static_cast<unsigned long long>(s.failures),
              static_cast<unsigned long long>(s.connects));
  return s.failures == 0 ? 0 : 1;
}
