// The fault table (include/ratelimit/README.md "Hostile input and faults"): each fault is injected into a real
// redis-server on loopback while two threads check at full speed through one RedisLimiter (default timeouts and
// backoff, on_error = fail_closed). Each row asserts: the fault was seen (or, for SCRIPT FLUSH, invisible); every call
// returned within connect_timeout + command_timeout (so no thread hangs); checks succeed again within 1 s after the
// fault ends; the limiter never holds more than pool_size connections and, once destroyed, none (INFO clients). Memory
// leaks are LeakSanitizer's job in the ASan run. The table is printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "../support/sanitizers.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ratelimit::redis::RedisLimiter;
using ratelimit_test::RedisServer;

constexpr std::size_t kPool = 2;
constexpr auto kFailureRetry = 7777ms;  // marks a fail_closed decision (a working Redis always admits here)

struct Row {
  std::string fault;
  std::string seen;  // what the failing calls got
  std::uint64_t failures = 0;
  double max_call_ms = 0;
  double recovery_ms = 0;
  long clients_after = -1;
  bool ok = false;
};

struct Scenario {
  std::string name;
  std::function<void(RedisServer&, ratelimit::redis::RedisOptions&)> setup = [](auto&, auto&) {};
  std::function<void(RedisServer&)> inject;
  std::function<void(RedisServer&)> restore;
  bool fails = true;  // false: the fault must be invisible (no failure decision at all)
  std::function<void(RedisServer&)> cleanup = [](RedisServer&) {};  // after the limiter is gone
  std::chrono::milliseconds duration = 600ms;
};

class FaultTable : public testing::Test {
 protected:
  void SetUp() override { RATELIMIT_REQUIRE_REDIS(); }
};

Row run(const Scenario& sc) {
  Row row;
  row.fault = sc.name;
  auto server = std::make_unique<RedisServer>(ratelimit_test::redis_server_binary());
  ratelimit::redis::RedisOptions o = server->options();
  o.key_prefix = ratelimit_test::unique_prefix();
  o.on_error = ratelimit::FailurePolicy::fail_closed;
  o.failure_retry_after = kFailureRetry;
  o.pool_size = kPool;
  sc.setup(*server, o);
  const auto call_bound = o.connect_timeout + o.command_timeout;

  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> fault_end_ns{INT64_MAX};
  struct Worker {
    std::atomic<std::uint64_t> failures{0};  // also read by the main thread during the run
    std::uint64_t calls = 0;
    Clock::duration max_call{};
    Clock::time_point last_failure{};
  };
  std::vector<Worker> workers(kPool);
  {
    RedisLimiter limiter(ratelimit::FixedWindow{.limit = std::int64_t{1} << 50, .window = 1s}, o);
    auto work = [&](std::size_t id) {
      Worker& w = workers[id];
      const std::string key = "worker" + std::to_string(id);
      while (!stop.load()) {
        const auto start = Clock::now();
        const ratelimit::Decision d = limiter.allow(key);
        const auto end = Clock::now();
        ++w.calls;
        w.max_call = std::max(w.max_call, end - start);
        if (!d.allowed) {
          EXPECT_EQ(d.retry_after, kFailureRetry) << sc.name << ": a denial that is not the failure policy";
          ++w.failures;
          w.last_failure = end;
        }
      }
    };
    std::vector<std::future<void>> threads;
    for (std::size_t i = 0; i < kPool; ++i) threads.push_back(std::async(std::launch::async, work, i));
    std::this_thread::sleep_for(200ms);  // warm: connections open, script loaded
    const auto warm_failures = workers[0].failures + workers[1].failures;
    EXPECT_EQ(warm_failures, 0u) << sc.name << ": failures before the fault";
    const auto before = limiter.stats();

    sc.inject(*server);
    std::this_thread::sleep_for(sc.duration);
    sc.restore(*server);
    const auto restored = Clock::now();
    fault_end_ns = restored.time_since_epoch().count();
    std::this_thread::sleep_for(1500ms);
    stop = true;
    for (auto& t : threads) {
      if (t.wait_for(10s) != std::future_status::ready) {
        std::fprintf(stderr, "%s: a checking thread hangs\n", sc.name.c_str());
        std::abort();
      }
    }
    const auto after = limiter.stats();
    Clock::time_point last_failure{};
    for (const Worker& w : workers) {
      row.failures += w.failures;
      row.max_call_ms = std::max(row.max_call_ms, std::chrono::duration<double, std::milli>(w.max_call).count());
      last_failure = std::max(last_failure, w.last_failure);
    }
    row.recovery_ms =
        last_failure > restored ? std::chrono::duration<double, std::milli>(last_failure - restored).count() : 0;
    EXPECT_EQ(after.failures - before.failures, row.failures) << sc.name << ": stats disagree with the decisions";
    std::string seen;
    if (after.io_errors > before.io_errors) seen += "io ";
    if (after.timeouts > before.timeouts) seen += "timeout ";
    if (after.reply_errors > before.reply_errors) seen += "reply ";
    if (after.protocol_errors > before.protocol_errors) seen += "protocol ";
    if (after.short_circuited > before.short_circuited) seen += "circuit_open ";
    if (after.script_reloads > before.script_reloads) seen += "NOSCRIPT->EVAL ";
    row.seen = seen.empty() ? "-" : seen.substr(0, seen.size() - 1);
    EXPECT_LE(after.connects - after.dropped_connections, kPool) << sc.name << ": more connections than the pool";
    // Each connection checked for this many calls at least once after recovery.
    EXPECT_GT(workers[0].calls + workers[1].calls, row.failures + 100) << sc.name << ": too few checks";
  }
  sc.cleanup(*server);
  // The limiter is gone: the server must see only the admin connection again.
  auto admin = server->admin();
  const auto deadline = Clock::now() + 2s;
  do {
    row.clients_after = RedisServer::connected_clients(admin);
    if (row.clients_after == 1) break;
    std::this_thread::sleep_for(10ms);
  } while (Clock::now() < deadline);

  // A call may outlive connect + command timeout by scheduling slack only: a hang would be seconds.
  const double bound_ms =
      std::chrono::duration<double, std::milli>(call_bound + ratelimit_test::kSchedulingSlack).count();
  row.ok = (sc.fails ? row.failures > 0 : row.failures == 0) && row.max_call_ms <= bound_ms &&
           row.recovery_ms <= 1000 && row.clients_after == 1;
  EXPECT_TRUE(sc.fails ? row.failures > 0 : row.failures == 0) << sc.name << ": failures " << row.failures;
  EXPECT_LE(row.max_call_ms, bound_ms) << sc.name << ": a call outlived connect + command timeout";
  EXPECT_LE(row.recovery_ms, 1000) << sc.name << ": not recovered within 1 s after the fault ended";
  EXPECT_EQ(row.clients_after, 1) << sc.name << ": connections left open";
  return row;
}

void config(RedisServer& s, std::initializer_list<std::string_view> args) {
  auto admin = s.admin();
  const auto r = admin.command(args);
  if (ratelimit::redis::engine::is_error(*r)) throw std::runtime_error(std::string(ratelimit::redis::engine::text(*r)));
}

// The admin connection of a password-protected server (connected before the password was set).
std::unique_ptr<ratelimit::redis::engine::Connection>& kept_admin() {
  static std::unique_ptr<ratelimit::redis::engine::Connection> c;
  return c;
}

std::unique_ptr<RedisServer>& replica_source() {
  static std::unique_ptr<RedisServer> s;
  return s;
}

std::vector<Scenario> scenarios() {
  std::vector<Scenario> all;
  all.push_back({.name = "SIGKILL under load, restarted after 600 ms",
                 .inject = [](RedisServer& s) { s.kill_hard(); },
                 .restore = [](RedisServer& s) { s.start(); }});
  all.push_back({.name = "restart (SIGTERM, start at once)",
                 .inject = [](RedisServer& s) { s.restart(); },
                 .restore = [](RedisServer&) {},
                 .fails = true,
                 .duration = 0ms});
  all.push_back({.name = "SCRIPT FLUSH",
                 .inject =
                     [](RedisServer& s) {
                       config(s, {"SCRIPT", "FLUSH"});
                     },
                 .restore = [](RedisServer&) {},
                 .fails = false});
  all.push_back({.name = "CLIENT PAUSE WRITE past command_timeout",
                 .inject =
                     [](RedisServer& s) {
                       config(s, {"CLIENT", "PAUSE", "100000", "WRITE"});
                     },
                 .restore =
                     [](RedisServer& s) {
                       config(s, {"CLIENT", "UNPAUSE"});
                     }});
  all.push_back({.name = "maxmemory 1 byte, noeviction",
                 .inject =
                     [](RedisServer& s) {
                       config(s, {"CONFIG", "SET", "maxmemory-policy", "noeviction"});
                       config(s, {"CONFIG", "SET", "maxmemory", "1"});
                     },
                 .restore =
                     [](RedisServer& s) {
                       config(s, {"CONFIG", "SET", "maxmemory", "0"});
                     }});
  all.push_back({.name = "wrong password (rotated, clients killed)",
                 .setup =
                     [](RedisServer& s, ratelimit::redis::RedisOptions& o) {
                       kept_admin() = std::make_unique<ratelimit::redis::engine::Connection>(s.admin());
                       kept_admin()->command({"CONFIG", "SET", "requirepass", "good"});
                       o.password = "good";
                     },
                 .inject =
                     [](RedisServer&) {
                       kept_admin()->command({"CONFIG", "SET", "requirepass", "rotated"});
                       kept_admin()->command({"CLIENT", "KILL", "TYPE", "normal"});
                     },
                 .restore =
                     [](RedisServer&) {
                       kept_admin()->command({"CONFIG", "SET", "requirepass", "good"});
                     },
                 .cleanup =
                     [](RedisServer&) {
                       kept_admin()->command({"CONFIG", "SET", "requirepass", ""});
                       kept_admin().reset();
                     }});
  all.push_back({.name = "maxclients reached (clients killed)",
                 .inject =
                     [](RedisServer& s) {
                       kept_admin() = std::make_unique<ratelimit::redis::engine::Connection>(s.admin());
                       kept_admin()->command({"CONFIG", "SET", "maxclients", "1"});
                       kept_admin()->command({"CLIENT", "KILL", "TYPE", "normal"});
                     },
                 .restore =
                     [](RedisServer&) {
                       kept_admin()->command({"CONFIG", "SET", "maxclients", "1000"});
                       kept_admin().reset();
                     }});
  all.push_back({.name = "read-only replica (REPLICAOF)",
                 .inject =
                     [](RedisServer& s) {
                       replica_source() = std::make_unique<RedisServer>(ratelimit_test::redis_server_binary());
                       config(s, {"REPLICAOF", "127.0.0.1", std::to_string(replica_source()->port())});
                     },
                 .restore =
                     [](RedisServer& s) {
                       config(s, {"REPLICAOF", "NO", "ONE"});
                       replica_source().reset();
                     }});
  return all;
}

// One test runs every row and prints the table (stdout, and fault_table.md in the working directory, which
// under ctest is the build tree).
TEST_F(FaultTable, EveryFaultRecoversWithinOneSecond) {
  std::vector<Row> rows;
  for (const Scenario& sc : scenarios()) {
    SCOPED_TRACE(sc.name);
    rows.push_back(run(sc));
  }
  std::string out =
      "| fault | failing calls got | failure decisions | longest call (ms) | recovery after fault end (ms) | "
      "connections left | result |\n|---|---|---|---|---|---|---|\n";
  char line[512];
  for (const Row& r : rows) {
    std::snprintf(line, sizeof line, "| %s | %s | %llu | %.1f | %.0f | %ld | %s |\n", r.fault.c_str(), r.seen.c_str(),
                  static_cast<unsigned long long>(r.failures), r.max_call_ms, r.recovery_ms, r.clients_after - 1,
                  r.ok ? "green" : "RED");
    out += line;
  }
  std::printf("\n%s\n", out.c_str());
  if (std::FILE* f = std::fopen("fault_table.md", "w")) {
    std::fputs(out.c_str(), f);
    std::fclose(f);
  }
}

}  // namespace
