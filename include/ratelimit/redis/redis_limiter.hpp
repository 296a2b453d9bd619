#pragma once

/// @file
/// `RedisLimiter`: a policy checked atomically in Redis, shared by every process that uses the server.

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/batch_request.hpp"
#include "ratelimit/clock.hpp"
#include "ratelimit/decision.hpp"
#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/detail/decl.hpp"
#include "ratelimit/detail/key_length.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/joint_backend.hpp"
#include "ratelimit/policy/policy.hpp"
#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/detail/check_callback.hpp"
#include "ratelimit/redis/detail/gate_clock.hpp"
#include "ratelimit/redis/detail/layered_member.hpp"
#include "ratelimit/redis/detail/script_mode.hpp"
#include "ratelimit/redis/options.hpp"
#include "ratelimit/redis/stats.hpp"
#include "ratelimit/reservation.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {

// Declared here, defined by the engine (engine/*.hpp) and the answer step (detail/answer.hpp), which only the
// definitions (impl/redis_limiter.hpp) include: a separately compiled program's units see the class alone.
namespace engine {
class Route;
class ConnectionPool;
class ClusterRouter;
}  // namespace engine
using engine::ClusterRouter;
using engine::ConnectionPool;
using engine::Route;
namespace detail {
struct EmbeddedScript;
struct ReserveReply;
template <Policy P, Clock C, Clock G>
class Answer;
}  // namespace detail

/// One check of a batch for `RedisLimiter::allow_many`: `ratelimit::BatchRequest`, which every backend's batch takes.
using Request = ratelimit::BatchRequest;

/// The Redis backend (include/ratelimit/README.md "Redis contract"): each check is one atomic Lua script run on the
/// key's Redis key, so every process sharing the server shares each key's limit exactly; decisions are the in-memory
/// backend's when times and durations are whole microseconds. Thread-safe; the `*_async` methods never block. When
/// Redis fails, `LimiterOptions::on_error` answers (include/ratelimit/redis/README.md "Failures").
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
class RedisLimiter final : public detail::LayeredMember, public ratelimit::detail::ReservationBook {
  using Mode = detail::Mode;
  using Answer = detail::Answer<P, C, detail::GateClock<C>>;
  struct Config;  // detail::PolicyConfig of the answer step's share

 public:
  using policy_type = P;
  using clock_type = C;

  /// Redis's tick, the unit of `rules()`: one microsecond.
  static constexpr std::int64_t kTickNs = 1000;

  /// Validates the policy and the options and makes a route of its own (`make_route`); connects nothing yet. Throws
  /// `std::invalid_argument` naming the field (e.g. `Gcra.period`, `LimiterOptions.key_prefix`).
  RedisLimiter(P policy, const RedisOptions& options, C clock = {});

  /// As above, from the two halves of the options. Throws `std::invalid_argument` as above.
  RedisLimiter(P policy, const ConnectionOptions& connection, const LimiterOptions& limiter = {}, C clock = {});

  /// Sharing `route` (a `ConnectionPool`, `ClusterRouter` or `SentinelRoute`) with other limiters, e.g. the layers
  /// of a layered limit, under the route's `limiter_defaults()`. Throws `std::invalid_argument` as above.
  template <class R>
  RedisLimiter(P policy, std::shared_ptr<R> route, C clock = {})
      : RedisLimiter(std::move(policy), route_from(std::move(route)), std::move(clock), nullptr) {}

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
      : RedisLimiter(std::move(policy), route_from(std::move(route)), std::move(clock), &limiter) {}

  /// As above with the route's limiter defaults but this limiter's own `key_prefix`. Throws `std::invalid_argument`
  /// naming `LimiterOptions.key_prefix` when it holds `{` or `}`.
  template <class R>
  RedisLimiter(P policy, std::shared_ptr<R> route, std::string key_prefix, C clock = {})
      : RedisLimiter(std::move(policy), route_from(std::move(route)), std::move(clock), nullptr,
                     std::move(key_prefix)) {}

  /// Checks `cost` (>= 0) units for `key` and consumes them if admitted; one round trip at most. Thread-safe. Throws
  /// `std::invalid_argument` for a negative cost or a key longer than `max_key_bytes`; `BackendError` when Redis
  /// fails under `FailurePolicy::raise`.
  /// Example:
  ///   ratelimit::redis::RedisLimiter<ratelimit::FixedWindow> limiter(
  ///       ratelimit::FixedWindow{.limit = 1000, .window = std::chrono::hours(1)},
  ///       ratelimit::redis::ConnectionOptions::from_url("redis://redis.internal:6379"));
  ///   const ratelimit::Decision d = limiter.allow("api-key:7f3a", /*cost=*/5);
  ///   if (!d) { /* answer 429, Retry-After from d.retry_after */ }
  Decision allow(std::string_view key, std::int64_t cost = 1);

  /// As `allow`, and says who decided (`Outcome::failure_policy`: Redis failed and `on_error` answered). Thread-safe.
  /// Throws as `allow`.
  /// Example:
  ///   ratelimit::redis::RedisLimiter<ratelimit::Gcra> limiter(
  ///       ratelimit::Gcra{.limit = 10, .period = std::chrono::seconds(1), .burst = 10},
  ///       ratelimit::redis::ConnectionOptions::from_url("redis://redis.internal:6379"));
  ///   const ratelimit::CheckResult r = limiter.check("client-42");
  ///   if (r.failed()) { /* Redis failed: r.decision is the failure policy's (fail_open admits) */ }
  ///   if (!r) { /* answer 429 */ }
  CheckResult check(std::string_view key, std::int64_t cost = 1);

  /// What a cost-1 request would see, consuming nothing (include/ratelimit/README.md "Decisions"). Thread-safe. Throws
  /// as `allow`.
  Decision peek(std::string_view key);

  /// For a service's start-up (include/ratelimit/redis/README.md "Readiness at start-up"): runs this limiter's script
  /// once (a peek), retrying until Redis answers or `timeout` has passed, outside the failure policy. Thread-safe.
  /// Throws `BackendError` naming the server and the last failure, `std::invalid_argument` for `timeout` outside
  /// (0, 24 h].
  /// Example:
  ///   ratelimit::redis::RedisLimiter<ratelimit::Gcra> limiter(
  ///       ratelimit::Gcra{.limit = 100, .period = std::chrono::minutes(1), .burst = 10},
  ///       ratelimit::redis::ConnectionOptions::from_url("redis://redis.internal:6379"));
  ///   try {
  ///     limiter.wait_ready(std::chrono::seconds(5));  // before serving traffic
  ///   } catch (const ratelimit::BackendError& e) {
  ///     std::fprintf(stderr, "not starting: %s\n", e.what());  // names the server and the last failure
  ///   }
  void wait_ready(std::chrono::milliseconds timeout = std::chrono::seconds(5));

  /// Gives back up to `cost` units `key` consumed (include/ratelimit/README.md "Refunds"); returns the key's state
  /// afterwards (a fresh key's when Redis failed). Thread-safe. Throws as `allow`.
  Decision refund(std::string_view key, std::int64_t cost);

  /// Books `cost` (>= 0) units of `key` (include/ratelimit/README.md "Reservations"; include/ratelimit/redis/README.md
  /// "Reservations and settling"): one script call, atomic. `ok()` is false, nothing booked, when `cost` exceeds the
  /// burst. Only GCRA and the token bucket. Thread-safe. When Redis fails: under `fail_open` an ok booking with delay 0
  /// and nothing to cancel, under `fail_closed` a refusal of `failure_retry_after`, with `fallback` the local share's
  /// check (an ok booking with delay 0 and nothing to cancel, or a refusal); throws as `allow`. The limiter must
  /// outlive the `Reservation` (its `cancel()` calls it).
  Reservation reserve(std::string_view key, std::int64_t cost = 1) requires ReservableRules<RulesOf<P>> {
    return reserve_within(key, cost, std::chrono::nanoseconds::max());
  }
  /// As above, booking only when the delay is at most `max_delay` (>= 0; whole microseconds count, a rest is dropped);
  /// otherwise nothing is written and the refusal's `delay()` is the wait it would have needed. Throws as above, and
  /// `std::invalid_argument` naming `max_delay` when it is negative.
  Reservation reserve(std::string_view key, std::int64_t cost,
                      std::chrono::nanoseconds max_delay) requires ReservableRules<RulesOf<P>> {
    return reserve_within(key, cost, max_delay);
  }

  /// Settles a request charged `charged` units that turned out to cost `actual`, as
  /// include/ratelimit/README.md "Settling after the response" says: the key's state becomes what charging `actual`
  /// would have made it, in one script call (atomic). Above `charged` the difference is debited even beyond the limit
  /// (the key owes it; at most `max_debt` units beyond the burst or limit, clamped; by default at most what keeps
  /// Lua's doubles exact); below, it is refunded as `refund` does. Returns the key's state afterwards as a cost-0
  /// check sees it (a debt: remaining 0). The window policies act on the current window. Thread-safe. Throws
  /// `std::invalid_argument` naming `charged`, `actual` or `max_debt` when negative, or the key; when Redis fails,
  /// the failure policy's decision (`fail_open`: a fresh key's cost-0 view), or throws under `raise`.
  Decision settle(std::string_view key, std::int64_t charged, std::int64_t actual);
  /// As above with a bound on the debt: `max_debt` (>= 0) units beyond the burst or limit.
  Decision settle(std::string_view key, std::int64_t charged, std::int64_t actual, std::int64_t max_debt);

  /// A policy validated for Redis for calls that name it (include/ratelimit/layers/README.md "Per-key quota
  /// overrides"). Immutable; made by `prepare`.
  class PreparedPolicy;

  /// Validates `policy` for Redis, for the calls below that name it; only a named limiter, as for `set_policy`.
  /// Thread-safe. Throws `std::invalid_argument` naming the field (e.g. `Gcra.burst`), or `LimiterOptions.name`.
  [[nodiscard]] std::shared_ptr<const PreparedPolicy> prepare(P policy) const;
  /// As `check(key, cost)`, under `policy` instead of `policy()` (the failure policy too). Thread-safe. Throws as
  /// `check`.
  CheckResult check(std::string_view key, std::int64_t cost, const PreparedPolicy& policy);
  /// As `allow(key, cost)`, under `policy` (see `check` above).
  Decision allow(std::string_view key, std::int64_t cost, const PreparedPolicy& policy);
  /// As `peek(key)`, under `policy`.
  Decision peek(std::string_view key, const PreparedPolicy& policy);
  /// As `refund(key, cost)`, under `policy`.
  Decision refund(std::string_view key, std::int64_t cost, const PreparedPolicy& policy);
  /// As `settle(key, charged, actual, max_debt)`, under `policy`.
  Decision settle(std::string_view key, std::int64_t charged, std::int64_t actual, std::int64_t max_debt,
                  const PreparedPolicy& policy);

  /// The async `check` (include/ratelimit/redis/README.md "Redis engine"): returns at once;
  /// `callback(std::exception_ptr error, CheckResult result)` runs exactly once on an I/O thread, never inside this
  /// call, with Redis's decision or the failure policy's (under `raise`, `error` holds the `BackendError`); both are
  /// passed as lvalues (take them by value or const reference: a callback taking `&&` does not compile). It must not
  /// throw (the process terminates) nor block (a sync call from it throws `std::logic_error`). `timeout`: the deadline
  /// from now, in (0, 24 h]. The limiter may be destroyed first. Thread-safe. Throws `std::invalid_argument` (key
  /// length, negative cost, timeout) and `std::logic_error` (in a forked child) with nothing started.
  template <class F>
    requires std::invocable<F&, std::exception_ptr&, const CheckResult&>
  void check_async(std::string_view key, std::int64_t cost, std::chrono::milliseconds timeout, F&& callback) {
    start_async<false>(key, cost, Mode::check, timeout, std::forward<F>(callback));
  }
  /// As above with the deadline `command_timeout` from now.
  template <class F>
    requires std::invocable<F&, std::exception_ptr&, const CheckResult&>
  void check_async(std::string_view key, std::int64_t cost, F&& callback) {
    start_async<false>(key, cost, Mode::check, options_.command_timeout, std::forward<F>(callback));
  }

  /// The async `allow`: as `check_async`, with `callback(std::exception_ptr, Decision)`.
  template <class F>
    requires std::invocable<F&, std::exception_ptr&, const Decision&>
  void allow_async(std::string_view key, std::int64_t cost, std::chrono::milliseconds timeout, F&& callback) {
    start_async<true>(key, cost, Mode::check, timeout, std::forward<F>(callback));
  }
  /// As above with the deadline `command_timeout` from now.
  template <class F>
    requires std::invocable<F&, std::exception_ptr&, const Decision&>
  void allow_async(std::string_view key, std::int64_t cost, F&& callback) {
    start_async<true>(key, cost, Mode::check, options_.command_timeout, std::forward<F>(callback));
  }

  /// The async `peek`: as `check_async`, consuming nothing, with `callback(std::exception_ptr, Decision)`.
  template <class F>
    requires std::invocable<F&, std::exception_ptr&, const Decision&>
  void peek_async(std::string_view key, F&& callback) {
    start_async<true>(key, 1, Mode::peek, options_.command_timeout, std::forward<F>(callback));
  }

  /// The async `refund`: as `check_async`, with `callback(std::exception_ptr, Decision)` receiving the
  /// state afterwards (a fresh key's when Redis failed: nothing was given back, or it may have been).
  template <class F>
    requires std::invocable<F&, std::exception_ptr&, const Decision&>
  void refund_async(std::string_view key, std::int64_t cost, F&& callback) {
    start_async<true>(key, cost, Mode::refund, options_.command_timeout, std::forward<F>(callback));
  }

  /// Forgets the key's state (in Redis, the denial cache and the fallback). Thread-safe. Returns false when Redis
  /// failed and `on_error` is not `raise`; throws `BackendError` under `raise`, `std::invalid_argument` for a key
  /// longer than `max_key_bytes`.
  bool reset(std::string_view key);

  /// Checks many requests pipelined (include/ratelimit/redis/README.md "Failures"): decisions in the order of
  /// `requests`, under one time reading, each request atomic on its own. Thread-safe. Validates every request first
  /// (throws `std::invalid_argument` naming the first bad one, `"requests[i].key: ..."`, sending nothing); under
  /// `raise` the first failure is thrown once every request was answered.
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
  std::vector<CheckResult> check_many(std::span<const Request> requests);

  /// The limiter's counters, with its route's and its fallback's. Thread-safe.
  [[nodiscard]] RedisStats stats() const noexcept;

  /// The Redis key holding `key`'s state, `<prefix><identity>{<encoded key>}<suffix>`
  /// (include/ratelimit/redis/README.md "Key layout").
  [[nodiscard]] std::string redis_key(std::string_view key) const;
  /// This limiter's identity in its Redis keys: `<kind>:<parameters>`, or `<kind>@<name>` when named. Thread-safe.
  [[nodiscard]] const std::string& identity() const noexcept { return identity_; }

  /// The policy now, as given. Thread-safe; the reference stays valid and unchanged while the limiter lives.
  [[nodiscard]] const P& policy() const noexcept;
  /// The validated rules now, in ticks of 1 us (Redis's time unit). Thread-safe; valid as `policy()`.
  [[nodiscard]] const RulesOf<P>& rules() const noexcept;

  /// Replaces the policy at run time, keeping every key's usage (include/ratelimit/README.md "Changing a policy at run
  /// time", Redis): only a named limiter (`LimiterOptions::name`). Thread-safe: a call started before sends the old
  /// parameters, one started after the new ones. Throws `std::invalid_argument` naming the field for a bad policy, or
  /// `LimiterOptions.name` for an unnamed limiter, changing nothing.
  void set_policy(P policy);
  /// How many times `set_policy` has run (0 at first): a layer re-reads `policy()` when it moved. Thread-safe.
  [[nodiscard]] std::uint64_t policy_generation() const noexcept;
  /// The options in effect: the route's connection options and this limiter's own. Thread-safe (immutable).
  [[nodiscard]] const RedisOptions& options() const noexcept { return options_; }
  [[nodiscard]] C& clock() noexcept { return clock_; }
  /// The embedded Lua script this limiter runs (its body is lua/<kind>.lua's parts and main, assembled).
  [[nodiscard]] const detail::EmbeddedScript& script() const noexcept;
  /// The cluster router (null when not on Redis Cluster).
  [[nodiscard]] std::shared_ptr<ClusterRouter> cluster() const noexcept;
  /// Where this limiter's commands go (its pool's server, or its cluster router).
  [[nodiscard]] const std::shared_ptr<Route>& route() const noexcept { return route_; }

  /// The pool, or on Redis Cluster the router: limiters sharing it can be checked jointly.
  [[nodiscard]] const void* joint_domain() const noexcept override;

  /// All-or-nothing check of `requests` (each naming a `RedisLimiter` with this one's `joint_domain()`) as one script
  /// call; see `JointBackend::check_jointly` and `detail::run_layered` (false: check them one by one). Thread-safe.
  /// Throws `std::invalid_argument` for a negative cost or a key over `max_key_bytes`; `BackendError` when Redis fails
  /// and a member's `on_error` is `raise`.
  bool check_jointly(std::span<const JointRequest> requests, std::span<CheckResult> results) override;

 private:
  /// What a call needs after it started, shared with async completions (which may outlive the limiter).
  struct Core;

  RedisLimiter(P policy, std::shared_ptr<Route> route, C clock, const LimiterOptions* limiter,
               std::optional<std::string> key_prefix = std::nullopt);
  /// The route of a server's pool, or `route` itself (a cluster router or Sentinel route).
  static std::shared_ptr<Route> route_from(std::shared_ptr<ConnectionPool> pool);
  static std::shared_ptr<Route> route_from(std::shared_ptr<Route> route);

  [[nodiscard]] const Config& config() const noexcept;
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
  std::int64_t now_us();

  [[nodiscard]] detail::LayeredPart layered_part(std::string_view key, std::int64_t cost) override;

  /// The `reserve` overloads. Unconstrained, so that an explicit instantiation for a window policy (which
  /// instantiates every member defined out of the class) compiles: there it is never called.
  Reservation reserve_within(std::string_view key, std::int64_t cost, std::chrono::nanoseconds max_delay);
  /// `Reservation::cancel`: one script call; a failure is counted and leaves the slot spent (never throws).
  void cancel_reservation(std::string_view key, const ratelimit::detail::ReservationTicket& ticket) noexcept override;
  /// One call of `mode` with `extra` after the parameters through the answer step (`send`); a reserve's three values
  /// go to `booked` when Redis decided.
  CheckResult send_one(const Config& config, std::string_view key, std::int64_t cost, Mode mode,
                       std::span<const std::string> extra, std::optional<detail::ReserveReply>* booked = nullptr);
  Decision settle_under(const Config& config, std::string_view key, std::int64_t charged, std::int64_t actual,
                        std::int64_t max_debt);

  CheckResult run(std::string_view key, std::int64_t cost, Mode mode, const Config& config);

  std::vector<CheckResult> run_many(std::span<const Request> requests, Mode mode, const Config& config);

  template <class F>
  static auto decision_only(F&& f) {
    return [f = std::forward<F>(f)](std::exception_ptr e, const CheckResult& r) mutable { f(e, r.decision); };
  }

  /// Starts an async call of `g` (`kDecision`: a `void(std::exception_ptr, Decision)` callback), its arguments
  /// checked first, so that a refused call takes nothing from the caller, in both modes.
  template <bool kDecision, class G>
  void start_async(std::string_view key, std::int64_t cost, Mode mode, std::chrono::milliseconds timeout, G&& g) {
    check_request(key, cost);
    if (timeout.count() <= 0 || timeout > std::chrono::hours(24)) {
      ratelimit::detail::invalid("timeout", "must be in (0, 24 h]");
    }
    if constexpr (kDecision) {
      send_checked(key, cost, mode, timeout, decision_only(std::forward<G>(g)));
    } else {
      send_checked(key, cost, mode, timeout, std::forward<G>(g));
    }
  }
  /// The callback's type reaches the definitions only header-only; a separately compiled program passes it on behind
  /// `detail::CheckCallback`, to the one compiled `send_erased`.
  template <class G>
  void send_checked(std::string_view key, std::int64_t cost, Mode mode, std::chrono::milliseconds timeout, G&& g) {
#ifdef RATELIMIT_SEPARATE_COMPILATION
    send_erased(key, cost, mode, timeout, detail::CheckCallback(std::forward<G>(g)));
#else
    send_async(key, cost, mode, timeout, std::forward<G>(g));
#endif
  }
  /// One async script call, its arguments checked (`start_async`); one the denial cache or a shut fallback gate answers
  /// is never written (a past deadline): it completes on the I/O thread, as every callback runs.
  template <class G>
  void send_async(std::string_view key, std::int64_t cost, Mode mode, std::chrono::milliseconds timeout, G&& g);
  void send_erased(std::string_view key, std::int64_t cost, Mode mode, std::chrono::milliseconds timeout,
                   detail::CheckCallback g);

  std::shared_ptr<Route> route_;  // a server's pool, the cluster router, or the Sentinel route
  RedisOptions options_;
  C clock_;
  std::shared_ptr<Core> core_;  // also the policies (set_policy), shared with async calls
  std::string identity_;        // <kind>:<params> or <kind>@<name>
};

}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis

#ifndef RATELIMIT_SEPARATE_COMPILATION
#include "ratelimit/redis/impl/redis_limiter.hpp"
#else
#include "ratelimit/policy/fixed_window.hpp"
#include "ratelimit/policy/gcra.hpp"
#include "ratelimit/policy/sliding_window_counter.hpp"
#include "ratelimit/policy/sliding_window_log.hpp"
#include "ratelimit/policy/token_bucket.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
// Compiled once, in the unit that includes <ratelimit/redis/src.hpp>: the five policies with the default clock.
// Other clocks need the definitions, impl/redis_limiter.hpp, in the units that use them.
extern template class RedisLimiter<FixedWindow>;
extern template class RedisLimiter<SlidingWindowLog>;
extern template class RedisLimiter<SlidingWindowCounter>;
extern template class RedisLimiter<TokenBucket>;
extern template class RedisLimiter<Gcra>;
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
#endif
