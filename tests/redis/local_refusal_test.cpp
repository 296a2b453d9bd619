// Local refusals tell the circuit breaker nothing (include/ratelimit/redis/README.md "Circuit breaker"): a sync call
// refused at once because its connection already has `max_in_flight` commands outstanding never reached the server, so
// it must not count as a failed round trip. One connection (pool_size 1), a small max_in_flight, async bursts keeping
// it full and threads making sync calls against a healthy server: on every route (single server, Sentinel, Cluster) the
// sync calls meet "queue full", and the breaker (opening at the first failure) never opens, so no call is
// short-circuited.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "cluster_support.hpp"
#include "sentinel_support.hpp"
#include "test_support.hpp"

// Named inside the anonymous namespace: a unity build puts several test files in one unit.
namespace {
namespace local_refusal {

using namespace std::chrono_literals;
using ratelimit::BackendError;
using ratelimit::BackendErrorCause;
using ratelimit::redis::ConnectionOptions;
using ratelimit::redis::Route;
using ratelimit::redis::engine::PipelineOp;
using ratelimit::redis::engine::Reply;
using ratelimit::redis::engine::RouteCall;

/// `o` with one connection per server, `max_in_flight` 8, a breaker that opens at the first failure.
ConnectionOptions crowded(ConnectionOptions o) {
  o.pool_size = 1;
  o.max_in_flight = 8;
  o.command_timeout = 2s;
  o.connect_timeout = 2s;
  o.breaker.failure_threshold = 1;
  return o;
}

/// Async PINGs on `route`, each submitted again when it completes: the connection stays about full. A
/// call refused (queue full) waits for the feeder thread, so refusals do not spin the I/O thread.
class Bursts {
 public:
  Bursts(Route& route, int calls) : route_(route), ops_(static_cast<std::size_t>(calls)) {
    for (Op& op : ops_) {
      op.owner = this;
      op.command = "*1\r\n$4\r\nPING\r\n";
      op.args = {"PING"};
      op.slot = 0;
    }
    feeder_ = std::thread([this] { feed(); });
  }
  ~Bursts() {
    stop_.store(true);
    feeder_.join();
    const auto deadline = std::chrono::steady_clock::now() + 10s;  // each op's deadline is 2 s away at most
    while (busy_.load() > 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
    EXPECT_EQ(busy_.load(), 0) << "async calls never completed";
  }
  Bursts(const Bursts&) = delete;
  Bursts& operator=(const Bursts&) = delete;

 private:
  struct Op final : PipelineOp {
    Bursts* owner = nullptr;
    std::atomic<bool> idle{true};
    void complete(Reply reply, std::optional<BackendError>) noexcept override {
      if (reply && !owner->stop_.load()) {
        owner->send(*this);
        return;
      }
      idle.store(true);
      owner->busy_.fetch_sub(1);
    }
  };
  void send(Op& op) {
    op.deadline = std::chrono::steady_clock::now() + 2s;
    route_.submit(op);
  }
  void feed() {
    while (!stop_.load()) {
      for (Op& op : ops_) {
        if (op.idle.exchange(false)) {
          busy_.fetch_add(1);
          send(op);
        }
      }
      std::this_thread::sleep_for(1ms);
    }
  }

  Route& route_;
  std::vector<Op> ops_;
  std::atomic<bool> stop_{false};
  std::atomic<int> busy_{0};
  std::thread feeder_;
};

/// Sync PINGs from `threads` threads on `route` while `Bursts` keep its connection full, until 50 of them
/// were refused locally (at most 5 s): none may meet an open breaker, and the breaker never opened.
void expect_refusals_leave_the_breaker_closed(Route& route, int threads = 3) {
  {
    RouteCall warm;
    warm.args = {"PING"};
    route.execute(std::span<RouteCall>(&warm, 1));
    ASSERT_TRUE(warm.reply) << (warm.error ? warm.error->what() : "no reply");
  }
  std::atomic<int> refused{0}, short_circuited{0}, replies{0}, other{0};
  std::string other_error;
  std::mutex m;
  {
    Bursts bursts(route, 8);
    const auto until = std::chrono::steady_clock::now() + 5s;
    std::vector<std::thread> callers;
    for (int t = 0; t < threads; ++t) {
      callers.emplace_back([&] {
        while (refused.load() < 50 && std::chrono::steady_clock::now() < until) {
          RouteCall c;
          c.args = {"PING"};
          route.execute(std::span<RouteCall>(&c, 1));
          if (c.reply) {
            replies.fetch_add(1);
          } else if (c.error && c.error->cause() == BackendErrorCause::circuit_open) {
            short_circuited.fetch_add(1);
          } else if (c.error && std::string(c.error->what()).find("queue full") != std::string::npos) {
            refused.fetch_add(1);
          } else {
            other.fetch_add(1);
            const std::lock_guard lock(m);
            other_error = c.error ? c.error->what() : "no reply and no error";
          }
        }
      });
    }
    for (auto& t : callers) t.join();
  }
  EXPECT_GE(refused.load(), 50) << "the connection was never full: the test did not test anything";
  EXPECT_EQ(short_circuited.load(), 0) << refused.load() << " local refusals, " << replies.load() << " replies";
  EXPECT_EQ(route.counters().breaker_opens, 0u);
  EXPECT_EQ(other.load(), 0) << other_error;
}

TEST(LocalRefusal, ServerRouteBreakerStaysClosed) {
  RATELIMIT_REQUIRE_REDIS();
  const ratelimit_test::RedisServer& server = *ratelimit_test::shared_redis();
  auto route = ratelimit::redis::make_route(crowded(server.options().connection()));
  expect_refusals_leave_the_breaker_closed(*route);
}

TEST(LocalRefusal, SentinelRouteBreakerStaysClosed) {
  RATELIMIT_REQUIRE_REDIS();
  ratelimit_test::RedisServer master(ratelimit_test::redis_server_binary());
  ratelimit_test::SentinelProcess sentinel(ratelimit_test::redis_server_binary(), master.port());
  const auto o = ratelimit_test::sentinel_options({sentinel.port()}, "mymaster", {});
  auto route = ratelimit::redis::make_route(crowded(o.connection()));
  expect_refusals_leave_the_breaker_closed(*route);
}

TEST(ClusterLocalRefusal, ClusterRouteBreakerStaysClosed) {
  RATELIMIT_REQUIRE_CLUSTER();
  auto route = ratelimit::redis::make_route(crowded(ratelimit_test::shared_cluster()->options().connection()));
  expect_refusals_leave_the_breaker_closed(*route);
}

}  // namespace local_refusal
}  // namespace
