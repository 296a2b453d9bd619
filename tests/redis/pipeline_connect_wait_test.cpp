// A sync call waiting while its pipeline connects (include/ratelimit/redis/README.md "Redis engine") ends by its
// own deadline, also when it drives the connection and another caller's call waits behind the connect. No server:
// the connection's opener blocks, then fails.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <span>
#include <stdexcept>
#include <thread>

#include <ratelimit/redis.hpp>

namespace {
namespace pipeline_connect_wait {

using namespace std::chrono_literals;
using ratelimit::BackendError;
using ratelimit::BackendErrorCause;
using ratelimit::redis::engine::Connection;
using ratelimit::redis::engine::Pipeline;
using ratelimit::redis::engine::RouteCall;
using Steady = std::chrono::steady_clock;

// One sync PING on `p` that must end by `deadline`; returns how long it took. Its error lands in `call.error`.
Steady::duration ping(Pipeline& p, RouteCall& call, Steady::time_point deadline) {
  call.args = {"PING"};
  call.deadline = deadline;
  const auto t0 = Steady::now();
  {
    ratelimit::redis::engine::detail::SyncCalls batch;
    if (p.start(std::span<RouteCall>(&call, 1), batch)) p.wait(batch);
  }
  return Steady::now() - t0;
}

TEST(PipelineConnectWait, DriverWhoseCallTimedOutLeavesBeforeTheConnectEnds) {
  constexpr auto kConnectTakes = 1500ms;
  std::atomic<bool> stop{false};
  Pipeline p(
      [&]() -> std::unique_ptr<Connection> {
        const auto until = Steady::now() + kConnectTakes;
        while (!stop.load() && Steady::now() < until) std::this_thread::sleep_for(5ms);
        throw BackendError(BackendErrorCause::timeout, "connect: timed out");
      },
      [] {}, 3s, 1024);

  // The first caller drives: it starts the connect and waits for it, until its own deadline (50 ms).
  RouteCall first;
  Steady::duration took{};
  std::thread driver([&] { took = ping(p, first, Steady::now() + 50ms); });
  // A second caller queues behind the connect with a longer deadline (the pipeline's command_timeout).
  std::this_thread::sleep_for(10ms);
  RouteCall second;
  std::thread queued([&] { (void)ping(p, second, Steady::time_point::max()); });
  driver.join();
  stop.store(true);
  queued.join();

  ASSERT_TRUE(first.error.has_value());
  EXPECT_EQ(first.error->cause(), BackendErrorCause::timeout) << first.error->what();
  EXPECT_LT(took, 450ms) << "the call ended after "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                         << " ms, not by its deadline (50 ms): it waited for the connect of another caller's call";
}

}  // namespace pipeline_connect_wait
}  // namespace
