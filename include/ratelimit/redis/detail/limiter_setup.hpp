#pragma once

/// @file
/// What the Redis limiters share around their calls: options on a route (checked), the time sent, a script call.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "ratelimit/clock.hpp"
#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/detail/script_binding.hpp"
#include "ratelimit/redis/engine/pool.hpp"
#include "ratelimit/redis/engine/route.hpp"
#include "ratelimit/redis/engine/script_call.hpp"
#include "ratelimit/redis/engine/slots.hpp"
#include "ratelimit/redis/options.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace detail {

/// `o` when its limiter fields are valid; throws `std::invalid_argument` naming the field otherwise.
inline RedisOptions checked(RedisOptions o) {
  if (o.key_prefix.find_first_of("{}") != std::string::npos) {
    ratelimit::detail::invalid("LimiterOptions.key_prefix", "must not contain '{' or '}' (they delimit the hash tag)");
  }
  if (o.name.find_first_of("{}") != std::string::npos) {
    ratelimit::detail::invalid("LimiterOptions.name", "must not contain '{' or '}' (they delimit the hash tag)");
  }
  if (o.name.size() > 256) ratelimit::detail::invalid("LimiterOptions.name", "must be at most 256 bytes");
  if (o.deny_cache.enabled && o.deny_cache.max_keys < 1) {
    ratelimit::detail::invalid("LimiterOptions.deny_cache.max_keys", "must be >= 1");
  }
  if (o.max_key_bytes > (std::size_t{1} << 20)) {
    ratelimit::detail::invalid("LimiterOptions.max_key_bytes", "must be <= 2^20");
  }
  // A denial always names a wait (acquire and Retry-After rely on it), and one in nanoseconds must fit.
  if (o.failure_retry_after.count() <= 0 || o.failure_retry_after > std::chrono::days(365)) {
    ratelimit::detail::invalid("LimiterOptions.failure_retry_after", "must be in (0, 365 days]");
  }
  return o;
}

/// The route's connection options and `limiter` (null: the route's defaults; `key_prefix` instead of theirs),
/// checked. Throws `std::invalid_argument` for a null route or a bad field.
inline RedisOptions options_on(const Route* route, const LimiterOptions* limiter,
                               std::optional<std::string> key_prefix = std::nullopt) {
  if (route == nullptr) throw std::invalid_argument("Redis limiter: null pool, router or route");
  RedisOptions o;
  o.connection() = route->options();
  o.limiter() = limiter != nullptr ? *limiter : route->limiter_defaults();
  if (key_prefix) o.key_prefix = std::move(*key_prefix);
  return checked(std::move(o));
}

/// The route of a server's pool, or `route` itself.
inline std::shared_ptr<Route> route_of(std::shared_ptr<ConnectionPool> pool) {
  return std::make_shared<engine::ServerRoute>(std::move(pool));
}
inline std::shared_ptr<Route> route_of(std::shared_ptr<Route> route) { return route; }

/// `clock`'s time in whole microseconds (floor), clamped where every script value stays exact.
template <Clock C>
[[nodiscard]] std::int64_t now_us(C& clock) {
  const std::int64_t t = ratelimit::detail::floor_div(ratelimit::detail::now_ns(clock), kTickNs);
  return t < -kMaxTimeUs ? -kMaxTimeUs : (t > kMaxTimeUs ? kMaxTimeUs : t);
}

/// A script's time argument: the client time `now`, or "" for the script to read the server's `TIME`.
[[nodiscard]] inline std::string time_arg(const LimiterOptions& o, std::int64_t now) {
  return o.time_source == TimeSource::client ? std::to_string(now) : std::string();
}

/// `EVALSHA <script> 1 <key> <argv...> <params...>` in `key`'s slot (with `second`, `2 <key> <second>`). The
/// strings must outlive the call.
inline engine::RouteCall script_call(const EmbeddedScript& script, std::string_view key,
                                     std::initializer_list<std::string_view> argv,
                                     std::span<const std::string> params = {},
                                     std::optional<std::string_view> second = std::nullopt) {
  engine::RouteCall call;
  call.slot = engine::detail::key_slot(key);
  call.key = key;
  // Assigned from an array, not an initializer list: GCC 12 warns falsely (-Wstringop-overflow) on the latter.
  const std::array<std::string_view, 4> fixed{"EVALSHA", script.sha1, second ? "2" : "1", key};
  call.args.reserve(fixed.size() + 1 + argv.size() + params.size());
  call.args.assign(fixed.begin(), fixed.end());
  if (second) call.args.push_back(*second);
  call.args.insert(call.args.end(), argv.begin(), argv.end());
  for (const std::string& p : params) call.args.push_back(p);
  return call;
}

/// Sends `call` of `script` by `deadline` through `route` (which owns it until it completes): then
/// `f(Reply, std::optional<BackendError>, bool reloaded)` runs once on the I/O thread, after the call deleted itself
/// (so `f` may destroy what the call references). Throws what `Route::submit` throws, with nothing started.
template <class F>
void start_async_call(Route& route, const EmbeddedScript& script, const engine::RouteCall& call,
                      std::chrono::steady_clock::time_point deadline, F f) {
  struct Call final : engine::AsyncScriptCall {
    Call(const EmbeddedScript& s, F g) : engine::AsyncScriptCall(s), f_(std::move(g)) {}
    void finished(engine::Reply reply, std::optional<BackendError> error, bool reloaded) noexcept override {
      F g = std::move(f_);
      delete this;
      g(std::move(reply), std::move(error), reloaded);
    }
    F f_;
  };
  auto op = std::make_unique<Call>(script, std::move(f));
  op->args.assign(call.args.begin(), call.args.end());
  op->slot = call.slot;
  op->deadline = deadline;
  op->start(route);
  (void)op.release();
}

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
