// <ratelimit/asio.hpp> at the edges of a call's life (include/ratelimit/redis/README.md "Redis engine", Asio): the
// io_context destroyed with a check in flight, and cancellation through the handler's cancellation slot, against a
// redis-server the test stalls with SIGSTOP so that the check stays in flight.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#if defined(ASIO_HAS_CO_AWAIT)
#include <asio/experimental/awaitable_operators.hpp>
#endif

#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <optional>
#include <system_error>

#include <ratelimit/asio.hpp>
#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::ManualClock;
using ratelimit::redis::RedisLimiter;
using Steady = std::chrono::steady_clock;

const ratelimit::Gcra kEdgePolicy{.limit = 10, .period = 1s, .burst = 3};

/// The code of the std::system_error an exception_ptr holds, or nothing.
std::optional<std::error_code> system_error_of(std::exception_ptr e) {
  try {
    if (e) std::rethrow_exception(e);
  } catch (const std::system_error& s) {
    return s.code();
  } catch (...) {
  }
  return std::nullopt;
}

class AsioEdges : public testing::Test {
 protected:
  void SetUp() override {
    RATELIMIT_REQUIRE_REDIS();
    server_ = std::make_unique<ratelimit_test::RedisServer>(ratelimit_test::redis_server_binary());
    limiter_.emplace(kEdgePolicy, ratelimit_test::client_options(*server_), clock_);
    // One call first, so that the connection and its I/O thread exist and the next call is written at once.
    EXPECT_TRUE(ratelimit::asio::async_allow(*limiter_, "warm", 1, asio::use_future).get().allowed);
  }
  void TearDown() override { resume(); }

  /// Stops the server (SIGSTOP) and waits until it is stopped: calls written now stay unanswered.
  void stall() {
    ASSERT_EQ(::kill(server_->pid(), SIGSTOP), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(server_->pid(), &status, WUNTRACED), server_->pid());
    ASSERT_TRUE(WIFSTOPPED(status));
    stalled_ = true;
  }
  void resume() {
    if (stalled_ && server_ && server_->pid() > 0) ::kill(server_->pid(), SIGCONT);
    stalled_ = false;
  }

  ManualClock clock_;
  std::unique_ptr<ratelimit_test::RedisServer> server_;
  std::optional<RedisLimiter<ratelimit::Gcra, ManualClock>> limiter_;
  bool stalled_ = false;
};

// Destroying the io_context destroys the pending handler uninvoked (as Asio does with its own operations);
// the limiter's completion, later and on its I/O thread, must touch neither the context nor its work
// count. Under ASan the old adapter was a heap-use-after-free in the post from the I/O thread.
TEST_F(AsioEdges, DestroyingTheIoContextWithACheckInFlightLeavesItAlone) {
  stall();
  int ran = 0;
  {
    asio::io_context io;
    ratelimit::asio::async_allow(*limiter_, "k", 1,
                                 asio::bind_executor(io, [&](std::exception_ptr, Decision) { ++ran; }));
  }
  limiter_.reset();  // completes the unanswered call at once, on the I/O thread, and waits for that
  EXPECT_EQ(ran, 0);
}

// A cancelled call completes at once with operation_aborted, on the handler's executor, exactly once: the
// late outcome from Redis is dropped.
TEST_F(AsioEdges, TerminalCancellationCompletesAtOnceWithOperationAborted) {
  stall();
  asio::io_context io;
  asio::cancellation_signal cancel;
  int ran = 0;
  std::optional<std::error_code> code;
  const auto start = Steady::now();
  Steady::duration took{};
  ratelimit::asio::async_allow(
      *limiter_, "k", 1,
      asio::bind_cancellation_slot(cancel.slot(), asio::bind_executor(io, [&](std::exception_ptr e, Decision d) {
                                     ++ran;
                                     code = system_error_of(e);
                                     EXPECT_FALSE(d.allowed);
                                     took = Steady::now() - start;
                                   })));
  asio::steady_timer timer(io, 50ms);
  timer.async_wait([&](std::error_code) { cancel.emit(asio::cancellation_type::terminal); });
  io.run();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(code, std::make_optional<std::error_code>(asio::error::operation_aborted));
  EXPECT_LT(took, 1s) << "the command timeout is 2 s: the call waited for Redis";
  resume();
  limiter_.reset();  // the late reply (or the destruction) completes the call inside the limiter
  io.restart();
  io.run();
  EXPECT_EQ(ran, 1);
}

// `partial` is honoured too; async_check's result then says no quota decided it.
TEST_F(AsioEdges, PartialCancellationOfACheckSaysNoQuotaDecided) {
  stall();
  asio::io_context io;
  asio::cancellation_signal cancel;
  int ran = 0;
  std::optional<std::error_code> code;
  ratelimit::CheckResult got{};
  ratelimit::asio::async_check(
      *limiter_, "k", 1,
      asio::bind_cancellation_slot(cancel.slot(),
                                   asio::bind_executor(io, [&](std::exception_ptr e, ratelimit::CheckResult r) {
                                     ++ran;
                                     code = system_error_of(e);
                                     got = r;
                                   })));
  asio::post(io, [&] { cancel.emit(asio::cancellation_type::partial); });
  io.run();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(code, std::make_optional<std::error_code>(asio::error::operation_aborted));
  EXPECT_EQ(got, (ratelimit::CheckResult{Decision{}, ratelimit::Outcome::failure_policy}));
}

// `total` alone asks for no side effects, which a call already sent to Redis cannot promise: it is not
// honoured, and the call completes with Redis's decision.
TEST_F(AsioEdges, TotalCancellationAloneIsNotHonoured) {
  asio::io_context io;
  asio::cancellation_signal cancel;
  int ran = 0;
  std::exception_ptr error;
  Decision got{};
  ratelimit::asio::async_allow(
      *limiter_, "k", 1,
      asio::bind_cancellation_slot(cancel.slot(), asio::bind_executor(io, [&](std::exception_ptr e, Decision d) {
                                     ++ran;
                                     error = e;
                                     got = d;
                                   })));
  cancel.emit(asio::cancellation_type::total);
  io.run();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(error, nullptr);
  EXPECT_TRUE(got.allowed);
}

#if defined(ASIO_HAS_CO_AWAIT)
// The pattern of a deadline: `co_await (check || timer)` ends with the timer while Redis is stalled.
TEST_F(AsioEdges, AwaitedCheckOrTimerEndsWithTheTimer) {
  using namespace asio::experimental::awaitable_operators;
  stall();
  asio::io_context io;
  Steady::duration took{};
  bool timer_won = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer timer(io, 50ms);
        const auto start = Steady::now();
        const auto r = co_await (ratelimit::asio::async_allow(*limiter_, "k", 1, asio::use_awaitable) ||
                                 timer.async_wait(asio::use_awaitable));
        took = Steady::now() - start;
        timer_won = r.index() == 1;
      },
      asio::detached);
  io.run();
  EXPECT_TRUE(timer_won);
  EXPECT_LT(took, 1s) << "the command timeout is 2 s: the check was not cancelled";
}

// A coroutine suspended in a check when its io_context is destroyed: its frame goes with the context.
TEST_F(AsioEdges, DestroyingTheIoContextWithAnAwaitedCheckLeavesItAlone) {
  stall();
  bool resumed = false;
  {
    asio::io_context io;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          co_await ratelimit::asio::async_allow(*limiter_, "k", 1, asio::use_awaitable);
          resumed = true;
        },
        asio::detached);
    io.run_for(50ms);  // the coroutine starts the check and suspends
  }
  limiter_.reset();
  EXPECT_FALSE(resumed);
}
#endif

}  // namespace
