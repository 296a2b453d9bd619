#pragma once

/// @file
/// `CheckCallback`: an async check's callback of any type behind one type, so that a separately compiled
/// `RedisLimiter` (README.md "Compile cost") starts every async call in one compiled member.

#include <concepts>
#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

#include "ratelimit/decision.hpp"
#include "ratelimit/redis/abi.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace detail {

/// A move-only `void(std::exception_ptr, const CheckResult&)` holding a callable of any type (as C++23's
/// `std::move_only_function`); called at most once, as the async calls call theirs. Not thread-safe.
class CheckCallback {
 public:
  template <class F>
    requires(!std::same_as<std::remove_cvref_t<F>, CheckCallback>)
  explicit CheckCallback(F&& f) : f_(std::make_unique<Holder<std::decay_t<F>>>(std::forward<F>(f))) {}

  void operator()(std::exception_ptr error, const CheckResult& result) { f_->call(error, result); }

 private:
  struct Callable {
    virtual ~Callable() = default;
    virtual void call(std::exception_ptr& error, const CheckResult& result) = 0;
  };
  template <class F>
  struct Holder final : Callable {
    explicit Holder(F fn) : f(std::move(fn)) {}
    void call(std::exception_ptr& error, const CheckResult& result) override { f(error, result); }
    F f;
  };
  std::unique_ptr<Callable> f_;
};

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
