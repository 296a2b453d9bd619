// How a pool chooses its shared connection (include/ratelimit/redis/README.md "Redis engine" and "Sizing the
// pool"): callers join the batch forming on the first connection, so pipelines run deep; the next connection is
// used only when one is full (`max_in_flight` outstanding) or its pipeline is at the spill depth. Connections are
// opened on first use, so `pool_size` is an upper bound and `connects()` counts the connections a load needed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "test_support.hpp"

// Named inside the anonymous namespace: a unity build puts several test files in one unit.
namespace {
namespace pool_depth {

using namespace std::chrono_literals;
using ratelimit::BackendError;
using ratelimit::ManualClock;
using ratelimit::redis::ConnectionPool;
using ratelimit::redis::engine::PipelineOp;
using ratelimit::redis::engine::Reply;

const ratelimit::Gcra kBig{.limit = 1000, .period = 1s, .burst = 1'000'000};

/// Async PINGs, each counting its outcome.
struct Ping final : PipelineOp {
  std::atomic<int>* replied = nullptr;
  std::atomic<int>* failed = nullptr;
  void complete(Reply reply, std::optional<BackendError> error) noexcept override {
    (reply && !error ? *replied : *failed).fetch_add(1);
  }
};

/// `n` PINGs submitted one by one, each to the connection the pool chooses for it, while `server` holds every
/// command (CLIENT PAUSE), so nothing drains meanwhile; then waits until all have an outcome.
struct PausedBurst {
  std::atomic<int> replied{0}, failed{0};
  std::vector<Ping> pings;

  PausedBurst(const ratelimit_test::RedisServer& server, ConnectionPool& pool, std::size_t n) : pings(n) {
    auto admin = server.admin();
    admin.command({"CLIENT", "PAUSE", "500", "ALL"});
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    for (Ping& p : pings) {
      p.command = "*1\r\n$4\r\nPING\r\n";
      p.args = {"PING"};
      p.deadline = deadline;
      p.replied = &replied;
      p.failed = &failed;
      pool.pipeline().submit(p);
    }
    while (replied.load() + failed.load() < static_cast<int>(n) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
  }
};

class PoolDepth : public testing::Test {
 protected:
  void SetUp() override {
    RATELIMIT_REQUIRE_REDIS();
    server_.emplace(ratelimit_test::redis_server_binary());
  }
  /// A pool of `pool_size` on this test's own server (CLIENT PAUSE must not hold other tests' calls).
  std::shared_ptr<ConnectionPool> pool(std::size_t pool_size, std::size_t max_in_flight) {
    auto o = ratelimit_test::client_options(*server_);
    o.pool_size = pool_size;
    o.max_in_flight = max_in_flight;
    o.command_timeout = 3s;
    return std::make_shared<ConnectionPool>(o.connection(), o.limiter());
  }
  struct Burst {
    std::size_t pool_size, max_in_flight, calls;
  };
  /// `b.calls` PINGs on a paused server through a pool of `b.pool_size`: `replied` are answered, the rest
  /// refused at once (queue full), and `connects` connections were opened.
  void expect_burst(Burst b, std::size_t replied, std::uint64_t connects) {
    auto p = pool(b.pool_size, b.max_in_flight);
    PausedBurst burst(*server_, *p, b.calls);
    EXPECT_EQ(burst.replied.load(), static_cast<int>(replied));
    EXPECT_EQ(burst.failed.load(), static_cast<int>(b.calls - replied));
    EXPECT_EQ(p->refused(), b.calls - replied);
    EXPECT_EQ(p->connects(), connects);
  }
  std::optional<ratelimit_test::RedisServer> server_;
  ManualClock clock_;
};

// Eight threads of sync checks on an idle pool of 4: every caller joins the batch forming on the first
// connection (one connect), instead of spreading over four shallow pipelines.
TEST_F(PoolDepth, SyncCallersOnAnIdlePoolShareOneConnection) {
  auto p = pool(4, 4096);
  ratelimit::redis::RedisLimiter<ratelimit::Gcra, ManualClock> l(kBig, p, clock_);
  constexpr int kThreads = 8, kPerThread = 400;
  std::atomic<int> admitted{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) admitted += l.allow("k").allowed ? 1 : 0;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(admitted.load(), kThreads * kPerThread);
  EXPECT_EQ(p->connects(), 1u) << "callers spread over more connections than the load needed";
  EXPECT_EQ(p->refused(), 0u);
}

// A full connection (max_in_flight outstanding on a paused server) sends the next calls to the second
// connection; the third and fourth are never opened, and nothing is refused.
TEST_F(PoolDepth, AFullConnectionSpillsToTheNextOnly) {
  expect_burst({.pool_size = 4, .max_in_flight = 4, .calls = 6}, 6, 2);
}

// A pipeline at the spill depth (with room left under max_in_flight) sends the next calls to the second
// connection: one connection's I/O is then the bottleneck, not Redis's per-read cost.
TEST_F(PoolDepth, ADeepPipelineSpillsToTheNextOnly) {
  constexpr std::size_t kCalls = ConnectionPool::kSpillDepth + 10;
  expect_burst({.pool_size = 4, .max_in_flight = 4096, .calls = kCalls}, kCalls, 2);
}

// Every connection full: the calls beyond are refused at once ("queue full"), as with one connection.
TEST_F(PoolDepth, EveryConnectionFullRefusesTheRest) {
  expect_burst({.pool_size = 2, .max_in_flight = 3, .calls = 8}, 6, 2);
}

}  // namespace pool_depth
}  // namespace
