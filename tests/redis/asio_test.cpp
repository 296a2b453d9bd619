// <ratelimit/asio.hpp>: async_allow / async_check with a plain callback, asio::use_future and
// asio::use_awaitable (C++20 coroutines), against a real redis-server; a failure under `raise` arrives
// as the exception of the token.
#include <gtest/gtest.h>

#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include <ratelimit/asio.hpp>
#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::BackendError;
using ratelimit::Decision;
using ratelimit::FailurePolicy;
using ratelimit::ManualClock;
using ratelimit::redis::RedisLimiter;

const ratelimit::Gcra kPolicy{.limit = 10, .period = 1s, .burst = 3};

class AsyncAsio : public testing::Test {
 protected:
  void SetUp() override { RATELIMIT_REQUIRE_REDIS(); }
  ratelimit::redis::RedisOptions options(FailurePolicy on_error = FailurePolicy::raise) const {
    return ratelimit_test::client_options(*ratelimit_test::shared_redis(), on_error);
  }
  ManualClock clock_;
};

TEST_F(AsyncAsio, CallbackRunsOnTheHandlersExecutor) {
  RedisLimiter<ratelimit::Gcra, ManualClock> l(kPolicy, options(), clock_);
  asio::io_context io;
  Decision got{};
  std::thread::id where;
  ratelimit::asio::async_allow(l, "k", 1, asio::bind_executor(io, [&](std::exception_ptr e, Decision d) {
    EXPECT_EQ(e, nullptr);
    got = d;
    where = std::this_thread::get_id();
  }));
  io.run();  // returns once the handler ran: the call kept io busy until then
  EXPECT_EQ(got, (Decision{true, 3, 2, 0s, 100ms}));
  EXPECT_EQ(where, std::this_thread::get_id());
}

TEST_F(AsyncAsio, UseFuture) {
  RedisLimiter<ratelimit::Gcra, ManualClock> l(kPolicy, options(), clock_);
  // One after the other: two calls in flight at once may go on different pooled connections, in either order.
  auto a = ratelimit::asio::async_allow(l, "k", 1, asio::use_future);
  EXPECT_EQ(a.get().remaining, 2);
  auto b = ratelimit::asio::async_check(l, "k", 2, asio::use_future);
  const ratelimit::CheckResult r = b.get();
  EXPECT_EQ(r.outcome, ratelimit::Outcome::decided);
  EXPECT_EQ(r.decision.remaining, 0);
}

TEST_F(AsyncAsio, UseFutureRethrowsTheBackendErrorUnderRaise) {
  auto o = options(FailurePolicy::raise);
  o.port = ratelimit_test::free_port();  // nobody listens
  RedisLimiter<ratelimit::Gcra, ManualClock> l(kPolicy, o, clock_);
  auto f = ratelimit::asio::async_allow(l, "k", 1, asio::use_future);
  EXPECT_THROW(f.get(), BackendError);
}

// C++20 coroutines: Asio enables them where the compiler and library support them (g++ 12; clang 14 with
// libstdc++ 12 does not), so these two tests are compiled there only.
#if defined(ASIO_HAS_CO_AWAIT)
TEST_F(AsyncAsio, UseAwaitable) {
  RedisLimiter<ratelimit::Gcra, ManualClock> l(kPolicy, options(), clock_);
  asio::io_context io;
  int admitted = 0;
  bool denied_last = false;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    for (int i = 0; i < 4; ++i) {
      const Decision d = co_await ratelimit::asio::async_allow(l, "k", 1, asio::use_awaitable);
      if (d.allowed) ++admitted;
      denied_last = !d.allowed;
    }
  }, asio::detached);
  io.run();
  EXPECT_EQ(admitted, 3);
  EXPECT_TRUE(denied_last);
}

TEST_F(AsyncAsio, UseAwaitableThrowsUnderRaise) {
  auto o = options(FailurePolicy::raise);
  o.port = ratelimit_test::free_port();
  RedisLimiter<ratelimit::Gcra, ManualClock> l(kPolicy, o, clock_);
  asio::io_context io;
  bool caught = false;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    try {
      co_await ratelimit::asio::async_allow(l, "k", 1, asio::use_awaitable);
    } catch (const BackendError&) {
      caught = true;
    }
  }, asio::detached);
  io.run();
  EXPECT_TRUE(caught);
}
#else
TEST_F(AsyncAsio, UseAwaitable) { GTEST_SKIP() << "no C++20 coroutines in Asio with this compiler"; }
#endif

}  // namespace
