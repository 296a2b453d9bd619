// Throughput of the Redis backend, measured against redis-benchmark in the same run on the same server:
//   one RedisLimiter thread doing allow() (GCRA, server time)     vs  redis-benchmark -c 1 EVALSHA <same script, same args>
//   allow_many() batches of 16 and 64                             vs  redis-benchmark -c 1 -P 16 / -P 64
// Usage: ratelimit_redis_throughput [host:port] [seconds per run]   (redis-benchmark must be on PATH)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ratelimit/redis.hpp>

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

template <class Fn>
double per_second(double seconds, long checks_per_call, Fn&& fn) {
  long checks = 0;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    for (int i = 0; i < 64; ++i) fn();
    checks += 64 * checks_per_call;
  }
  return static_cast<double>(checks) / std::chrono::duration<double>(Clock::now() - start).count();
}

double redis_benchmark(const std::string& host, int port, long requests, int pipeline, const std::string& args) {
  const std::string cmd = "redis-benchmark -h " + host + " -p " + std::to_string(port) + " -c 1 -P " +
                          std::to_string(pipeline) + " -n " + std::to_string(requests) + " -q " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  ::pclose(p);
  // "-q" prints "<command>: <rps> requests per second, p50=..."; the last ": " before the number.
  const auto rps = out.rfind(" requests per second");
  if (rps == std::string::npos) {
    std::fprintf(stderr, "redis-benchmark output not understood:\n%s\n", out.c_str());
    return -1;
  }
  const auto colon = out.rfind(": ", rps);
  return std::atof(out.substr(colon + 2, rps - colon - 2).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string where = argc > 1 ? argv[1] : "127.0.0.1:6379";
  const double seconds = argc > 2 ? std::atof(argv[2]) : 3.0;
  ratelimit::redis::RedisOptions o;
  o.host = where.substr(0, where.rfind(':'));
  o.port = std::stoi(where.substr(where.rfind(':') + 1));
  o.key_prefix = "bench:";
  o.on_error = ratelimit::FailurePolicy::raise;
  const ratelimit::Gcra policy{.limit = 1'000'000, .period = 1s, .burst = 1000};
  ratelimit::redis::RedisLimiter limiter(policy, o);
  limiter.reset("k");

  const double single = per_second(seconds, 1, [&] { (void)limiter.allow("k"); });
  std::vector<ratelimit::redis::Request> b16(16, {"k", 1});
  std::vector<ratelimit::redis::Request> b64(64, {"k", 1});
  const double many16 = per_second(seconds, 16, [&] { (void)limiter.allow_many(b16); });
  const double many64 = per_second(seconds, 64, [&] { (void)limiter.allow_many(b64); });

  // The very command RedisLimiter sends: EVALSHA <sha> 1 <key> "" <cost> <mode> <B> <T>.
  const auto& rules = limiter.rules();
  const std::string args = "EVALSHA " + std::string(limiter.script().sha1) + " 1 '" + limiter.redis_key("k") +
                           "' '' 1 0 " + std::to_string(rules.limit()) + " " +
                           std::to_string(rules.emission_interval());
  const auto n = static_cast<long>(single * seconds);
  const double bench1 = redis_benchmark(o.host, o.port, n, 1, args);
  const double bench16 = redis_benchmark(o.host, o.port, static_cast<long>(many16 * seconds), 16, args);
  const double bench64 = redis_benchmark(o.host, o.port, static_cast<long>(many64 * seconds), 64, args);

  std::printf("GCRA on Redis at %s, %.1f s per run\n", where.c_str(), seconds);
  std::printf("  RedisLimiter::allow, 1 thread        %10.0f checks/s\n", single);
  std::printf("  redis-benchmark -c 1 EVALSHA          %10.0f req/s     ratio %.2f\n", bench1, single / bench1);
  std::printf("  RedisLimiter::allow_many, batch 16   %10.0f checks/s\n", many16);
  std::printf("  redis-benchmark -c 1 -P 16 EVALSHA    %10.0f req/s     ratio %.2f\n", bench16, many16 / bench16);
  std::printf("  RedisLimiter::allow_many, batch 64   %10.0f checks/s\n", many64);
  std::printf("  redis-benchmark -c 1 -P 64 EVALSHA    %10.0f req/s     ratio %.2f\n", bench64, many64 / bench64);
  const auto s = limiter.stats();
  std::printf("  failures %llu, script reloads %llu\n", static_cast<unsigned long long>(s.failures),
              static_cast<unsigned long long>(s.script_reloads));
  return s.failures == 0 ? 0 : 1;
}
