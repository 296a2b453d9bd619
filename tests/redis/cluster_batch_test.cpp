// Cluster batches under faults and contention: a batch written to connections the servers closed
// fails by the failure policy instead of killing the process with SIGPIPE, and batches naming the
// same nodes in opposite orders never wait for each other.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "cluster_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::FailurePolicy;
using ratelimit::redis::RedisLimiter;
using ratelimit::redis::Request;
using ratelimit_test::RedisCluster;
using ratelimit_test::shared_cluster;

// The batches of the SIGPIPE test: 0 when every decision of the batch on killed connections was the failure
// policy's, the failures were counted as io, and the next batch succeeded; another code names what went wrong.
// The limiter lives in this function, so its threads are joined before the child exits (ThreadSanitizer
// reports a thread still running at exit as leaked).
int run_on_killed_connections(const RedisCluster& cluster) {
  auto o = cluster.options();
  o.on_error = FailurePolicy::fail_closed;
  o.command_timeout = 2s;  // each batch's deadline: 3,000 checks of 1 KB keys take over 100 ms on a loaded machine
  o.key_prefix = "sigpipe:" + std::to_string(::getpid()) + ":";
  o.max_key_bytes = 2000;
  RedisLimiter limiter(ratelimit::Gcra{.limit = 1000, .period = 1s, .burst = 1000}, o);
  const std::string pad(1000, 'k');
  std::vector<std::string> keys;
  for (int i = 0; i < 30'000; ++i) keys.push_back(pad + std::to_string(i));
  auto batch = [&](std::size_t n) {
    std::vector<Request> requests;
    for (std::size_t i = 0; i < n; ++i) requests.push_back({keys[i], 1});
    return limiter.allow_many(requests);
  };
  for (const Decision& d : batch(3000)) {  // one connection per master, warm
    if (!d.allowed) return 12;
  }
  if (limiter.stats().failures != 0) return 13;
  for (const int port : cluster.master_ports()) {
    auto admin = RedisCluster::admin(port);
    (void)admin.command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  }
  for (const Decision& d : batch(keys.size())) {
    if (d.allowed || d.retry_after != o.failure_retry_after) return 14;  // fail_closed on every request
  }
  const auto s = limiter.stats();
  if (s.io_errors == 0 || s.failures != s.io_errors) return 15;
  for (const Decision& d : batch(100)) {  // new connections: working again
    if (!d.allowed) return 16;
  }
  std::fprintf(stderr, "survived: %llu io failures\n", static_cast<unsigned long long>(s.io_errors));
  return 0;
}

// The body of the SIGPIPE test, run in a child process whose SIGPIPE disposition is the default (so a
// write to a reset socket outside the library's guard kills it); exits with the batches' code.
[[noreturn]] void batch_on_killed_connections(const RedisCluster& cluster) {
  struct sigaction now {};
  if (::sigaction(SIGPIPE, nullptr, &now) != 0 || now.sa_handler != SIG_DFL) ::_exit(10);
  sigset_t blocked;
  sigemptyset(&blocked);
  if (::pthread_sigmask(SIG_SETMASK, nullptr, &blocked) != 0 || sigismember(&blocked, SIGPIPE) == 1) ::_exit(11);
  ::_exit(run_on_killed_connections(cluster));
}

// A batch far larger than the socket buffers, written to connections every node has just closed: the
// write meets a reset socket. It must give io failures (fail_closed denials), not SIGPIPE (exit 141).
// Run in a child with SIGPIPE at its default disposition, whatever this process's is.
TEST(ClusterBatch, WriteToClosedConnectionsFailsInsteadOfRaisingSigpipe) {
  RATELIMIT_REQUIRE_CLUSTER();
  const RedisCluster& cluster = *shared_cluster();
  GTEST_FLAG_SET(death_test_style, "fast");  // the child uses this process's cluster
  EXPECT_EXIT(
      {
        ::signal(SIGPIPE, SIG_DFL);
        sigset_t pipe;
        sigemptyset(&pipe);
        sigaddset(&pipe, SIGPIPE);
        ::pthread_sigmask(SIG_UNBLOCK, &pipe, nullptr);
        batch_on_killed_connections(cluster);
      },
      testing::ExitedWithCode(0), "survived");
}

// Two keys on different masters; half the threads send allow_many({a, b}), half {b, a}, with one
// connection per node: a healthy cluster must answer every check (a batch that held one node's only
// connection while waiting for the other's would time out against its mirror image).
TEST(ClusterBatch, OppositeNodeOrdersNeverTimeOut) {
  RATELIMIT_REQUIRE_CLUSTER();
  auto o = shared_cluster()->options();
  o.on_error = FailurePolicy::fail_closed;
  o.key_prefix = ratelimit_test::unique_prefix();
  o.pool_size = 1;
  o.command_timeout = 300ms;  // the wait a lock-order inversion costs; long enough for sanitizer builds
  RedisLimiter limiter(ratelimit::Gcra{.limit = 1'000'000, .period = 1s, .burst = 1'000'000}, o);
  std::map<std::string, std::string> by_owner;
  for (int i = 0; by_owner.size() < 2 && i < 1000; ++i) {
    std::string k = "k";
    k += std::to_string(i);
    (void)limiter.peek(k);  // loads the map
    by_owner.emplace(limiter.cluster()->owner_of(ratelimit::redis::engine::detail::key_slot(limiter.redis_key(k))), k);
  }
  ASSERT_EQ(by_owner.size(), 2u);
  const std::string a = by_owner.begin()->second;
  const std::string b = std::next(by_owner.begin())->second;
  const std::vector<Request> forward{{a, 1}, {b, 1}};
  const std::vector<Request> backward{{b, 1}, {a, 1}};
  std::atomic<bool> stop{false};
  std::atomic<long> checks{0}, denied{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      while (!stop.load()) {
        for (const Decision& d : limiter.allow_many(t == 0 ? forward : backward)) {
          ++checks;
          if (!d.allowed) ++denied;
        }
      }
    });
  }
  std::this_thread::sleep_for(2s);
  stop = true;
  for (auto& t : threads) t.join();
  const auto s = limiter.stats();
  std::printf("opposite orders, pool_size 1, 2 threads, 2 s: %ld checks, %llu failures (%llu timeouts)\n",
              checks.load(), static_cast<unsigned long long>(s.failures), static_cast<unsigned long long>(s.timeouts));
  EXPECT_EQ(s.failures, 0u);
  EXPECT_EQ(denied.load(), 0);
  EXPECT_GT(checks.load(), 100);
}

// allow_many with two requests per key, [k cost 3, k cost 1] against FixedWindow{3, 1 h}, while every
// master's script cache is flushed every 2 ms and another limiter keeps re-caching the script: a
// request that met NOSCRIPT must not be re-sent after a later request of the same key already ran (the
// pair would come out reversed: cost 3 denied, cost 1 admitted).
TEST(ClusterBatch, NoscriptKeepsTheOrderOfRequestsOnOneKey) {
  RATELIMIT_REQUIRE_CLUSTER();
  const RedisCluster& cluster = *shared_cluster();
  ratelimit::ManualClock clock;
  const auto o = ratelimit_test::cluster_client_options(cluster);
  RedisLimiter l(ratelimit::FixedWindow{.limit = 3, .window = 1h}, o, clock);
  auto o2 = ratelimit_test::cluster_client_options(cluster);
  RedisLimiter recacher(ratelimit::FixedWindow{.limit = 3, .window = 1h}, o2, clock);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    std::vector<ratelimit::redis::engine::Connection> admins;
    for (const int port : cluster.master_ports()) admins.push_back(RedisCluster::admin(port));
    while (!stop.load()) {
      for (auto& a : admins) (void)a.command({"SCRIPT", "FLUSH"});
      std::this_thread::sleep_for(2ms);
    }
  });
  threads.emplace_back([&] {
    for (long i = 0; !stop.load(); ++i) (void)recacher.allow(std::string("r").append(std::to_string(i % 64)));
  });
  long reversed = 0, pairs = 0;
  for (int batch = 0; batch < 20; ++batch) {
    std::vector<std::string> keys;
    for (int i = 0; i < 2000; ++i)
      keys.push_back(std::string("b").append(std::to_string(batch)).append(":").append(std::to_string(i)));
    std::vector<Request> requests;
    for (const std::string& k : keys) {
      requests.push_back({k, 3});
      requests.push_back({k, 1});
    }
    const auto d = l.allow_many(requests);
    for (std::size_t i = 0; i < d.size(); i += 2) {
      ++pairs;
      if (!d[i].allowed && d[i + 1].allowed) ++reversed;
    }
  }
  stop = true;
  for (auto& t : threads) t.join();
  const auto s = l.stats();
  std::printf("%ld pairs, %ld reversed, %llu NOSCRIPT answered by EVAL\n", pairs, reversed,
              static_cast<unsigned long long>(s.script_reloads));
  EXPECT_EQ(reversed, 0);
  EXPECT_GT(s.script_reloads, 0u);
  EXPECT_EQ(s.failures, 0u);
}

}  // namespace
