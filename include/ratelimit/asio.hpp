#pragma once

/// @file
/// Asio completion tokens for the Redis limiter's async API (include/ratelimit/redis/README.md "Redis engine", Asio):
/// callbacks, `asio::use_future`, `asio::use_awaitable` (C++20 coroutines), or any other token. Standalone Asio (Debian
/// `libasio-dev`); CMake target `ratelimit::asio`.

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/error.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

#include "ratelimit/asio/call_tracker.hpp"
#include "ratelimit/decision.hpp"

namespace ratelimit::asio {

namespace detail {

/// One call: its handler and the work guard on the handler's executor (kept busy until the handler ran),
/// linked in the registry of the executor's context until the call completes once, by the limiter or by
/// cancellation, or the context shuts down.
template <class Result, class Handler>
class Call final : public CallRegistry::Entry {
  using Executor = ::asio::associated_executor_t<Handler>;
  struct Bound final : Held {
    Bound(Handler h, Executor e) : handler(std::move(h)), work(std::move(e)) {}
    Handler handler;
    ::asio::executor_work_guard<Executor> work;
  };

 public:
  /// A call holding `handler`, linked in the registry of its executor's context.
  static std::shared_ptr<Call> make(Handler handler) {
    Executor executor = ::asio::get_associated_executor(handler);
    auto call = std::make_shared<Call>(CallTracker::registry_of(executor));
    auto bound = std::make_unique<Bound>(std::move(handler), std::move(executor));
    std::unique_ptr<Held> dropped;  // the context already shut down: destroyed outside the lock
    const std::lock_guard lock(call->registry_->mutex);
    dropped = call->registry_->link(*call, std::move(bound));
    return call;
  }

  explicit Call(std::shared_ptr<CallRegistry> registry) : registry_(std::move(registry)) {}

  /// Posts the handler with `(error, result)` to its executor, unless the call already completed or its
  /// context shut down. Any thread (the limiter's I/O thread, or the one emitting a cancellation).
  void complete(std::exception_ptr error, Result result) {
    const std::lock_guard lock(registry_->mutex);
    std::unique_ptr<Held> taken = registry_->take(*this);
    if (!taken) return;
    Executor executor = static_cast<Bound&>(*taken).work.get_executor();
    // Under the lock: the context cannot shut down before the post is done. The work guard goes after
    // the handler ran, on the executor.
    ::asio::post(executor, [taken = std::move(taken), error, result = std::move(result)]() mutable {
      Handler& handler = static_cast<Bound&>(*taken).handler;
      ::asio::get_associated_cancellation_slot(handler).clear();
      std::move(handler)(error, std::move(result));
    });
  }

  /// Drops the handler uninvoked (the limiter refused to start the call).
  void abandon() {
    std::unique_ptr<Held> taken;  // destroyed after the lock is released
    const std::lock_guard lock(registry_->mutex);
    taken = registry_->take(*this);
  }

 private:
  std::shared_ptr<CallRegistry> registry_;
};

/// What a cancelled call completes with beside its error: a denial that no quota decided.
template <class Result>
Result aborted_result() {
  if constexpr (std::is_same_v<Result, CheckResult>) {
    return CheckResult{Decision{}, Outcome::failure_policy};
  } else {
    return Result{};
  }
}

/// The handler's cancellation slot's handler: `terminal` and `partial` cancellation complete the call at
/// once with `operation_aborted` (and a denial); `total` alone (no side effects) is not honoured, since
/// a call may already have run on the server.
template <class CallType, class Result>
struct Canceller {
  std::weak_ptr<CallType> call;
  void operator()(::asio::cancellation_type type) const {
    constexpr auto honoured = ::asio::cancellation_type::terminal | ::asio::cancellation_type::partial;
    if ((type & honoured) == ::asio::cancellation_type::none) return;
    if (const auto c = call.lock()) {
      c->complete(std::make_exception_ptr(std::system_error(::asio::error::operation_aborted)),
                  aborted_result<Result>());
    }
  }
};

/// Starts `start(key, cost, callback)` and delivers its outcome to `handler` on the handler's associated
/// executor (never on the limiter's I/O thread, never inside the initiating call).
template <class Result, class Start>
auto initiate(Start start) {
  return [start = std::move(start)](auto handler, std::string key, std::int64_t cost) mutable {
    using CallType = Call<Result, decltype(handler)>;
    auto slot = ::asio::get_associated_cancellation_slot(handler);
    const std::shared_ptr<CallType> call = CallType::make(std::move(handler));
    if (slot.is_connected()) slot.template emplace<Canceller<CallType, Result>>(Canceller<CallType, Result>{call});
    try {
      start(key, cost, [call](std::exception_ptr e, Result r) { call->complete(e, std::move(r)); });
    } catch (...) {
      if (slot.is_connected()) slot.clear();
      call->abandon();
      throw;
    }
  };
}

}  // namespace detail

/// Checks `cost` units of `key` on `limiter` (a `redis::RedisLimiter`) without blocking, completing
/// `token` with `void(std::exception_ptr, Decision)`: Redis's decision, or the failure policy's when
/// Redis failed; under `FailurePolicy::raise` the `BackendError` is the exception (thrown by
/// `use_future`'s `get()` and by `co_await` with `use_awaitable`). The handler runs on its associated
/// executor (for a plain callback without one, Asio's system executor). Exactly one completion per
/// call. `limiter` must outlive the initiation (with `use_awaitable` the call starts when awaited); the
/// call itself keeps what it needs, and the executor's context may be destroyed with the call in flight:
/// the handler is then destroyed uninvoked (as Asio does with pending operations) and the limiter's late
/// outcome touches nothing of the context. Cancellation (the handler's cancellation slot, e.g.
/// `co_await (async_allow(...) || timer.async_wait(...))`): `terminal` or `partial` completes the call at
/// once with a `std::system_error` of `asio::error::operation_aborted` (and a denial); the check already
/// handed to the limiter is not withdrawn: it may still run on Redis and consume `cost` (its outcome is
/// dropped). `total` alone is not honoured (it asks for no side effects). Thread-safe as the limiter.
/// Throws `std::invalid_argument` (key, cost) when the operation is initiated.
/// Example:
///   ratelimit::redis::RedisLimiter<ratelimit::Gcra> limiter(
///       ratelimit::Gcra{.limit = 10, .period = std::chrono::seconds(1), .burst = 10},
///       ratelimit::redis::ConnectionOptions::from_url("redis://redis.internal:6379"));
///   // In a coroutine: Decision d = co_await async_allow(limiter, key, 1, asio::use_awaitable);
///   ratelimit::asio::async_allow(limiter, "client-42", 1, [](std::exception_ptr error, ratelimit::Decision d) {
///     if (error || !d) { /* answer 429 (error: a BackendError, under FailurePolicy::raise) */ }
///   });
template <class Limiter, class Token>
auto async_allow(Limiter& limiter, std::string_view key, std::int64_t cost, Token&& token) {
  return ::asio::async_initiate<Token, void(std::exception_ptr, Decision)>(
      detail::initiate<Decision>([&limiter](const std::string& k, std::int64_t c, auto callback) {
        limiter.allow_async(k, c, std::move(callback));
      }),
      token, std::string(key), cost);
}

/// As `async_allow`, completing with `void(std::exception_ptr, CheckResult)` (says who decided; a
/// cancelled call's is `Outcome::failure_policy`: no quota decided it).
template <class Limiter, class Token>
auto async_check(Limiter& limiter, std::string_view key, std::int64_t cost, Token&& token) {
  return ::asio::async_initiate<Token, void(std::exception_ptr, CheckResult)>(
      detail::initiate<CheckResult>([&limiter](const std::string& k, std::int64_t c, auto callback) {
        limiter.check_async(k, c, std::move(callback));
      }),
      token, std::string(key), cost);
}

}  // namespace ratelimit::asio
