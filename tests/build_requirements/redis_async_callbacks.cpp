// The async calls accept exactly the callbacks they can call (include/ratelimit/redis/README.md "Redis engine"): the
// library passes an lvalue std::exception_ptr and a const result, so a callback taking rvalue references must be
// refused where it is passed, not fail to compile deep inside the library. Compiled in both modes; nothing to run.
#include <exception>
#include <utility>

#include <ratelimit/redis.hpp>

namespace {

using Limiter = ratelimit::redis::RedisLimiter<ratelimit::Gcra>;

template <class F>
concept CheckAsyncTakes = requires(Limiter& l, F f) {
  l.check_async("k", 1, std::move(f));
};
template <class F>
concept AllowAsyncTakes = requires(Limiter& l, F f) {
  l.allow_async("k", 1, std::move(f));
};
template <class F>
concept PeekAsyncTakes = requires(Limiter& l, F f) {
  l.peek_async("k", std::move(f));
};
template <class F>
concept RefundAsyncTakes = requires(Limiter& l, F f) {
  l.refund_async("k", 1, std::move(f));
};

template <class Result>
struct ByValue {
  void operator()(std::exception_ptr, Result) {}
};
template <class Result>
struct ByConstRef {
  void operator()(const std::exception_ptr&, const Result&) {}
};
template <class Result>
struct ByRvalue {
  void operator()(std::exception_ptr&&, Result&&) {}
};
template <class Result>
struct ResultByRvalue {
  void operator()(std::exception_ptr, Result&&) {}
};

static_assert(CheckAsyncTakes<ByValue<ratelimit::CheckResult>>);
static_assert(CheckAsyncTakes<ByConstRef<ratelimit::CheckResult>>);
static_assert(!CheckAsyncTakes<ByRvalue<ratelimit::CheckResult>>);
static_assert(!CheckAsyncTakes<ResultByRvalue<ratelimit::CheckResult>>);
static_assert(!CheckAsyncTakes<ByValue<ratelimit::Decision>>);

static_assert(AllowAsyncTakes<ByValue<ratelimit::Decision>>);
static_assert(AllowAsyncTakes<ByConstRef<ratelimit::Decision>>);
static_assert(!AllowAsyncTakes<ByRvalue<ratelimit::Decision>>);
static_assert(!AllowAsyncTakes<ResultByRvalue<ratelimit::Decision>>);
static_assert(PeekAsyncTakes<ByValue<ratelimit::Decision>>);
static_assert(!PeekAsyncTakes<ResultByRvalue<ratelimit::Decision>>);
static_assert(RefundAsyncTakes<ByConstRef<ratelimit::Decision>>);
static_assert(!RefundAsyncTakes<ByRvalue<ratelimit::Decision>>);

}  // namespace
