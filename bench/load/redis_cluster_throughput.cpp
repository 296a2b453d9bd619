// Pipelined checks per second against one Redis node and against a 3-master Redis Cluster (3 replicas),
// same machine, same run: RedisLimiter::allow_many (GCRA, server time), batches of 64 over 10,000 keys,
// from `threads` threads. Also prints the CPU time the client and the servers used, which says what
// limits the numbers (on a small machine: the cores, shared by every server and the client).
// Usage: ratelimit_redis_cluster_throughput [seconds per run = 3] [threads = 2] [rounds = 2]
// (starts its own servers on 127.0.0.1; needs redis-server and redis-cli on PATH)
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "redis_cluster.hpp"
#include "redis_server.hpp"

using Clock = std::chrono::steady_clock;

namespace {

double process_cpu_seconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  std::istringstream s(line.substr(line.rfind(')') + 2));  // fields after "(comm)"; state is field 3
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && s >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double own_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct Result {
  double checks_per_s = 0;
  double client_cpu = 0;  // cores
  double server_cpu = 0;  // cores, all servers
  unsigned long long failures = 0;
};

Result measure(ratelimit::redis::RedisOptions o, const std::vector<pid_t>& servers, double seconds, int threads) {
  o.key_prefix = "bench:";
  o.on_error = ratelimit::FailurePolicy::fail_closed;
  o.pool_size = static_cast<std::size_t>(threads);
  o.command_timeout = std::chrono::milliseconds(2000);
  ratelimit::redis::RedisLimiter limiter(ratelimit::Gcra{.limit = 1'000'000, .period = std::chrono::seconds(1), .burst = 1000}, o);
  std::vector<std::string> keys;
  for (int i = 0; i < 10000; ++i) keys.push_back("user:" + std::to_string(i));
  // Warm-up: connections, slot map, scripts on every node.
  std::vector<ratelimit::redis::Request> warm;
  for (int i = 0; i < 64; ++i) warm.push_back({keys[static_cast<std::size_t>(i)], 1});
  for (int i = 0; i < 20; ++i) (void)limiter.allow_many(warm);

  std::atomic<long> checks{0};
  std::atomic<bool> stop{false};
  double server_before = 0;
  for (const pid_t p : servers) server_before += process_cpu_seconds(p);
  const double client_before = own_cpu_seconds();
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<ratelimit::redis::Request> batch(64);
      std::size_t next = static_cast<std::size_t>(t) * 5000;
      long mine = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        for (auto& r : batch) r = {keys[next++ % keys.size()], 1};
        (void)limiter.allow_many(batch);
        mine += 64;
      }
      checks += mine;
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : pool) th.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  double server_after = 0;
  for (const pid_t p : servers) server_after += process_cpu_seconds(p);
  Result r;
  r.checks_per_s = static_cast<double>(checks.load()) / elapsed;
  r.client_cpu = (own_cpu_seconds() - client_before) / elapsed;
  r.server_cpu = (server_after - server_before) / elapsed;
  r.failures = limiter.stats().failures;
  return r;
}

void print(const char* name, const Result& r) {
  std::printf("  %-30s %10.0f checks/s   CPU: client %.2f cores, servers %.2f cores   failures %llu\n", name,
              r.checks_per_s, r.client_cpu, r.server_cpu, r.failures);
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 3.0;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 2;
  const auto server_bin = ratelimit_test::find_redis_server();
  const auto cli = ratelimit_test::find_redis_cli();
  if (!server_bin || !cli) {
    std::fprintf(stderr, "needs redis-server and redis-cli on PATH\n");
    return 2;
  }
  ratelimit_test::RedisServer single(*server_bin);
  ratelimit_test::RedisCluster cluster(*server_bin, *cli, 3, 1, 5000);
  std::vector<pid_t> cluster_pids;
  for (const auto& s : cluster.servers()) cluster_pids.push_back(s->pid());

  std::printf("allow_many, batch 64, %d threads, GCRA, server time, 10,000 keys; %.1f s per run; %u cores\n", threads,
              seconds, std::thread::hardware_concurrency());
  double best_single = 0, best_cluster = 0;
  unsigned long long failures = 0;
  for (int round = 0; round < rounds; ++round) {
    const Result a = measure(single.options(), {single.pid()}, seconds, threads);
    print("1 node", a);
    const Result b = measure(cluster.options(), cluster_pids, seconds, threads);
    print("cluster, 3 masters + 3 replicas", b);
    best_single = std::max(best_single, a.checks_per_s);
    best_cluster = std::max(best_cluster, b.checks_per_s);
    failures += a.failures + b.failures;
  }
  std::printf("best: 1 node %.0f checks/s, cluster %.0f checks/s, ratio cluster/1 node %.2f\n", best_single, best_cluster,
              best_cluster / best_single);
  return failures == 0 ? 0 : 1;
}
