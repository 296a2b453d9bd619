// Checks per second over TLS against plain TCP, on one redis-server that listens on both (certificates
// made with the `openssl` command, include/ratelimit/redis/README.md "TLS"), in one run: for each of a synchronous
// check per thread (1 and 8 threads: each check one round trip, pipelined with the other threads') and allow_many
// batches of 64, TCP and TLS alternate, and the median of the repetitions is printed with the TLS/TCP ratio. Not a
// test.
//
// Usage: ratelimit_redis_tls_throughput [seconds per run] [repetitions]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "tls_support.hpp"

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

using Limiter = ratelimit::redis::RedisLimiter<ratelimit::Gcra>;

double checks_per_second(Limiter& l, int threads, std::size_t batch, double seconds) {
  std::atomic<long> checks{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const std::string key = "k" + std::to_string(t);
      // A batch of distinct keys (one key's calls keep their order, so they would not share a round trip).
      std::vector<std::string> names;
      for (std::size_t i = 0; i < batch; ++i) names.push_back(key + ":" + std::to_string(i));
      std::vector<ratelimit::redis::Request> many;
      for (const std::string& name : names) many.push_back({name, 1});
      long n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        if (batch <= 1) {
          (void)l.allow(key);
          ++n;
        } else {
          n += static_cast<long>(l.allow_many(many).size());
        }
      }
      checks.fetch_add(n);
    });
  }
  const auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (auto& t : pool) t.join();
  return static_cast<double>(checks.load()) / std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (!ratelimit::redis::kTlsAvailable) {
    std::fprintf(stderr, "ratelimit_redis_tls_throughput: built without TLS (OpenSSL)\n");
    return 2;
  }
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  const auto binary = ratelimit_test::find_redis_server();
  if (!binary) return 2;
  ratelimit_test::TlsFiles files;
  ratelimit_test::TlsRedisServer server(*binary, files);
  ratelimit::redis::RedisOptions tcp = server.server().options();
  tcp.key_prefix = "tlsbench:";
  tcp.command_timeout = 2s;
  tcp.pool_size = 2;
  const ratelimit::redis::RedisOptions tls = ratelimit_test::tls_options(tcp, server, files);
  // A policy that admits everything the run asks for: the cost measured is the round trip, not denials.
  const ratelimit::Gcra policy{.limit = 1'000'000, .period = 1s, .burst = 1'000'000};
  Limiter over_tcp(policy, tcp);
  Limiter over_tls(policy, tls);
  std::printf("RedisLimiter<Gcra>::allow over TCP and TLS (%s), one redis-server, %.1f s runs, median of %d\n",
              "TLS 1.3, P-256 certificate", seconds, reps);
  struct Case {
    const char* name;
    int threads;
    std::size_t batch;
  };
  for (const Case c :
       {Case{"1 thread, allow", 1, 1}, Case{"8 threads, allow", 8, 1}, Case{"1 thread, allow_many(64)", 1, 64}}) {
    std::vector<double> a, b;
    for (int r = 0; r < reps; ++r) {
      a.push_back(checks_per_second(over_tcp, c.threads, c.batch, seconds));
      b.push_back(checks_per_second(over_tls, c.threads, c.batch, seconds));
    }
    const double t = median(a), s = median(b);
    std::printf("  %-26s TCP %9.0f checks/s   TLS %9.0f checks/s   TLS/TCP %.2f\n", c.name, t, s, s / t);
  }
  const auto st = over_tls.stats();
  std::printf("  (TLS limiter: %llu failures, %llu connects)\n", static_cast<unsigned long long>(st.failures),
              static_cast<unsigned long long>(st.connects));
  return st.failures == 0 ? 0 : 1;
}
