#pragma once

/// @file
/// `RedisLimiter`: a policy checked atomically in Redis, shared by every process that uses the server.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ratelimit/batch_request.hpp"
#include "ratelimit/clock.hpp"
#include "ratelimit/decision.hpp"
#include "ratelimit/detail/key_length.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/policy/policy.hpp"
#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/detail/answer.hpp"
#include "ratelimit/redis/detail/key_encoding.hpp"
#include "ratelimit/redis/detail/layered_call.hpp"
#include "ratelimit/redis/detail/limiter_setup.hpp"
#include "ratelimit/redis/engine/pool.hpp"
#include "ratelimit/redis/engine/routes.hpp"
#include "ratelimit/redis/engine/slots.hpp"
#include "ratelimit/redis/failure_report.hpp"
#include "ratelimit/redis/options.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {

/// One check of a batch for `RedisLimiter::allow_many` (every backend's batch takes `ratelimit::BatchRequest`).
using Request = ratelimit::BatchRequest;

/// The Redis backend (include/ratelimit/README.md "Redis contract"): each check is one atomic Lua script on the key's
/// Redis key, so every process sharing the server shares each key's limit exactly. Thread-safe; the `*_async` methods
/// never block. When Redis fails, `LimiterOptions::on_error` answers (include/ratelimit/redis/README.md "Failures").
/// @tparam P a `Policy`: durations whole microseconds, rate at most one per microsecond, counts below 2^53, for
///           `SlidingWindowCounter` `limit * window_us <= 2^53`.
/// @tparam C a `Clock`, read with `time_source = client` and for `fail_open` decisions; windows align to its epoch.
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
  using Mode = detail::Mode;
  using Answer = detail::Answer<P, C, detail::GateClock<C>>;
  using Config = detail::PolicyConfig<P, typename Answer::Share>;

 public:
  using policy_type = P;
  using clock_type = C;

  /// Validates the policy and the options and makes a route of its own (`make_route`); connects nothing yet. Throws
  /// `std::invalid_argument` naming the field (e.g. `Gcra.period`, `LimiterOptions.key_prefix`).
  RedisLimiter(P policy, const RedisOptions& options, C clock = {})
      : RedisLimiter(std::move(policy), make_route(options.connection()), std::move(clock), &options.limiter()) {}

  /// As above, from the two halves of the options. Throws `std::invalid_argument` as above.
  RedisLimiter(P policy, const ConnectionOptions& connection, const LimiterOptions& limiter = {}, C clock = {})
      : RedisLimiter(std::move(policy), make_route(connection), std::move(clock), &limiter) {}

  /// Sharing `route` (a `ConnectionPool`, `ClusterRouter` or `SentinelRoute`) with other limiters, e.g. the layers
  /// of a layered limit, under the route's `limiter_defaults()`. Throws `std::invalid_argument` as above.
  template <class R>
  RedisLimiter(P policy, std::shared_ptr<R> route, C clock = {})
      : RedisLimiter(std::move(policy), detail::route_of(std::move(route)), std::move(clock), nullptr) {}

  /// As above with this limiter's own options, e.g. each layer named. Throws `std::invalid_argument` as above.
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
  template <class R>
  RedisLimiter(P policy, std::shared_ptr<R> route, const LimiterOptions& limiter, C clock = {})
      : RedisLimiter(std::move(policy), detail::route_of(std::move(route)), std::move(clock), &limiter) {}

  /// As above with the route's limiter defaults but this limiter's own `key_prefix`. Throws `std::invalid_argument`
  /// naming `LimiterOptions.key_prefix` when it holds `{` or `}`.
  template <class R>
  RedisLimiter(P policy, std::shared_ptr<R> route, std::string key_prefix, C clock = {})
      : RedisLimiter(std::move(policy), detail::route_of(std::move(route)), std::move(clock), nullptr,
                     std::move(key_prefix)) {}

  /// Checks `cost` (>= 0) units for `key` and consumes them if admitted; one round trip at most. Thread-safe. Throws
  /// `std::invalid_argument` for a negative cost or a key longer than `max_key_bytes`; `BackendError` when Redis
  /// fails under `FailurePolicy::raise`. Example: `if (!limiter.allow("api-key:7f3a", 5)) { /* 429 */ }`.
  Decision allow(std::string_view key, std::int64_t cost = 1) { return run(key, cost, Mode::check, config()).decision; }

  /// As `allow`, and says who decided (`r.failed()`: Redis failed and `on_error` answered). Thread-safe. Throws as
  /// `allow`.
  CheckResult check(std::string_view key, std::int64_t cost = 1) { return run(key, cost, Mode::check, config()); }

  /// What a cost-1 request would see, consuming nothing. Thread-safe. Throws as `allow`.
  Decision peek(std::string_view key) { return run(key, 1, Mode::peek, config()).decision; }

  /// For start-up (include/ratelimit/redis/README.md "Readiness at start-up"): peeks until Redis answers or `timeout`
  /// has passed (may overrun by one attempt), outside the failure policy. Thread-safe. Throws `BackendError` naming
  /// the server and the last failure, `std::invalid_argument` for `timeout` outside (0, 24 h].
  void wait_ready(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    if (timeout.count() <= 0 || timeout > std::chrono::hours(24)) {
      throw std::invalid_argument("wait_ready: timeout must be in (0, 24 h], got " + std::to_string(timeout.count()) +
                                  " ms");
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::optional<BackendError> last;
    for (;;) {  // a peek of the empty key, outside the failure policy
      const Config& c = config();
      const std::string key = redis_key(""), now = detail::time_arg(options_, now_us());
      engine::RouteCall call = c.call(key, now, "1", Mode::peek);
      (void)engine::run_script(*route_, *c.binding.script, std::span<engine::RouteCall>(&call, 1));
      try {
        (void)detail::decision_of(detail::reply_of(call), c.rules.limit());
        return;
      } catch (const BackendError& e) {  // no reply, an error reply (NOPERM, LOADING, ...) or a malformed one
        if (!last || e.cause() != BackendErrorCause::circuit_open) last = e;  // an open breaker's says least
      }
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= left.zero()) break;
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(20), left));
    }
    throw BackendError(last->cause(), "not ready within " + std::to_string(timeout.count()) + " ms at " +
                                          detail::servers_of(options_.connection()) +
                                          "; the last failure: " + last->what());
  }

  /// Gives back up to `cost` units `key` consumed (include/ratelimit/README.md "Refunds"); returns the key's state
  /// afterwards (a fresh key's when Redis failed). Thread-safe. Throws as `allow`.
  Decision refund(std::string_view key, std::int64_t cost) { return run(key, cost, Mode::refund, config()).decision; }

  /// A policy validated for Redis for calls that name it (include/ratelimit/layers/README.md "Per-key quota
  /// overrides"). Immutable; made by `prepare`.
  class PreparedPolicy {
   public:
    /// The policy as given, and its validated rules in ticks of 1 us.
    [[nodiscard]] const P& policy() const noexcept { return config_.policy; }
    [[nodiscard]] const RulesOf<P>& rules() const noexcept { return config_.rules; }

   private:
    friend class RedisLimiter;
    explicit PreparedPolicy(Config c) : config_(std::move(c)) {}
    Config config_;
  };

  /// Validates `policy` for Redis, for the calls below that name it; only a named limiter, as for `set_policy`.
  /// Thread-safe. Throws `std::invalid_argument` naming the field (e.g. `Gcra.burst`), or `LimiterOptions.name`.
  [[nodiscard]] std::shared_ptr<const PreparedPolicy> prepare(P policy) const {
    require_name("per-call policies need");
    Config c(std::move(policy));
    c.fallback_share = core_->answer.fallback.prepare_share(c.policy);  // the fallback answers under its share
    return std::make_shared<const PreparedPolicy>(PreparedPolicy(std::move(c)));
  }
  /// `check`, `allow`, `peek` and `refund` under `policy` instead of `policy()` (the failure policy too). Thread-safe.
  /// Throw as `allow`.
  CheckResult check(std::string_view key, std::int64_t cost, const PreparedPolicy& policy) {
    return run(key, cost, Mode::check, policy.config_);
  }
  Decision allow(std::string_view key, std::int64_t cost, const PreparedPolicy& policy) {
    return run(key, cost, Mode::check, policy.config_).decision;
  }
  Decision peek(std::string_view key, const PreparedPolicy& policy) {
    return run(key, 1, Mode::peek, policy.config_).decision;
  }
  Decision refund(std::string_view key, std::int64_t cost, const PreparedPolicy& policy) {
    return run(key, cost, Mode::refund, policy.config_).decision;
  }

  /// The async `check` (include/ratelimit/redis/README.md "Redis engine"): returns at once;
  /// `callback(std::exception_ptr error, CheckResult result)` runs once on an I/O thread, never inside this call (under
  /// `raise`, `error` holds the `BackendError`). It must not throw nor block (a sync call from it throws
  /// `std::logic_error`). `timeout`: the deadline from now, in (0, 24 h]. The limiter may be destroyed first.
  /// Thread-safe. Throws `std::invalid_argument` (key, cost, timeout) and `std::logic_error` (in a forked child) with
  /// nothing started.
  template <class F>
    requires std::invocable<F&, std::exception_ptr, CheckResult>
  void check_async(std::string_view key, std::int64_t cost, std::chrono::milliseconds timeout, F&& callback) {
    start_async(key, cost, Mode::check, timeout, std::forward<F>(callback));
  }
  template <class F>  // the deadline `command_timeout` from now
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
  template <class F>  // the deadline `command_timeout` from now
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

  /// The async `refund`: as `check_async`, with `callback(std::exception_ptr, Decision)` given the state afterwards.
  template <class F>
    requires std::invocable<F&, std::exception_ptr, Decision>
  void refund_async(std::string_view key, std::int64_t cost, F&& callback) {
    start_async(key, cost, Mode::refund, options_.command_timeout, decision_only(std::forward<F>(callback)));
  }

  /// Forgets the key's state (in Redis, the denial cache and the fallback). Thread-safe. False when Redis failed (under
  /// `raise` throws `BackendError`); throws `std::invalid_argument` for a key longer than `max_key_bytes`.
  bool reset(std::string_view key) {
    check_key(key);
    Answer& a = core_->answer;
    a.calls.fetch_add(1, std::memory_order_relaxed);
    a.fallback.reset(key);
    if (a.denials) a.denials->invalidate(key);
    try {
      const std::string k = redis_key(key);
      engine::RouteCall call;
      call.slot = engine::detail::key_slot(k);
      call.args = {"DEL", k};
      route_->execute(std::span<engine::RouteCall>(&call, 1));
      // Again once the DEL ran (or may have): a denial Redis gave before it may have been remembered meanwhile.
      if (a.denials) a.denials->invalidate(key);
      if (detail::reply_of(call).type == REDIS_REPLY_INTEGER) return true;
      throw BackendError(BackendErrorCause::protocol, "DEL: not an integer reply");
    } catch (const BackendError& e) {
      return a.failed_reset(e);
    }
  }

  /// Checks many requests pipelined, in their order, under one time reading, each atomic on its own. Thread-safe.
  /// Throws `std::invalid_argument` naming the first bad request (`"requests[i].key: ..."`) with nothing sent; under
  /// `raise` the first failure once every request was answered.
  /// Example: `limiter.allow_many(std::vector<ratelimit::redis::Request>{{"user:1", 1}, {"user:2", 3}})`.
  std::vector<Decision> allow_many(std::span<const Request> requests) {
    std::vector<Decision> out;
    out.reserve(requests.size());
    for (const CheckResult& r : check_many(requests)) out.push_back(r.decision);
    return out;
  }

  /// As `allow_many`, and says for each request who decided (`r.failed()`: Redis failed and `on_error` answered).
  /// Thread-safe. Throws as `allow_many`.
  std::vector<CheckResult> check_many(std::span<const Request> requests) {
    ratelimit::detail::validate_batch(requests, options_.max_key_bytes);
    if (requests.empty()) return {};
    return run_many(requests, Mode::check, config());
  }

  /// The limiter's counters, with its route's and its fallback's. Thread-safe.
  [[nodiscard]] RedisStats stats() const noexcept {
    RedisStats s;
    static_cast<RouteCounters&>(s) = route_->counters();
    static_cast<FallbackCounters&>(s) = core_->answer.fallback.counters();
    core_->answer.fill(s);
    return s;
  }

  /// The Redis key holding `key`'s state (include/ratelimit/redis/README.md "Key layout").
  [[nodiscard]] std::string redis_key(std::string_view key) const {
    return detail::redis_key(options_.key_prefix, identity_, key, config().binding.suffix);
  }
  /// This limiter's identity in its Redis keys: `<kind>:<parameters>`, or `<kind>@<name>` when named. Thread-safe.
  [[nodiscard]] const std::string& identity() const noexcept { return identity_; }

  /// The policy now, as given. Thread-safe; the reference stays valid and unchanged while the limiter lives.
  [[nodiscard]] const P& policy() const noexcept { return config().policy; }
  /// The validated rules now, in ticks of 1 us (Redis's time unit). Thread-safe; valid as `policy()`.
  [[nodiscard]] const RulesOf<P>& rules() const noexcept { return config().rules; }

  /// Replaces the policy of a named limiter, keeping every key's usage (include/ratelimit/README.md "Changing a policy
  /// at run time"). Thread-safe: calls started after send the new parameters. Throws `std::invalid_argument` naming
  /// the field for a bad policy, or `LimiterOptions.name` for an unnamed limiter, changing nothing.
  void set_policy(P policy) {
    require_name("set_policy needs");
    Config c(std::move(policy));
    std::lock_guard change(core_->change_mutex);  // racing changes could leave the fallback on the other's share
    core_->answer.fallback.set_policy(c.policy);  // its share too (throws for a bad share before anything changed)
    core_->set_config(std::move(c));
    // Also a return to a policy given before (same id): what it had cached may no longer be true.
    if (core_->answer.denials) core_->answer.denials->invalidate_all();
  }
  /// How many times `set_policy` has run (0 at first): a layer re-reads `policy()` when it moved. Thread-safe.
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

  /// All-or-nothing check of `requests` (of `RedisLimiter`s of this `joint_domain()`) as one script call
  /// (`detail::run_layered`; false: check them one by one). Thread-safe. Throws as `allow` (under a member's `raise`).
  bool check_jointly(std::span<const JointRequest> requests, std::span<CheckResult> results) override {
    return detail::run_layered(joint_domain(), requests, results);
  }

 private:
  /// What a call needs after it started, shared with async completions (which may outlive the limiter).
  struct Core {
    Core(Config first, const RedisOptions& o, const C& clock)
        : answer(first.policy, o, clock, detail::gate_clock(clock), true), configs{std::move(first)} {}
    Answer answer;
    std::mutex change_mutex;     // serializes set_policy (the fallback's share, then the policy) and appending
    std::deque<Config> configs;  // every policy given so far, each once (a deque: references stay valid)
    std::atomic<const Config*> current{&configs.front()};
    std::atomic<std::uint64_t> generation{0};

    /// Makes `c` the policy of the calls that start from now on (a policy given before is reused); `change_mutex` held.
    void set_config(Config c) {
      const auto same = std::find_if(configs.begin(), configs.end(),
                                     [&](const Config& known) { return known.binding.params == c.binding.params; });
      current.store(same != configs.end() ? &*same : &configs.emplace_back(std::move(c)), std::memory_order_release);
      generation.fetch_add(1, std::memory_order_release);
    }
  };

  RedisLimiter(P policy, std::shared_ptr<Route> route, C clock, const LimiterOptions* limiter,
               std::optional<std::string> key_prefix = std::nullopt)
      : route_(std::move(route)),
        options_(detail::options_on(route_.get(), limiter, std::move(key_prefix))),
        clock_(std::move(clock)),
        core_(std::make_shared<Core>(Config(std::move(policy)), options_, clock_)),
        identity_(detail::limiter_identity(P::kind, options_.name, config().binding.params)) {}

  [[nodiscard]] const Config& config() const noexcept { return *core_->current.load(std::memory_order_acquire); }
  void require_name(std::string_view what) const {
    if (options_.name.empty()) {
      ratelimit::detail::invalid(
          "LimiterOptions.name",
          std::string(what) + " a named limiter: an unnamed one's Redis keys are its parameters");
    }
  }
  void check_key(std::string_view key) const { ratelimit::detail::check_key_length(key, options_.max_key_bytes); }
  void check_request(std::string_view key, std::int64_t cost) const {
    check_key(key);
    ratelimit::detail::require_cost(cost);
  }
  std::int64_t now_us() { return detail::now_us(clock_); }

  [[nodiscard]] detail::LayeredPart layered_part(std::string_view key, std::int64_t cost) override {
    check_request(key, cost);
    const Config& c = config();
    const std::int64_t now = now_us();
    const Answer& a = core_->answer;
    return {route_.get(),
            redis_key(key),
            {std::string(P::kind), detail::time_arg(options_, now), std::to_string(cost), c.binding.params[0],
             c.binding.params[1]},
            c.rules.limit(),
            &core_->answer,
            a.failure_decision(c.rules, now, cost, Mode::check),
            a.failure_decision(c.rules, now, 0, Mode::check)};
  }

  CheckResult run(std::string_view key, std::int64_t cost, Mode mode, const Config& config) {
    check_request(key, cost);
    const Request one{key, cost};
    return run_many(std::span<const Request>(&one, 1), mode, config).front();
  }
  std::vector<CheckResult> run_many(std::span<const Request> requests, Mode mode, const Config& config) {
    const std::int64_t now = now_us();
    core_->answer.calls.fetch_add(requests.size(), std::memory_order_relaxed);
    auto key_of = [this](std::string_view key) { return redis_key(key); };
    return core_->answer.send(*route_, config, requests, mode, now, detail::time_arg(options_, now), key_of);
  }

  template <class F>
  static auto decision_only(F&& f) {
    return [f = std::forward<F>(f)](std::exception_ptr e, const CheckResult& r) mutable { f(e, r.decision); };
  }

  /// One async script call; one the denial cache or a shut fallback gate answers is never written (a past
  /// deadline): it completes on the I/O thread, as every callback runs.
  template <class G>
  void start_async(std::string_view key, std::int64_t cost, Mode mode, std::chrono::milliseconds timeout, G&& g) {
    check_request(key, cost);
    if (timeout.count() <= 0 || timeout > std::chrono::hours(24)) {
      ratelimit::detail::invalid("timeout", "must be in (0, 24 h]");
    }
    const Config& config = this->config();
    typename Answer::Pending p = core_->answer.pending(key, cost, mode, now_us(), config.id);
    const auto deadline =
        p.local() ? std::chrono::steady_clock::time_point{} : std::chrono::steady_clock::now() + timeout;
    const std::string k = redis_key(key), now = detail::time_arg(options_, p.sent.now_us), c = std::to_string(cost);
    auto done = [core = core_, &config, p = std::move(p), g = std::forward<G>(g)](
                    engine::Reply reply, std::optional<BackendError> error, bool reloaded) mutable {
      std::exception_ptr raised;
      const CheckResult r = core->answer.finish(config, p, reply, error, reloaded, raised);
      g(raised, r);
    };
    detail::start_async_call(*route_, *config.binding.script, config.call(k, now, c, mode), deadline, std::move(done));
    core_->answer.calls.fetch_add(1, std::memory_order_relaxed);
  }

  std::shared_ptr<Route> route_;  // a server's pool, the cluster router, or the Sentinel route
  RedisOptions options_;
  C clock_;
  std::shared_ptr<Core> core_;  // also the policies (set_policy), shared with async calls
  std::string identity_;        // <kind>:<params> or <kind>@<name>
};

}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
