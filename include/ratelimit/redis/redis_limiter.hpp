#pragma once

/// @file
/// `RedisLimiter`: a policy checked atomically in Redis, shared by every process that uses the server.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <concepts>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ratelimit/batch_request.hpp"
#include "ratelimit/clock.hpp"
#include "ratelimit/decision.hpp"
#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/detail/key_length.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/policy/policy.hpp"
#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/engine/cluster_router.hpp"
#include "ratelimit/redis/engine/routes.hpp"
#include "ratelimit/redis/engine/connection.hpp"
#include "ratelimit/redis/denial_cache.hpp"
#include "ratelimit/redis/engine/slots.hpp"
#include "ratelimit/redis/detail/decision_reply.hpp"
#include "ratelimit/redis/detail/key_encoding.hpp"
#include "ratelimit/redis/detail/layered_call.hpp"
#include "ratelimit/redis/detail/script_binding.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/redis/fallback.hpp"
#include "ratelimit/redis/options.hpp"
#include "ratelimit/redis/engine/pool.hpp"
#include "ratelimit/redis/readiness.hpp"
#include "ratelimit/redis/engine/reply.hpp"
#include "ratelimit/redis/engine/route.hpp"
#include "ratelimit/redis/engine/script_call.hpp"
#include "ratelimit/redis/stats.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {

/// One check of a batch for `RedisLimiter::allow_many`: `ratelimit::BatchRequest`, which every backend's batch takes.
using Request = ratelimit::BatchRequest;

/// The Redis backend (include/ratelimit/README.md "Redis contract"): each check is one atomic Lua script run
/// (`EVALSHA`) on the key's Redis key, so any number of threads and processes sharing the server share each key's limit
/// exactly.
///
/// Decisions are those of the in-memory backend for the same calls when times and the policy's
/// durations are whole microseconds (include/ratelimit/README.md "Guarantees", "Backends agree"); Redis keeps time in
/// integer microseconds. Thread-safe: every method may be called from any thread; calls from every thread share the
/// pool's `pool_size` pipelined connections (include/ratelimit/redis/README.md "Redis engine"), and the `*_async`
/// methods start a check without blocking. When Redis fails, `LimiterOptions::on_error` decides (and `stats()` counts
/// it); with `FailurePolicy::fallback` an in-memory share of the quota answers until Redis is back
/// (include/ratelimit/redis/README.md "Fallback during outages"), and `on_backend_failure` hears of every failure.
///
/// On Redis Cluster (`ConnectionOptions::cluster_nodes` set) each check runs on the master owning its key's
/// slot, through a `ClusterRouter` (slot map, a pool per node, `MOVED` / `ASK` handling);
/// decisions are the same. Each key's state lives on one master and replicates asynchronously, so a
/// failover can lose that master's last writes (those keys briefly admit again what they had consumed).
///
/// Layered checks (`check_layers`) over limiters sharing one pool, or on Redis Cluster one router with
/// every key in one slot, run as one atomic script (lua/layered.lua) through `check_jointly`.
///
/// @tparam P a `Policy`. On Redis its durations must be whole microseconds, its rate at most one per
///           microsecond, its counts below 2^53, and for `SlidingWindowCounter` `limit * window_us <= 2^53`.
/// @tparam C a `Clock`, read only with `time_source = client` (and for `fail_open` decisions);
///           `std::chrono::system_clock` by default, `ManualClock` in tests. Windows align to its epoch.
/// Example:
///   ratelimit::redis::RedisOptions options;
///   options.connection() = ratelimit::redis::ConnectionOptions::from_url("redis://redis.internal:6379/0");
///   options.on_error = ratelimit::FailurePolicy::fail_closed;  // deny while Redis cannot answer
///   ratelimit::redis::RedisLimiter<ratelimit::Gcra> limiter(
///       ratelimit::Gcra{.limit = 100, .period = std::chrono::minutes(1), .burst = 20}, options);
///   limiter.wait_ready(std::chrono::seconds(5));  // at start-up; throws BackendError saying why not
///   if (!limiter.allow("client-42")) { /* answer 429: the whole fleet shares this key's limit */ }
template <Policy P, Clock C = std::chrono::system_clock>
class RedisLimiter final : public detail::LayeredMember {
 public:
  using policy_type = P;
  using clock_type = C;

  /// Validates the policy for Redis and the options, and makes a connection pool (or, with
  /// `cluster_nodes`, a `ClusterRouter`); connects nothing yet, so Redis may be down at start. Throws
  /// `std::invalid_argument` naming the field (e.g. `Gcra.period`, `LimiterOptions.key_prefix`,
  /// `ConnectionOptions.pool_size`).
  RedisLimiter(P policy, const RedisOptions& options, C clock = {})
      : RedisLimiter(std::move(policy), make_route(options.connection()), std::move(clock), &options.limiter()) {}

  /// As above, from the two halves: the connections (`connection`, a pool or router of its own) and this
  /// limiter's `limiter` options. Throws `std::invalid_argument` as above.
  RedisLimiter(P policy, const ConnectionOptions& connection, const LimiterOptions& limiter = {}, C clock = {})
      : RedisLimiter(std::move(policy), make_route(connection), std::move(clock), &limiter) {}

  /// As above, sharing `pool` with other limiters, e.g. one per policy of a layered limit; the limiter
  /// options are the pool's `limiter_defaults()`. Throws `std::invalid_argument` as above.
  RedisLimiter(P policy, std::shared_ptr<ConnectionPool> pool, C clock = {})
      : RedisLimiter(std::move(policy), server_route(std::move(pool)), std::move(clock), nullptr) {}

  /// On Redis Cluster, sharing `router` (its pools, slot map and options) with other limiters. A layered
  /// check over limiters of one router is one script only when every key is in one slot (the hash tag
  /// is the user key: the same user key in several limiters shares a slot); otherwise `check_layers`
  /// checks layer by layer and refunds the layers already consumed when a later one denies. Throws
  /// `std::invalid_argument` as above.
  RedisLimiter(P policy, std::shared_ptr<ClusterRouter> router, C clock = {})
      : RedisLimiter(std::move(policy), std::shared_ptr<Route>(std::move(router)), std::move(clock), nullptr) {}

  /// As above with this limiter's own `key_prefix` instead of the pool's default. Throws
  /// `std::invalid_argument` naming `LimiterOptions.key_prefix` when it holds `{` or `}`.
  RedisLimiter(P policy, std::shared_ptr<ConnectionPool> pool, std::string key_prefix, C clock = {})
      : RedisLimiter(std::move(policy), pool,
                     with_prefix(server_route(pool)->limiter_defaults(), std::move(key_prefix)), std::move(clock)) {}

  /// Sharing `pool`'s connections, with this limiter's own options (key prefix, name, time source,
  /// failure policy): e.g. the layers of a layered limit, each named. Throws `std::invalid_argument`
  /// naming the field.
  /// Example:
  ///   auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(
  ///       ratelimit::redis::ConnectionOptions::from_url("redis://redis.internal:6379"));
  ///   const ratelimit::Gcra ip_rate{.limit = 10, .period = std::chrono::seconds(1), .burst = 20};
  ///   const ratelimit::FixedWindow key_quota{.limit = 10'000, .window = std::chrono::hours(24)};
  ///   ratelimit::redis::RedisLimiter per_ip(ip_rate, pool, ratelimit::redis::LimiterOptions{.name = "per-ip"});
  ///   ratelimit::redis::RedisLimiter per_key(key_quota, pool, ratelimit::redis::LimiterOptions{.name = "per-key"});
  ///   ratelimit::LimiterLayer ip(per_ip, "ip");
  ///   ratelimit::LimiterLayer key(per_key, "api-key");
  ///   if (!ratelimit::check_layers({{&ip, "203.0.113.7"}, {&key, "7f3a"}})) { /* 429: one script, all or nothing */ }
  RedisLimiter(P policy, std::shared_ptr<ConnectionPool> pool, const LimiterOptions& limiter, C clock = {})
      : RedisLimiter(std::move(policy), server_route(std::move(pool)), std::move(clock), &limiter) {}

  /// On Redis Cluster, sharing `router`, with this limiter's own options. Throws as above.
  RedisLimiter(P policy, std::shared_ptr<ClusterRouter> router, const LimiterOptions& limiter, C clock = {})
      : RedisLimiter(std::move(policy), std::shared_ptr<Route>(std::move(router)), std::move(clock), &limiter) {}

  /// On the master Redis Sentinel names, sharing `route` (its pools and discovery; include/ratelimit/redis/README.md
  /// "Redis Sentinel") with other limiters, e.g. the layers of one layered check. Throws as above.
  RedisLimiter(P policy, std::shared_ptr<SentinelRoute> route, const LimiterOptions& limiter, C clock = {})
      : RedisLimiter(std::move(policy), std::shared_ptr<Route>(std::move(route)), std::move(clock), &limiter) {}

  /// On Redis Cluster, sharing `router` with this limiter's own `key_prefix` instead of the router's, for
  /// the same reason as above (e.g. the layers of tier plans on one router). The prefix is outside the
  /// hash tag: limiters over the same user key still share a slot, so layered checks stay one script.
  /// Throws `std::invalid_argument` naming `LimiterOptions.key_prefix` when it holds `{` or `}`.
  RedisLimiter(P policy, std::shared_ptr<ClusterRouter> router, std::string key_prefix, C clock = {})
      : RedisLimiter(std::move(policy), router,
                     with_prefix(own_options(router.get(), nullptr).limiter(), std::move(key_prefix)),
                     std::move(clock)) {}

  /// Checks `cost` units for `key` and consumes them if admitted (cost >= 1); one round trip (or none
  /// while the circuit breaker is open or the denial cache knows the answer). Thread-safe.
  /// Throws `std::invalid_argument` for a negative cost or a key longer than `max_key_bytes`;
  /// `BackendError` when Redis fails under `FailurePolicy::raise`.
  /// Example:
  ///   ratelimit::redis::RedisLimiter<ratelimit::FixedWindow> limiter(
  ///       ratelimit::FixedWindow{.limit = 1000, .window = std::chrono::hours(1)},
  ///       ratelimit::redis::ConnectionOptions::from_url("redis://redis.internal:6379"));
  ///   const ratelimit::Decision d = limiter.allow("api-key:7f3a", /*cost=*/5);
  ///   if (!d) { /* answer 429, Retry-After from d.retry_after */ }
  Decision allow(std::string_view key, std::int64_t cost = 1) { return run(key, cost, Mode::check, config()).decision; }

  /// As `allow`, and says who decided: `Outcome::failure_policy` when Redis failed and `on_error`
  /// (`fail_open`, `fail_closed`, or `fallback` from its in-memory share) answered. Thread-safe. Throws as
  /// `allow`.
  /// Example:
  ///   ratelimit::redis::RedisLimiter<ratelimit::Gcra> limiter(
  ///       ratelimit::Gcra{.limit = 10, .period = std::chrono::seconds(1), .burst = 10},
  ///       ratelimit::redis::ConnectionOptions::from_url("redis://redis.internal:6379"));
  ///   const ratelimit::CheckResult r = limiter.check("client-42");
  ///   if (r.failed()) { /* Redis failed: r.decision is the failure policy's (fail_open admits) */ }
  ///   if (!r) { /* answer 429 */ }
  CheckResult check(std::string_view key, std::int64_t cost = 1) { return run(key, cost, Mode::check, config()); }

  /// What a cost-1 request would see, consuming nothing (include/ratelimit/README.md "Decisions"). Thread-safe. Throws
  /// as `allow`.
  Decision peek(std::string_view key) { return run(key, 1, Mode::peek, config()).decision; }

  /// For a service's start-up (include/ratelimit/redis/README.md "Readiness at start-up"): connects, logs in and runs
  /// this limiter's script once (a peek, which writes nothing; the script stays cached on the server), retrying until
  /// Redis answers or `timeout` has passed (may overrun it by one attempt: `connect_timeout` plus
  /// `command_timeout`). On Redis Cluster it reaches one master (and loads the slot map); on Sentinel, the
  /// master the sentinels name. Ignores the failure policy, the fallback and the denial cache; counts no
  /// failure and calls no hook. Thread-safe. Throws `BackendError` naming the server and the last failure
  /// (e.g. "redis io: not ready within 2000 ms at 127.0.0.1:6379; the last failure: ... Connection
  /// refused"), `std::invalid_argument` for `timeout` outside (0, 24 h].
  /// Example:
  ///   ratelimit::redis::RedisLimiter<ratelimit::Gcra> limiter(
  ///       ratelimit::Gcra{.limit = 100, .period = std::chrono::minutes(1), .burst = 10},
  ///       ratelimit::redis::ConnectionOptions::from_url("redis://redis.internal:6379"));
  ///   try {
  ///     limiter.wait_ready(std::chrono::seconds(5));  // before serving traffic
  ///   } catch (const ratelimit::BackendError& e) {
  ///     std::fprintf(stderr, "not starting: %s\n", e.what());  // names the server and the last failure
  ///   }
  void wait_ready(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    detail::wait_until_ready(detail::servers_of(options_.connection()), timeout, [this] { return ready_once(); });
  }

  /// Gives back up to `cost` units `key` consumed (include/ratelimit/README.md "Refunds", the same formulas as
  /// `ratelimit::refund`, run in the policy's script with `ARGV[3] = "2"`), never past full. Returns the
  /// key's state afterwards as a cost-0 check sees it. Thread-safe. Throws as `allow`; when Redis fails
  /// and `on_error` is not `raise`, nothing is given back and a fresh key's state is returned (the
  /// failure is counted).
  Decision refund(std::string_view key, std::int64_t cost) { return run(key, cost, Mode::refund, config()).decision; }

  /// A policy of this limiter's kind validated for Redis, for calls that name it (`QuotaOverrides`: per-key
  /// quota overrides, include/ratelimit/layers/README.md "Per-key quota overrides"). Immutable; made by `prepare`.
  class PreparedPolicy;

  /// Validates `policy` for Redis and binds its script parameters, for the calls below that name it. Only a
  /// named limiter (`LimiterOptions::name`), as for `set_policy`: its Redis keys do not depend on the
  /// parameters, so a key checked under another policy keeps its Redis key, and the script converts its
  /// usage in units as `set_policy` does (include/ratelimit/README.md "Changing a policy at run time", Redis).
  /// Thread-safe. Throws `std::invalid_argument` naming the field (e.g. `Gcra.burst`), or `LimiterOptions.name`.
  [[nodiscard]] std::shared_ptr<const PreparedPolicy> prepare(P policy) const {
    if (options_.name.empty()) {
      ratelimit::detail::invalid("LimiterOptions.name",
                                 "per-call policies need a named limiter: an unnamed one's Redis keys are its "
                                 "parameters");
    }
    Config c = configured(std::move(policy));
    c.fallback_share = core_->fallback.prepare_share(c.policy);  // FailurePolicy::fallback answers under its share
    return std::make_shared<const PreparedPolicy>(PreparedPolicy(std::move(c)));
  }
  /// As `check(key, cost)`, under `policy` instead of `policy()`: the script gets `policy`'s parameters (and
  /// converts the key's state to them first, if it was written under others). The failure policy answers as
  /// for `check`, under `policy`: `fail_open` / `fail_closed` with its limit, `FailurePolicy::fallback` with this
  /// process's share of it (`share_of(policy, instances)`). Thread-safe. Throws as `check`.
  CheckResult check(std::string_view key, std::int64_t cost, const PreparedPolicy& policy) {
    return run(key, cost, Mode::check, policy.config_);
  }
  /// As `allow(key, cost)`, under `policy` (see `check` above).
  Decision allow(std::string_view key, std::int64_t cost, const PreparedPolicy& policy) {
    return run(key, cost, Mode::check, policy.config_).decision;
  }
  /// As `peek(key)`, under `policy` (a peek converts nothing it writes: it writes nothing).
  Decision peek(std::string_view key, const PreparedPolicy& policy) {
    return run(key, 1, Mode::peek, policy.config_).decision;
  }
  /// As `refund(key, cost)`, under `policy`.
  Decision refund(std::string_view key, std::int64_t cost, const PreparedPolicy& policy) {
    return run(key, cost, Mode::refund, policy.config_).decision;
  }

  /// The async `check` (include/ratelimit/redis/README.md "Redis engine"): starts the check and returns at once, never
  /// blocking. `callback(std::exception_ptr error, CheckResult result)` runs exactly once, on the I/O thread of the
  /// connection that carried the call (never inside this function): with Redis's decision, or when Redis failed (no
  /// reply by the deadline, connection lost, queue full, limiter destroyed) with the failure policy's decision
  /// (`Outcome::failure_policy`); under `FailurePolicy::raise` `error` then holds the `BackendError` (and `result` a
  /// fail_closed-style denial). A call cut after it was written may have run on the server; it is never re-sent. The
  /// callback must not throw (the process terminates) and must not block: a sync call on a `RedisLimiter` from it
  /// throws `std::logic_error`; async calls are fine. `timeout`: the call's deadline from now, in (0, 24 h]; by default
  /// `command_timeout`. The call keeps what it needs alive, so the limiter may be destroyed before it
  /// completes (include/ratelimit/redis/README.md "Redis engine", destruction). Thread-safe. Throws
  /// `std::invalid_argument` (key length, negative cost, timeout) and `std::logic_error` (used in a forked child) with
  /// nothing started.
  template <class F>
    requires std::invocable<F&, std::exception_ptr, CheckResult>
  void check_async(std::string_view key, std::int64_t cost, std::chrono::milliseconds timeout, F&& callback) {
    start_async(key, cost, Mode::check, timeout, std::forward<F>(callback));
  }
  /// As above with the deadline `command_timeout` from now.
  template <class F>
    requires std::invocable<F&, std::exception_ptr, CheckResult>
  void check_async(std::string_view key, std::int64_t cost, F&& callback) {
    start_async(key, cost, Mode::check, options_.command_timeout, std::forward<F>(callback));
  }

  /// The async `allow`: as `check_async`, with `callback(std::exception_ptr, Decision)`.
  template <class F>
    requires std::invocable<F&, std::exception_ptr, Decision>
  void allow_async(std::string_view key, std::int64_t cost, std::chrono::milliseconds timeout, F&& callback) {
    start_async(key, cost, Mode::check, timeout, decision_only(std::forward<F>(callback)));
  }
  /// As above with the deadline `command_timeout` from now.
  template <class F>
    requires std::invocable<F&, std::exception_ptr, Decision>
  void allow_async(std::string_view key, std::int64_t cost, F&& callback) {
    start_async(key, cost, Mode::check, options_.command_timeout, decision_only(std::forward<F>(callback)));
  }

  /// The async `peek`: as `check_async`, consuming nothing, with `callback(std::exception_ptr, Decision)`.
  template <class F>
    requires std::invocable<F&, std::exception_ptr, Decision>
  void peek_async(std::string_view key, F&& callback) {
    start_async(key, 1, Mode::peek, options_.command_timeout, decision_only(std::forward<F>(callback)));
  }

  /// The async `refund`: as `check_async`, with `callback(std::exception_ptr, Decision)` receiving the
  /// state afterwards (a fresh key's when Redis failed: nothing was given back, or it may have been).
  template <class F>
    requires std::invocable<F&, std::exception_ptr, Decision>
  void refund_async(std::string_view key, std::int64_t cost, F&& callback) {
    start_async(key, cost, Mode::refund, options_.command_timeout, decision_only(std::forward<F>(callback)));
  }

  /// Forgets the key's state (`DEL` of its Redis keys, its cached denial and the fallback's state of it). Thread-safe.
  /// Returns false when Redis failed and `on_error` is not `raise` (the failure is counted); throws `BackendError`
  /// under `raise`, and `std::invalid_argument` for a key longer than `max_key_bytes`.
  bool reset(std::string_view key) {
    check_key(key);
    core_->calls.fetch_add(1, std::memory_order_relaxed);
    core_->fallback.reset(key);
    if (core_->denials) core_->denials->invalidate(key);
    try {
      const std::string k = redis_key(key);
      RouteCall call;
      call.slot = detail::key_slot(k);
      call.args = {"DEL", k};
      route_->execute(std::span<RouteCall>(&call, 1));
      // Again once the DEL ran (or may have): a denial Redis gave before it may have been remembered meanwhile.
      if (core_->denials) core_->denials->invalidate(key);
      if (call.error) throw *call.error;
      if (call.reply->type == REDIS_REPLY_ERROR)
        throw BackendError(BackendErrorCause::reply, std::string(text(*call.reply)));
      if (call.reply->type != REDIS_REPLY_INTEGER)
        throw BackendError(BackendErrorCause::protocol, "DEL: not an integer reply");
      return true;
    } catch (const BackendError& e) {
      count_failure(e, 1);
      if (options_.on_error == FailurePolicy::raise) throw;
      return false;
    }
  }

  /// Checks many requests (any keys and costs) pipelined on one connection (per node on Redis Cluster);
  /// decisions come back in the order of `requests`. All share one time reading. Each request is atomic
  /// on its own, not the batch, and the requests of one key run in their order, also when the script
  /// cache is flushed meanwhile: one round trip when the keys are distinct, one per repetition of the
  /// most repeated key otherwise. Thread-safe. Validates every request first (throws
  /// `std::invalid_argument` naming the first bad request, `"requests[i].key: ..."` or `"requests[i].cost: ..."`,
  /// sending nothing). When the connection fails midway, the requests already
  /// sent may have been applied while their decisions are failure decisions (`on_error`); under `raise`
  /// the first failure is thrown after the replies are drained.
  /// Example:
  ///   ratelimit::redis::RedisLimiter<ratelimit::Gcra> limiter(
  ///       ratelimit::Gcra{.limit = 100, .period = std::chrono::seconds(1), .burst = 100},
  ///       ratelimit::redis::ConnectionOptions::from_url("redis://redis.internal:6379"));
  ///   const std::vector<ratelimit::redis::Request> batch = {{"user:1", 1}, {"user:2", 3}, {"user:1", 1}};
  ///   const std::vector<ratelimit::Decision> decisions = limiter.allow_many(batch);  // one round trip
  ///   for (std::size_t i = 0; i < batch.size(); ++i) {
  ///     if (!decisions[i]) { /* drop the message of batch[i].key */ }
  ///   }
  std::vector<Decision> allow_many(std::span<const Request> requests) {
    std::vector<Decision> out;
    out.reserve(requests.size());
    for (const CheckResult& r : check_many(requests)) out.push_back(r.decision);
    return out;
  }

  /// As `allow_many`, and says for each request who decided (`Outcome::failure_policy` when Redis failed
  /// and `on_error` answered). Thread-safe. Throws as `allow_many`.
  /// Example:
  ///   ratelimit::redis::RedisLimiter<ratelimit::FixedWindow> limiter(
  ///       ratelimit::FixedWindow{.limit = 50, .window = std::chrono::seconds(1)},
  ///       ratelimit::redis::ConnectionOptions::from_url("redis://redis.internal:6379"));
  ///   const ratelimit::BatchRequest batch[] = {{"tenant:a", 10}, {"tenant:b", 20}};
  ///   for (const ratelimit::CheckResult& r : limiter.check_many(batch)) {
  ///     if (r.failed()) { /* Redis failed for this request: the failure policy answered */ }
  ///   }
  std::vector<CheckResult> check_many(std::span<const Request> requests) {
    ratelimit::detail::validate_batch(requests, options_.max_key_bytes);
    std::vector<CheckResult> out;
    if (requests.empty()) return out;
    out.reserve(requests.size());
    const std::int64_t now = now_us();
    core_->calls.fetch_add(requests.size(), std::memory_order_relaxed);
    return run_many(requests, Mode::check, now, config());
  }

  /// The limiter's counters. Thread-safe.
  [[nodiscard]] RedisStats stats() const noexcept {
    RedisStats s;
    static_cast<RouteCounters&>(s) = route_->counters();
    s.calls = core_->calls.load(std::memory_order_relaxed);
    s.failures = core_->failures.load(std::memory_order_relaxed);
    s.io_errors = core_->by_cause[0].load(std::memory_order_relaxed);
    s.timeouts = core_->by_cause[1].load(std::memory_order_relaxed);
    s.protocol_errors = core_->by_cause[2].load(std::memory_order_relaxed);
    s.reply_errors = core_->by_cause[3].load(std::memory_order_relaxed);
    s.short_circuited = core_->by_cause[4].load(std::memory_order_relaxed);
    s.script_reloads = core_->script_reloads.load(std::memory_order_relaxed);
    for (std::size_t i = 0; i < s.latency.buckets.size(); ++i) {
      s.latency.buckets[i] = core_->latency_buckets[i].load(std::memory_order_relaxed);
    }
    s.latency.sum_us = core_->latency_sum_us.load(std::memory_order_relaxed);
    s.cached_denials = core_->cached_denials.load(std::memory_order_relaxed);
    static_cast<FallbackCounters&>(s) = core_->fallback.counters();
    return s;
  }

  /// The Redis key holding `key`'s state: `<prefix><identity>{<encoded key>}<suffix>`, the identity being
  /// `<kind>:<parameters>` or, with `LimiterOptions::name`, `<kind>@<name>` (include/ratelimit/redis/README.md "Redis
  /// backend").
  [[nodiscard]] std::string redis_key(std::string_view key) const {
    return detail::redis_key(options_.key_prefix, identity_, key, config().binding.suffix);
  }
  /// This limiter's identity in its Redis keys (see `redis_key`). Thread-safe (immutable).
  [[nodiscard]] const std::string& identity() const noexcept { return identity_; }

  /// The policy now, as given (durations in nanoseconds). Thread-safe; the reference stays valid, and its
  /// value unchanged, while the limiter lives (`set_policy` keeps every policy it was given).
  [[nodiscard]] const P& policy() const noexcept { return config().policy; }
  /// The validated rules now, in ticks of 1 us (Redis's time unit). Thread-safe; valid as `policy()`.
  [[nodiscard]] const RulesOf<P>& rules() const noexcept { return config().rules; }

  /// Replaces the policy at run time, keeping every key's usage (include/ratelimit/README.md "Changing a policy at run
  /// time", Redis): only a named limiter (`LimiterOptions::name`), whose Redis keys do not depend on the parameters.
  /// Each key's state carries the parameters it was written under, and the script converts it to the caller's
  /// parameters on its next touch (the same formulas as `MemoryLimiter::set_policy`, at that touch's time), so the
  /// processes of a fleet may change at different times. Thread-safe: a call started before sends the old parameters,
  /// one started after the new ones; each call's decision is wholly one policy's. Throws `std::invalid_argument` naming
  /// the field for a bad policy, or `LimiterOptions.name` for an unnamed limiter (its identity is its parameters:
  /// changing them would start fresh keys), changing nothing.
  void set_policy(P policy) {
    if (options_.name.empty()) {
      ratelimit::detail::invalid("LimiterOptions.name",
                                 "set_policy needs a named limiter: an unnamed one's Redis keys are its parameters");
    }
    RulesOf<P> rules = policy.rules(detail::kTickNs);
    detail::ScriptBinding binding = detail::bind<P>(rules);
    // One change at a time: two racing changes could otherwise leave the fallback on one's share and the
    // calls on the other's policy.
    std::lock_guard change(core_->change_mutex);
    core_->fallback.set_policy(policy);  // its share too (throws for a bad share before anything changed)
    core_->set_config(Config{std::move(policy), std::move(rules), std::move(binding)});
    // Also a return to a policy given before (same id): what it had cached may no longer be true.
    if (core_->denials) core_->denials->invalidate_all();
  }
  /// How many times `set_policy` has run (0 at first): a layer re-reads `policy()` when it moved.
  /// Thread-safe (one load, no lock).
  [[nodiscard]] std::uint64_t policy_generation() const noexcept {
    return core_->generation.load(std::memory_order_acquire);
  }
  /// The options in effect: the route's connection options and this limiter's own. Thread-safe (immutable).
  [[nodiscard]] const RedisOptions& options() const noexcept { return options_; }
  [[nodiscard]] C& clock() noexcept { return clock_; }
  /// The embedded Lua script this limiter runs (its body is lua/<kind>.lua's parts and main, assembled).
  [[nodiscard]] const detail::EmbeddedScript& script() const noexcept { return *config().binding.script; }
  /// The cluster router (null when not on Redis Cluster).
  [[nodiscard]] std::shared_ptr<ClusterRouter> cluster() const noexcept {
    return std::shared_ptr<ClusterRouter>(route_, route_->cluster_router());
  }
  /// Where this limiter's commands go (its pool's server, or its cluster router).
  [[nodiscard]] const std::shared_ptr<Route>& route() const noexcept { return route_; }

  /// The pool, or on Redis Cluster the router: limiters sharing it can be checked jointly.
  [[nodiscard]] const void* joint_domain() const noexcept override { return route_->domain(); }

  /// All-or-nothing check of `requests` (each naming a `RedisLimiter` with this one's `joint_domain()`,
  /// any policies and clocks) as one `EVALSHA` of lua/layered.lua; see `JointBackend::check_jointly`.
  /// Each limiter reads its own clock (`time_source = server` limiters share one `TIME` reading).
  /// Returns false, sending nothing, when the keys are in different cluster slots or two requests name
  /// the same Redis key (check them one by one then); also false, with nothing applied, when the slot is
  /// migrating and the cluster refuses the multi-key script (`TRYAGAIN`). When Redis fails, every
  /// limiter counts the failure; if any has `on_error = raise`, `BackendError` is thrown; otherwise each
  /// gives its own failure decision (fail_open admits as a fresh key, fail_closed denies), all or
  /// nothing as above.
  /// Thread-safe. Throws `std::invalid_argument` for a negative cost or a key over `max_key_bytes`.
  bool check_jointly(std::span<const JointRequest> requests, std::span<CheckResult> results) override {
    return detail::run_layered(*this, requests, results);
  }

 private:
  // detail::LayeredMember, for run_layered.
  [[nodiscard]] Route& layered_route() const noexcept override { return *route_; }
  [[nodiscard]] detail::LayeredPart layered_part(std::string_view key, std::int64_t cost) override {
    check_key(key);
    ratelimit::detail::require_cost(cost);
    detail::LayeredPart p;
    p.key = redis_key(key);
    p.now_us = now_us();
    p.cost = cost;
    p.argv[0] = std::string(P::kind);
    p.argv[1] = time_arg(p.now_us);
    p.argv[2] = std::to_string(cost);
    const Config& c = config();
    for (std::size_t i = 0; i < detail::kScriptParams; ++i) p.argv[3 + i] = c.binding.params[i];
    p.policy = &c;
    return p;
  }
  [[nodiscard]] Decision layered_decision(const redisReply& r, const detail::LayeredPart& part) const override {
    const auto* c = static_cast<const Config*>(part.policy);
    return to_decision(detail::parse_decision(r, (c != nullptr ? *c : config()).rules.limit()), detail::kTickNs);
  }
  void layered_called() noexcept override { core_->calls.fetch_add(1, std::memory_order_relaxed); }
  void layered_failed(const BackendError& e) noexcept override {
    count_failure(e, 1);
    if (core_->fallback.enabled()) core_->fallback.observe(&e);
  }
  [[nodiscard]] JointBackend* layered_fallback() noexcept override { return core_->fallback.memory(); }
  void layered_fallback_served() noexcept override { core_->fallback.count_served(); }
  [[nodiscard]] FailurePolicy layered_on_error() const noexcept override { return options_.on_error; }
  [[nodiscard]] Decision layered_failure_decision(std::int64_t now, std::int64_t cost) const override {
    return failure_decision(now, cost, Mode::check);
  }
  void layered_reloaded(std::size_t n) noexcept override {
    core_->script_reloads.fetch_add(n, std::memory_order_relaxed);
  }

  /// One policy with what its calls send: its rules at 1 us and its script binding (immutable).
  struct Config {
    P policy;
    RulesOf<P> rules;
    detail::ScriptBinding binding;
    /// Unique in the process (never 0), for the denial cache: an address could be reused by the next
    /// override's policy once the last one is freed.
    std::uint64_t id = next_config_id();
    /// A per-call policy's share in the fallback (`FailurePolicy::fallback`); null for the limiter's own
    /// policies (the fallback's `MemoryLimiter` holds their share).
    std::shared_ptr<const typename detail::Fallback<P, C, detail::GateClock<C>>::Share> fallback_share{};
  };
  static std::uint64_t next_config_id() noexcept {
    static std::atomic<std::uint64_t> last{0};
    return last.fetch_add(1, std::memory_order_relaxed) + 1;
  }

 public:
  class PreparedPolicy {
   public:
    explicit PreparedPolicy(Config c) : config_(std::move(c)) {}  // only RedisLimiter can name a Config
    /// The policy as given.
    [[nodiscard]] const P& policy() const noexcept { return config_.policy; }
    /// Its validated rules in ticks of 1 us.
    [[nodiscard]] const RulesOf<P>& rules() const noexcept { return config_.rules; }

   private:
    friend class RedisLimiter;
    Config config_;
  };

 private:
  /// ARGV[3] of the scripts.
  enum class Mode { check, peek, refund };
  static constexpr std::string_view mode_arg(Mode m) noexcept {
    return m == Mode::check ? "0" : (m == Mode::peek ? "1" : "2");
  }

  RedisLimiter(P policy, std::shared_ptr<Route> route, C clock, const LimiterOptions* limiter)
      : route_(std::move(route)),
        options_(checked(own_options(route_.get(), limiter))),
        clock_(std::move(clock)),
        core_(std::make_shared<Core>(configured(std::move(policy)), options_, clock_)),
        identity_(detail::limiter_identity(P::kind, options_.name, config().binding.params)) {}

  /// A policy with its rules at 1 us and its script binding; throws `std::invalid_argument` naming the field.
  static Config configured(P policy) {
    RulesOf<P> rules = policy.rules(detail::kTickNs);
    detail::ScriptBinding binding = detail::bind<P>(rules);
    return Config{std::move(policy), std::move(rules), std::move(binding)};
  }
  /// The policy now (one acquire load).
  [[nodiscard]] const Config& config() const noexcept { return *core_->current.load(std::memory_order_acquire); }

  static std::shared_ptr<Route> make_route(const ConnectionOptions& options) { return redis::make_route(options); }
  static std::shared_ptr<Route> server_route(std::shared_ptr<ConnectionPool> pool) {
    return std::make_shared<ServerRoute>(std::move(pool));
  }

  static RedisOptions own_options(const Route* route, const LimiterOptions* limiter) {
    if (route == nullptr) throw std::invalid_argument("RedisLimiter: null router");
    RedisOptions o;
    o.connection() = route->options();
    o.limiter() = limiter != nullptr ? *limiter : route->limiter_defaults();
    return o;
  }

  /// Every request as its own script call, through the route (pipelined, per node on Redis Cluster) and
  /// the executor (NOSCRIPT, each key's order); failures are per request. Under `raise`, the first
  /// failure is thrown after every request was answered or failed.
  std::vector<CheckResult> run_many(std::span<const Request> requests, Mode mode, std::int64_t now,
                                    const Config& config) {
    if (!core_->denials || mode != Mode::check) return send_many(requests, mode, now, config);
    // The denial cache answers what it can; the rest goes to Redis in one batch, in request order.
    const std::int64_t t = core_->mono_ns();
    std::vector<CheckResult> out(requests.size());
    std::vector<bool> local(requests.size(), false);
    std::vector<Request> rest;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (core_->denials->lookup(requests[i].key, requests[i].cost, t, out[i].decision, config.id)) {
        local[i] = true;
        core_->cached_denials.fetch_add(1, std::memory_order_relaxed);
      } else {
        rest.push_back(requests[i]);
      }
    }
    if (rest.size() == requests.size()) return send_many(requests, mode, now, config);
    if (rest.empty()) return out;
    std::vector<CheckResult> sent = send_many(rest, mode, now, config);
    for (std::size_t i = 0, k = 0; i < requests.size(); ++i) {
      if (!local[i]) out[i] = sent[k++];
    }
    return out;
  }

  /// Every request to Redis (or, while its gate is shut, to the fallback); see `run_many`.
  /// `config`: one policy for the whole batch (the current one, or a `PreparedPolicy`'s).
  std::vector<CheckResult> send_many(std::span<const Request> requests, Mode mode, std::int64_t now,
                                     const Config& config) {
    const std::string now_arg = time_arg(now);
    std::vector<std::string> keys(requests.size());
    std::vector<std::string> costs(requests.size());
    std::vector<RouteCall> calls(requests.size());
    std::vector<std::string_view> order(requests.size());
    std::vector<detail::DenialCache::Stamp> stamps(core_->denials ? requests.size() : 0);
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (core_->denials) stamps[i] = core_->denials->stamp(requests[i].key);  // before the send
      keys[i] = redis_key(requests[i].key);
      costs[i] = std::to_string(requests[i].cost);
      calls[i].slot = detail::key_slot(keys[i]);
      calls[i].key = keys[i];  // two requests on one key stay in request order
      fill_args(calls[i].args, config.binding, keys[i], now_arg, costs[i], mode);
      order[i] = keys[i];
    }
    const std::span<const std::string_view> order_keys =
        requests.size() > 1 ? std::span<const std::string_view>(order) : std::span<const std::string_view>();
    std::vector<CheckResult> out;
    out.reserve(requests.size());
    Fallback& fallback = core_->fallback;
    // A ticket always (unguarded without a fallback, reporting to nothing), as `LeasedLimiter`'s gate.
    using Ticket = typename CircuitBreaker<detail::GateClock<C>>::Ticket;
    Ticket ticket = fallback.enabled() ? fallback.admit() : Ticket::unguarded();
    if (!ticket) {  // Redis is failing and no probe is due: the fallback answers, Redis is not asked
      for (const Request& r : requests) out.push_back(serve_fallback(r.key, r.cost, mode, config));
      return out;
    }
    const std::int64_t sent = core_->denials ? core_->mono_ns() : 0;
    const auto started = std::chrono::steady_clock::now();
    const std::size_t reloads = run_script(*route_, *config.binding.script, calls, order_keys);
    core_->record_latency(std::chrono::steady_clock::now() - started);
    if (reloads != 0) core_->script_reloads.fetch_add(reloads, std::memory_order_relaxed);
    std::optional<BackendError> first;
    bool any_reply = false;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      try {
        if (calls[i].error) throw *calls[i].error;
        any_reply = true;
        out.push_back(core_->decided(*calls[i].reply, config));
        core_->learn(requests[i].key, requests[i].cost, mode, out.back().decision, sent, config,
                     core_->denials ? stamps[i] : 0);
      } catch (const BackendError& e) {
        count_failure(e, 1);
        core_->learn_failure(requests[i].key, mode);
        if (calls[i].reply) any_reply = true;  // an error reply: the server is alive
        if (!first) first = e;
        out.push_back(fallback.enabled() ? serve_fallback(requests[i].key, requests[i].cost, mode, config)
                                         : core_->failed(now, requests[i].cost, mode, config));
      }
    }
    Fallback::settle(ticket, any_reply ? nullptr : &*first);
    if (first && options_.on_error == FailurePolicy::raise) throw *first;
    return out;
  }

  /// One peek of the empty key for `wait_ready`, outside the failure policy: empty when Redis answered.
  std::optional<BackendError> ready_once() {
    const Config& c = config();
    const std::string key = redis_key("");
    const std::string now = time_arg(now_us());
    RouteCall call;
    call.slot = detail::key_slot(key);
    fill_args(call.args, c.binding, key, now, "1", Mode::peek);
    (void)run_script(*route_, *c.binding.script, std::span<RouteCall>(&call, 1));
    if (call.error) return call.error;
    try {
      (void)core_->decided(*call.reply, c);
    } catch (const BackendError& e) {  // an error reply (NOPERM, LOADING, ...) or a malformed one
      return e;
    }
    return std::nullopt;
  }

  static LimiterOptions with_prefix(LimiterOptions o, std::string prefix) {
    o.key_prefix = std::move(prefix);
    return o;
  }

  static RedisOptions checked(RedisOptions o) {
    if (o.key_prefix.find_first_of("{}") != std::string::npos) {
      ratelimit::detail::invalid("LimiterOptions.key_prefix",
                                 "must not contain '{' or '}' (they delimit the hash tag)");
    }
    if (o.name.find_first_of("{}") != std::string::npos) {
      ratelimit::detail::invalid("LimiterOptions.name", "must not contain '{' or '}' (they delimit the hash tag)");
    }
    if (o.name.size() > 256) ratelimit::detail::invalid("LimiterOptions.name", "must be at most 256 bytes");
    if (o.deny_cache.enabled && o.deny_cache.max_keys < 1) {
      ratelimit::detail::invalid("LimiterOptions.deny_cache.max_keys", "must be >= 1");
    }
    if (o.max_key_bytes > (std::size_t{1} << 20))
      ratelimit::detail::invalid("LimiterOptions.max_key_bytes", "must be <= 2^20");
    // A denial always names a wait (acquire and Retry-After rely on it), and one in nanoseconds must fit.
    if (o.failure_retry_after.count() <= 0 || o.failure_retry_after > std::chrono::days(365)) {
      ratelimit::detail::invalid("LimiterOptions.failure_retry_after", "must be in (0, 365 days]");
    }
    return o;
  }

  void check_key(std::string_view key) const { ratelimit::detail::check_key_length(key, options_.max_key_bytes); }

  /// The client clock in whole microseconds (floor), kept where every script value stays exact.
  std::int64_t now_us() {
    const std::int64_t t = ratelimit::detail::floor_div(ratelimit::detail::now_ns(clock_), detail::kTickNs);
    return t < -detail::kMaxTimeUs ? -detail::kMaxTimeUs : (t > detail::kMaxTimeUs ? detail::kMaxTimeUs : t);
  }

  /// ARGV[1]: the client time, or "" for the script to read the server's TIME.
  std::string time_arg(std::int64_t now) const {
    return options_.time_source == TimeSource::client ? std::to_string(now) : std::string();
  }

  /// {EVALSHA, script, 1, key, now, cost, mode, the script's two parameters}
  static void fill_args(std::vector<std::string_view>& args, const detail::ScriptBinding& binding, std::string_view key,
                        std::string_view now, std::string_view cost, Mode mode) {
    // Assigned from an array, not inserted from an initializer list: GCC 12 warns falsely
    // (-Wstringop-overflow) on the latter when optimizing, and users build with -Werror too.
    const std::array<std::string_view, 7> fixed{"EVALSHA", binding.script->sha1, "1", key, now, cost, mode_arg(mode)};
    args.assign(fixed.begin(), fixed.end());
    for (std::size_t i = 0; i < detail::kScriptParams; ++i) args.push_back(binding.params[i]);
  }

  CheckResult run(std::string_view key, std::int64_t cost, Mode mode, const Config& config) {
    check_key(key);
    ratelimit::detail::require_cost(cost);
    const std::int64_t now = now_us();
    core_->calls.fetch_add(1, std::memory_order_relaxed);
    const Request one{key, cost};
    return run_many(std::span<const Request>(&one, 1), mode, now, config).front();
  }

  using Fallback = detail::Fallback<P, C, detail::GateClock<C>>;

  void count_failure(const BackendError& e, std::size_t n) noexcept { core_->count_failure(e, n); }
  CheckResult serve_fallback(std::string_view key, std::int64_t cost, Mode mode, const Config& config) {
    return core_->fallback.serve(key, cost, mode == Mode::peek, mode == Mode::refund, config.fallback_share.get());
  }
  Decision failure_decision(std::int64_t now, std::int64_t cost, Mode mode) const {
    return core_->failure_decision(now, cost, mode, config());
  }

  /// What a call needs after it was started, shared with its async completion (which may outlive the
  /// limiter): the policies, the failure policy and the counters.
  struct Core {
    std::mutex change_mutex;     // serializes set_policy (the fallback's share, then the policy)
    std::mutex configs_mutex;    // guards appending to configs
    std::deque<Config> configs;  // every policy given so far, each once (a deque: references stay valid)
    std::atomic<const Config*> current;
    std::atomic<std::uint64_t> generation{0};
    FailurePolicy on_error;
    std::chrono::milliseconds failure_retry_after;
    std::atomic<std::uint64_t> calls{0};
    std::atomic<std::uint64_t> failures{0};
    std::array<std::atomic<std::uint64_t>, 5> by_cause{};  // by BackendErrorCause
    std::atomic<std::uint64_t> script_reloads{0};
    std::array<std::atomic<std::uint64_t>, BackendLatency::kBoundsUs.size() + 1> latency_buckets{};
    std::atomic<std::uint64_t> latency_sum_us{0};

    /// One backend call's latency, into the histogram of `RedisStats::latency` (two relaxed additions).
    void record_latency(std::chrono::steady_clock::duration d) noexcept {
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
      const std::uint64_t u = us > 0 ? static_cast<std::uint64_t>(us) : 0;
      latency_buckets[BackendLatency::bucket_of(u)].fetch_add(1, std::memory_order_relaxed);
      latency_sum_us.fetch_add(u, std::memory_order_relaxed);
    }

    std::atomic<std::uint64_t> cached_denials{0};
    std::function<void(const BackendError&)> on_backend_failure;
    detail::GateClock<C> mono;                     // the denial cache's time
    std::unique_ptr<detail::DenialCache> denials;  // null unless deny_cache.enabled
    Fallback fallback;                             // holds nothing unless on_error is fallback

    Core(Config first, const RedisOptions& o, const C& clock)
        : configs{std::move(first)},
          current(&configs.front()),
          on_error(o.on_error),
          failure_retry_after(o.failure_retry_after),
          on_backend_failure(detail::failure_hook(o, detail::gate_clock(clock))),
          mono(detail::gate_clock(clock)),
          denials(o.deny_cache.enabled ? std::make_unique<detail::DenialCache>(o.deny_cache.max_keys) : nullptr),
          fallback(configs.front().policy, o.limiter(), clock, detail::gate_clock(clock)) {}

    /// Makes `c` the policy of the calls that start from now on; a policy given before is reused.
    void set_config(Config c) {
      std::lock_guard guard(configs_mutex);
      const Config* same = nullptr;
      for (const Config& known : configs) {
        if (known.binding.params == c.binding.params) same = &known;
      }
      current.store(same != nullptr ? same : &configs.emplace_back(std::move(c)), std::memory_order_release);
      generation.fetch_add(1, std::memory_order_release);
    }

    [[nodiscard]] std::int64_t mono_ns() { return ratelimit::detail::now_ns(mono); }

    /// Feeds Redis's decision `d` of a call sent at `sent` (monotonic ns, with the key's denial `stamp`) under
    /// `c` to the denial cache: a denial of a check is remembered (valid while `c` is the policy: lookups pass
    /// the current one) unless a refund or reset returned since the send; an admission forgets the key's, a
    /// refund also every denial sent before it (include/ratelimit/redis/README.md "Denial cache").
    void learn(std::string_view key, std::int64_t cost, Mode mode, const Decision& d, std::int64_t sent,
               const Config& c, detail::DenialCache::Stamp stamp) {
      if (!denials || mode == Mode::peek) return;
      if (mode == Mode::refund) {
        denials->invalidate(key);
      } else if (!d.allowed && cost > 0) {
        denials->remember(key, cost, d, sent, mono_ns(), c.id, stamp);
      } else if (d.allowed) {
        denials->forget(key);
      }
    }
    /// A failed refund may have run: as a refund for the denial cache.
    void learn_failure(std::string_view key, Mode mode) {
      if (denials && mode == Mode::refund) denials->invalidate(key);
    }

    /// Counts `n` failures of `e`'s cause and tells the hook once.
    void count_failure(const BackendError& e, std::size_t n) noexcept {
      failures.fetch_add(n, std::memory_order_relaxed);
      by_cause[static_cast<std::size_t>(e.cause())].fetch_add(n, std::memory_order_relaxed);
      if (on_backend_failure) {
        try {
          on_backend_failure(e);
        } catch (...) {  // a hook must not turn a failure policy's answer into an exception
        }
      }
    }

    /// The decision in a script's reply; throws `BackendError` if it breaks the contract.
    CheckResult decided(const redisReply& r, const Config& c) const {
      return {to_decision(detail::parse_decision(r, c.rules.limit()), detail::kTickNs), Outcome::decided};
    }
    /// The failure policy's answer (see `failure_decision`), marked as such.
    CheckResult failed(std::int64_t now, std::int64_t cost, Mode mode, const Config& c) const {
      return {failure_decision(now, cost, mode, c), Outcome::failure_policy};
    }

    /// fail_open: what a fresh key would get (so a cost above the limit is still `never`);
    /// fail_closed: a denial with `failure_retry_after`. A failed refund gives nothing back: a fresh key's
    /// state under either.
    Decision failure_decision(std::int64_t now, std::int64_t cost, Mode mode, const Config& c) const {
      const RulesOf<P>& rules = c.rules;
      const bool peek = mode == Mode::peek;
      if (mode == Mode::refund) return to_decision(rules.evaluate(StateOf<P>{}, now, 0), detail::kTickNs);
      if (on_error == FailurePolicy::fail_open) {
        const StateOf<P> fresh{};
        const TickDecision d = peek ? ratelimit::peek(rules, fresh, now) : rules.evaluate(fresh, now, cost);
        return to_decision(d, detail::kTickNs);
      }
      const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(failure_retry_after);
      return Decision{false, rules.limit(), 0, wait, wait};
    }
  };

  /// One async script call of this limiter; owns itself from `start` until its callback ran.
  template <class G>
  class AsyncCheck final : public AsyncScriptCall {
   public:
    AsyncCheck(const Config& config, std::shared_ptr<Core> core, std::int64_t now, std::int64_t cost, Mode mode, G g)
        : AsyncScriptCall(*config.binding.script),
          core_(std::move(core)),
          config_(config),
          now_(now),
          cost_(cost),
          mode_(mode),
          g_(std::move(g)) {}

    /// With the fallback: the gate's ticket (a refused one: the call is sent with a past deadline, so it is
    /// never written and completes on the I/O thread, where the fallback answers), and the user key.
    std::optional<typename CircuitBreaker<detail::GateClock<C>>::Ticket> ticket;
    std::string user_key;
    /// With the denial cache: its answer (the call is then never written, as above), and the send time.
    std::optional<Decision> cached;
    std::int64_t sent_ns = 0;
    detail::DenialCache::Stamp stamp = 0;

   private:
    void finished(Reply reply, std::optional<BackendError> error, bool reloaded) noexcept override {
      core_->record_latency(std::chrono::steady_clock::now() - started_);
      if (reloaded) core_->script_reloads.fetch_add(1, std::memory_order_relaxed);
      CheckResult result{};
      std::exception_ptr failure;
      const bool gated = ticket && !*ticket;
      try {
        if (cached) {
          result = {*cached, Outcome::decided};
        } else if (gated) {
          result = serve();
        } else {
          if (error) throw *error;
          if (ticket) Fallback::settle(*ticket, nullptr);
          result = core_->decided(*reply, config_);
          core_->learn(user_key, cost_, mode_, result.decision, sent_ns, config_, stamp);
        }
      } catch (const BackendError& e) {
        core_->count_failure(e, 1);
        core_->learn_failure(user_key, mode_);
        if (ticket) Fallback::settle(*ticket, reply ? nullptr : &e);
        try {
          result = ticket ? serve() : core_->failed(now_, cost_, mode_, config_);
        } catch (...) {  // the fallback's allocation failed: the plain failure decision
          result = core_->failed(now_, cost_, mode_, config_);
        }
        if (core_->on_error == FailurePolicy::raise) failure = std::current_exception();
      } catch (...) {
        result = core_->failed(now_, cost_, mode_, config_);
      }
      G g = std::move(g_);
      delete this;  // before the callback: it may destroy what this call references
      g(failure, result);
    }

    CheckResult serve() {
      return core_->fallback.serve(user_key, cost_, mode_ == Mode::peek, mode_ == Mode::refund,
                                   config_.fallback_share.get());
    }

    std::shared_ptr<Core> core_;
    const Config& config_;  // the policy it was sent under (kept by core_)
    std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
    std::int64_t now_;
    std::int64_t cost_;
    Mode mode_;
    G g_;
  };

  template <class F>
  static auto decision_only(F&& f) {
    return [f = std::forward<F>(f)](std::exception_ptr e, const CheckResult& r) mutable { f(e, r.decision); };
  }

  template <class G>
  void start_async(std::string_view key, std::int64_t cost, Mode mode, std::chrono::milliseconds timeout, G&& g) {
    check_key(key);
    ratelimit::detail::require_cost(cost);
    if (timeout.count() <= 0 || timeout > std::chrono::hours(24)) {
      ratelimit::detail::invalid("timeout", "must be in (0, 24 h]");
    }
    const std::int64_t now = now_us();
    const Config& config = this->config();
    auto call = std::make_unique<AsyncCheck<std::decay_t<G>>>(config, core_, now, cost, mode, std::forward<G>(g));
    std::string k = redis_key(key);
    call->slot = detail::key_slot(k);
    call->deadline = std::chrono::steady_clock::now() + timeout;
    if (core_->denials) {
      call->user_key = std::string(key);
      call->stamp = core_->denials->stamp(key);
      call->sent_ns = core_->mono_ns();
      Decision d;
      if (mode == Mode::check && core_->denials->lookup(key, cost, call->sent_ns, d, config.id)) {
        call->cached = d;
        call->deadline = std::chrono::steady_clock::time_point{};  // never written, answered on the I/O thread
        core_->cached_denials.fetch_add(1, std::memory_order_relaxed);
      }
    }
    if (core_->fallback.enabled() && !call->cached) {
      call->ticket.emplace(core_->fallback.admit());
      call->user_key = std::string(key);
      // Redis is failing and no probe is due: never written (include/ratelimit/redis/README.md "Redis engine",
      // deadlines), answered by the fallback on the I/O thread, as every async callback runs.
      if (!*call->ticket) call->deadline = std::chrono::steady_clock::time_point{};
    }
    const std::array<std::string_view, 3> head{"EVALSHA", config.binding.script->sha1, "1"};
    call->args.assign(head.begin(), head.end());
    call->args.push_back(std::move(k));
    call->args.push_back(time_arg(now));
    call->args.push_back(std::to_string(cost));
    call->args.emplace_back(mode_arg(mode));
    for (const std::string& p : config.binding.params) call->args.push_back(p);
    call->start(*route_);  // throws only with nothing started (then `call` still owns it)
    core_->calls.fetch_add(1, std::memory_order_relaxed);
    (void)call.release();  // owned by the route until it completes
  }

  std::shared_ptr<Route> route_;  // a server's pool, or the cluster router
  RedisOptions options_;
  C clock_;
  std::shared_ptr<Core> core_;  // also the policies (set_policy), shared with async calls
  std::string identity_;        // <kind>:<params> or <kind>@<name>
};

}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
