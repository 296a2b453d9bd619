// bench_compare_redis: the Redis columns of the comparison (bench/README.md "Compare"): per policy, wall
// time per check on a hot key, the server's CPU per check (the delta of INFO's used_cpu_user and
// used_cpu_sys; other clients of a shared server count too) and round trips per check (the limiter's
// calls). Every key lives under a prefix of this run's own, deleted at the end.
//
//   RATELIMIT_COMPARE_REDIS=HOST:PORT|redis://user:password@host:port/db bench_compare_redis --out DIR
//       [--checks 20000]
// The server comes from the environment, not the command line, so its password is never in `ps`.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <ratelimit/redis.hpp>

#include "endpoint.hpp"
#include "format.hpp"
#include "options.hpp"
#include "output.hpp"

namespace {

using namespace bench::compare;
using namespace std::chrono_literals;
namespace rr = ratelimit::redis;

rr::ConnectionOptions connection_of(const Endpoint& e) {
  rr::ConnectionOptions o;
  o.host = e.host;
  o.port = e.port;
  o.user = e.user;
  o.password = e.password;
  o.database = e.database;
  o.tls.enabled = e.tls;
  o.connect_timeout = 2000ms;
  o.command_timeout = 2000ms;
  o.pool_size = 1;
  return o;
}

/// The field `name` of an INFO reply as a number (0 when absent).
double info_field(rr::engine::Connection& admin, const char* section, const std::string& name) {
  const rr::engine::Reply r = admin.command({"INFO", section});
  const std::string text(rr::engine::text(*r));
  const auto at = text.find("\n" + name + ":");
  return at == std::string::npos ? 0.0 : std::strtod(text.c_str() + at + name.size() + 2, nullptr);
}

double server_cpu_s(rr::engine::Connection& admin) {
  return info_field(admin, "cpu", "used_cpu_user") + info_field(admin, "cpu", "used_cpu_sys");
}

struct Measured {
  double ns = 0;
  double cpu_us = 0;
  double round_trips = 0;
};

/// `checks` checks of one key, every one admitted; throws when one fails or is denied.
template <ratelimit::Policy P>
Measured measure(const P& policy, const rr::ConnectionOptions& c, const std::string& prefix, std::int64_t checks,
                 rr::engine::Connection& admin) {
  rr::LimiterOptions l;
  l.key_prefix = prefix;
  l.on_error = ratelimit::FailurePolicy::fail_closed;
  rr::RedisLimiter limiter(policy, c, l);
  for (int i = 0; i < 100; ++i) limiter.allow("hot");  // loads the script, opens the connection
  const std::uint64_t calls = limiter.stats().calls;
  const double cpu = server_cpu_s(admin);
  std::int64_t denied = 0;
  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < checks; ++i) denied += limiter.allow("hot").allowed ? 0 : 1;
  const auto wall = std::chrono::steady_clock::now() - start;
  const double cpu_after = server_cpu_s(admin);
  if (limiter.stats().failures != 0) throw std::runtime_error("a Redis call failed during the run");
  if (denied != 0) throw std::runtime_error("a Redis check was denied; the cost measured the deny path");
  const double n = static_cast<double>(checks);
  return {static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(wall).count()) / n,
          (cpu_after - cpu) * 1e6 / n, static_cast<double>(limiter.stats().calls - calls) / n};
}

/// Deletes every key under `prefix` (SCAN, then UNLINK); returns how many.
std::int64_t delete_prefix(rr::engine::Connection& admin, const std::string& prefix) {
  std::int64_t deleted = 0;
  std::string cursor = "0";
  const std::string pattern = prefix + "*";
  do {
    const rr::engine::Reply r = admin.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) throw std::runtime_error("SCAN: unexpected reply");
    cursor = std::string(rr::engine::text(*r->element[0]));
    for (std::size_t i = 0; i < r->element[1]->elements; ++i) {
      const rr::engine::Reply gone = admin.command({"UNLINK", rr::engine::text(*r->element[1]->element[i])});
      deleted += gone->type == REDIS_REPLY_INTEGER ? gone->integer : 0;
    }
  } while (cursor != "0");
  return deleted;
}

/// A key prefix no other run shares: pid and 64 random bits.
std::string own_prefix() {
  std::random_device seed;
  const std::uint64_t bits = (static_cast<std::uint64_t>(seed()) << 32) ^ seed();
  char buf[80];
  std::snprintf(buf, sizeof buf, "ratelimit-compare-%d-%016llx:", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(bits));
  return buf;
}

int run(const Options& o) {
  const char* target = std::getenv("RATELIMIT_COMPARE_REDIS");
  if (target == nullptr || *target == '\0') throw std::invalid_argument("RATELIMIT_COMPARE_REDIS: not set");
  const Endpoint e = parse_endpoint(target);
  const rr::ConnectionOptions c = connection_of(e);
  const std::int64_t checks = o.integer("--checks", 20'000, 100, 100'000'000);
  const std::string prefix = own_prefix();
  rr::engine::Connection admin = rr::engine::Connection::open(c);
  const std::string dir = o.text("--out", ".");
  require_directory(dir);
  std::vector<std::pair<std::string, Measured>> rows;
  try {  // Every check admitted: the admitting path, as in memory (Redis ticks are microseconds).
    rows.emplace_back("fixed window", measure(ratelimit::FixedWindow{1'000'000'000, 1s}, c, prefix, checks, admin));
    rows.emplace_back("sliding window log",
                      measure(ratelimit::SlidingWindowLog{1'000'000, 10us}, c, prefix, checks, admin));
    rows.emplace_back("sliding window counter",
                      measure(ratelimit::SlidingWindowCounter{1'000'000'000, 1s}, c, prefix, checks, admin));
    rows.emplace_back("token bucket",
                      measure(ratelimit::TokenBucket{1'000'000, 1'000'000, 1s}, c, prefix, checks, admin));
    rows.emplace_back("GCRA", measure(ratelimit::Gcra{1'000'000, 1s, 1'000'000}, c, prefix, checks, admin));
  } catch (...) {
    delete_prefix(admin, prefix);
    throw;
  }
  const std::int64_t deleted = delete_prefix(admin, prefix);
  std::ostringstream out;
  out << "policy,ns_per_check,redis_cpu_us_per_check,round_trips_per_check\n";
  for (const auto& [name, m] : rows) {
    out << name << ',' << decimal(m.ns) << ',' << decimal(m.cpu_us) << ',' << decimal(m.round_trips) << '\n';
  }
  write_text(dir + "/redis.csv", out.str());
  std::printf("redis: %s, %lld checks per policy on one key; deleted the run's %lld keys (prefix %s)\n",
              e.shown().c_str(), static_cast<long long>(checks), static_cast<long long>(deleted), prefix.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return guarded_main("bench_compare_redis", [&] { return run(Options(argc, argv, {"--out", "--checks"})); });
}
