#pragma once

/// @file
/// Asio completion tokens for the Redis limiter's async API (README "Redis engine", Asio): callbacks,
/// `asio::use_future`, `asio::use_awaitable` (C++20 coroutines), or any other token. Standalone Asio
/// (Debian `libasio-dev`); CMake target `ratelimit::asio`.

#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <utility>

#include "ratelimit/decision.hpp"

namespace ratelimit::asio {

namespace detail {

/// Starts `start(key, cost, callback)` and delivers its outcome to `handler` on the handler's associated
/// executor (never on the limiter's I/O thread, never inside the initiating call): the executor is kept
/// busy (a work guard) until then.
template <class Result, class Start>
auto initiate(Start start) {
  return [start = std::move(start)](auto handler, std::string key, std::int64_t cost) mutable {
    auto work = ::asio::make_work_guard(handler);
    start(key, cost, [handler = std::move(handler), work = std::move(work)](std::exception_ptr e, Result r) mutable {
      auto executor = ::asio::get_associated_executor(handler, work.get_executor());
      ::asio::post(executor, [handler = std::move(handler), e, r]() mutable { std::move(handler)(e, r); });
      work.reset();
    });
  };
}

}  // namespace detail

/// Checks `cost` units of `key` on `limiter` (a `redis::RedisLimiter`) without blocking, completing
/// `token` with `void(std::exception_ptr, Decision)`: Redis's decision, or the failure policy's when
/// Redis failed; under `FailurePolicy::raise` the `BackendError` is the exception (thrown by
/// `use_future`'s `get()` and by `co_await` with `use_awaitable`). The handler runs on its associated
/// executor (for a plain callback without one, Asio's system executor). Exactly one completion per
/// call. `limiter` must outlive the initiation (with `use_awaitable` the call starts when awaited); the
/// call itself keeps what it needs. Thread-safe as the limiter. Throws `std::invalid_argument` (key,
/// cost) when the operation is initiated.
template <class Limiter, class Token>
auto async_allow(Limiter& limiter, std::string_view key, std::int64_t cost, Token&& token) {
  return ::asio::async_initiate<Token, void(std::exception_ptr, Decision)>(
      detail::initiate<Decision>([&limiter](const std::string& k, std::int64_t c, auto callback) {
        limiter.allow_async(k, c, std::move(callback));
      }),
      token, std::string(key), cost);
}

/// As `async_allow`, completing with `void(std::exception_ptr, CheckResult)` (says who decided).
template <class Limiter, class Token>
auto async_check(Limiter& limiter, std::string_view key, std::int64_t cost, Token&& token) {
  return ::asio::async_initiate<Token, void(std::exception_ptr, CheckResult)>(
      detail::initiate<CheckResult>([&limiter](const std::string& k, std::int64_t c, auto callback) {
        limiter.check_async(k, c, std::move(callback));
      }),
      token, std::string(key), cost);
}

}  // namespace ratelimit::asio
