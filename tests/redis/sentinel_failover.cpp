// Sentinel failover under load (include/ratelimit/redis/README.md "Redis Sentinel"): 1 master, 1 replica and 3
// sentinels (quorum 2, down-after 500 ms) on loopback; two threads check fresh keys (FixedWindow, limit 1 per hour:
// each key is admitted once, ever) through a RedisLimiter in Sentinel mode; the master is killed (SIGKILL) under that
// load. Measures the time from the kill until checks are decided by the new master, and, once it serves, checks every
// key admitted before the kill again: a key admitted again lost its write (it reached the old master but not the
// replica: replication is asynchronous). Fails when checks do not recover within 30 s, a check crashes or hangs, or a
// key admitted more than 2 s before the kill is lost.
//
// Usage: ratelimit_sentinel_failover   (a heavy test: ctest -R SentinelFailover with RATELIMIT_HEAVY_TESTS)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "sentinel_support.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using ratelimit_test::wait_for;

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "SentinelFailover: FAILED: %s\n", why.c_str());
  std::exit(1);
}

// True when `c`'s INFO replication says its link to the master is up.
bool replica_synced(ratelimit::redis::engine::Connection& c) {
  return std::string(ratelimit::redis::engine::text(*c.command({"INFO", "replication"})))
             .find("master_link_status:up") != std::string::npos;
}

}  // namespace

int main() {
  const auto binary = ratelimit_test::find_redis_server();
  if (!binary) fail("no redis-server on PATH");
  ratelimit_test::RedisServer master(*binary);
  ratelimit_test::RedisServer replica(*binary, 0, true, {"--replicaof", "127.0.0.1", std::to_string(master.port())});
  {
    auto r = replica.admin();
    if (!wait_for([&] { return replica_synced(r); }, 10s)) fail("the replica did not sync with the master");
  }
  std::vector<std::unique_ptr<ratelimit_test::SentinelProcess>> sentinels;
  std::vector<int> ports;
  for (int i = 0; i < 3; ++i) {
    sentinels.push_back(
        std::make_unique<ratelimit_test::SentinelProcess>(*binary, master.port(), "mymaster", 2, 500ms));
    ports.push_back(sentinels.back()->port());
  }
  // Every sentinel knows the replica and the two other sentinels (they find each other through the master).
  for (auto& s : sentinels) {
    auto c = s->server().admin();
    if (!wait_for(
            [&] {
              const auto r = c.command({"SENTINEL", "master", "mymaster"});
              std::string flat;
              for (std::size_t i = 0; i + 1 < r->elements; i += 2) {
                flat += std::string(ratelimit::redis::engine::text(*r->element[i])) + "=" +
                        std::string(ratelimit::redis::engine::text(*r->element[i + 1])) + " ";
              }
              return flat.find("num-slaves=1 ") != std::string::npos &&
                     flat.find("num-other-sentinels=2 ") != std::string::npos;
            },
            15s)) {
      fail("the sentinels did not find the replica and each other");
    }
  }

  ratelimit::redis::RedisOptions o;
  o.key_prefix = "failover:";
  o.on_error = ratelimit::FailurePolicy::raise;
  o.command_timeout = 300ms;
  o.connect_timeout = 200ms;
  o.reconnect_backoff_max = 100ms;
  o.sentinel.check_interval = 500ms;
  o = ratelimit_test::sentinel_options(ports, "mymaster", o);
  ratelimit::redis::RedisLimiter<ratelimit::FixedWindow> limiter(ratelimit::FixedWindow{.limit = 1, .window = 1h}, o);
  auto* route = static_cast<ratelimit::redis::SentinelRoute*>(limiter.route().get());
  const std::string old_master = "127.0.0.1:" + std::to_string(master.port());
  if (!limiter.allow("warmup").allowed || route->master_address() != old_master) fail("no check on the first master");

  // Load: fresh keys, one check each. A key admitted is recorded with its time.
  struct Admitted {
    std::string key;
    Clock::time_point at;
  };
  std::mutex m;
  std::vector<Admitted> admitted;
  std::atomic<bool> stop{false};
  std::atomic<long> failures{0}, denied{0};
  std::atomic<Clock::rep> first_decided_after_kill{0};
  std::atomic<Clock::rep> kill_time{0};
  std::atomic<long> next{0};
  auto worker = [&] {
    while (!stop.load()) {
      const std::string key = "k" + std::to_string(next.fetch_add(1));
      const Clock::rep began = Clock::now().time_since_epoch().count();
      try {
        const auto d = limiter.allow(key);
        const auto now = Clock::now();
        if (d.allowed) {
          const std::lock_guard lock(m);
          admitted.push_back({key, now});
        } else {
          denied.fetch_add(1);  // a fresh key is never denied
        }
        // Decided by the new master: begun after the old one was dead (a reply in flight at the kill
        // may still arrive from the old one).
        const Clock::rep k = kill_time.load();
        Clock::rep expected = 0;
        if (k != 0 && began > k) {
          first_decided_after_kill.compare_exchange_strong(expected, now.time_since_epoch().count());
        }
      } catch (const ratelimit::BackendError&) {
        failures.fetch_add(1);
        std::this_thread::sleep_for(1ms);
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) threads.emplace_back(worker);
  std::this_thread::sleep_for(1500ms);
  const auto killed = Clock::now();
  master.kill_hard();  // SIGKILL, and reaped: dead from here on
  kill_time.store(Clock::now().time_since_epoch().count());
  const bool recovered = wait_for([&] { return first_decided_after_kill.load() != 0; }, 30s);
  std::this_thread::sleep_for(500ms);  // some load on the new master
  stop.store(true);
  for (auto& t : threads) t.join();
  if (!recovered) fail("checks were not decided again within 30 s of the kill");
  const auto recovery = Clock::time_point(Clock::duration(first_decided_after_kill.load())) - killed;
  const std::string new_master = route->master_address();
  if (new_master != "127.0.0.1:" + std::to_string(replica.port())) fail("the new master is " + new_master);
  if (denied.load() != 0) fail("fresh keys were denied");

  // Every key admitted before the kill, checked again on the new master: admitted again = its write lost.
  long before = 0, lost = 0;
  Clock::duration oldest_lost{0};
  for (const Admitted& a : admitted) {
    if (a.at >= killed) continue;
    ++before;
    bool again = false;
    for (int attempt = 0;; ++attempt) {
      try {
        again = limiter.allow(a.key).allowed;
        break;
      } catch (const ratelimit::BackendError& e) {
        if (attempt > 50) fail(std::string("re-check failed: ") + e.what());
        std::this_thread::sleep_for(20ms);
      }
    }
    if (again) {
      ++lost;
      if (killed - a.at > oldest_lost) oldest_lost = killed - a.at;
    }
  }
  const auto ms = [](Clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  const auto s = limiter.stats();
  std::printf(
      "SentinelFailover: master %s killed under load (2 threads, %ld checks before the kill); checks "
      "decided again by %s after %lld ms (%ld checks got the failure policy meanwhile); %ld of %ld keys "
      "admitted before the kill were admitted again (lost writes, the oldest %lld ms before the kill); "
      "%llu discoveries, %llu master change(s)\n",
      old_master.c_str(), before, new_master.c_str(), static_cast<long long>(ms(recovery)), failures.load(), lost,
      before, static_cast<long long>(ms(oldest_lost)), static_cast<unsigned long long>(s.master_discoveries),
      static_cast<unsigned long long>(s.master_changes));
  if (s.master_changes < 1) fail("no master change counted");
  if (oldest_lost > 2s) fail("a key admitted more than 2 s before the kill was lost");
  return 0;
}
