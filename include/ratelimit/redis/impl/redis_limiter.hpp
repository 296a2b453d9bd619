#pragma once

/// @file
/// The members of `RedisLimiter` (redis_limiter.hpp) that reach the engine, the answer step and the scripts,
/// defined out of the class: `inline` header-only (redis_limiter.hpp includes this file), compiled once in a
/// separately compiled program (`<ratelimit/redis/src.hpp>`; README.md "Compile cost"). A separately compiled
/// unit that uses a `RedisLimiter` of another clock (e.g. `ManualClock`), or a `PreparedPolicy`'s members,
/// includes this file too.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
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

#include "ratelimit/detail/decl.hpp"
#include "ratelimit/redis/detail/answer.hpp"
#include "ratelimit/redis/detail/key_encoding.hpp"
#include "ratelimit/redis/detail/layered_call.hpp"
#include "ratelimit/redis/detail/limiter_setup.hpp"
#include "ratelimit/redis/engine/pool.hpp"
#include "ratelimit/redis/engine/routes.hpp"
#include "ratelimit/redis/engine/slots.hpp"
#include "ratelimit/redis/failure_report.hpp"
#include "ratelimit/redis/redis_limiter.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {

template <Policy P, Clock C>
struct RedisLimiter<P, C>::Config : detail::PolicyConfig<P, typename Answer::Share> {
  using detail::PolicyConfig<P, typename Answer::Share>::PolicyConfig;
};

template <Policy P, Clock C>
class RedisLimiter<P, C>::PreparedPolicy {
 public:
  /// The policy as given.
  [[nodiscard]] const P& policy() const noexcept { return config_.policy; }
  /// Its validated rules in ticks of 1 us.
  [[nodiscard]] const RulesOf<P>& rules() const noexcept { return config_.rules; }

 private:
  friend class RedisLimiter;
  explicit PreparedPolicy(Config c) : config_(std::move(c)) {}
  Config config_;
};

template <Policy P, Clock C>
struct RedisLimiter<P, C>::Core {
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

template <Policy P, Clock C>
RATELIMIT_DECL RedisLimiter<P, C>::RedisLimiter(P policy, const RedisOptions& options, C clock)
    : RedisLimiter(std::move(policy), make_route(options.connection()), std::move(clock), &options.limiter()) {}

template <Policy P, Clock C>
RATELIMIT_DECL RedisLimiter<P, C>::RedisLimiter(P policy, const ConnectionOptions& connection,
                                                const LimiterOptions& limiter, C clock)
    : RedisLimiter(std::move(policy), make_route(connection), std::move(clock), &limiter) {}

template <Policy P, Clock C>
RATELIMIT_DECL RedisLimiter<P, C>::RedisLimiter(P policy, std::shared_ptr<Route> route, C clock,
                                                const LimiterOptions* limiter, std::optional<std::string> key_prefix)
    : route_(std::move(route)),
      options_(detail::options_on(route_.get(), limiter, std::move(key_prefix))),
      clock_(std::move(clock)),
      core_(std::make_shared<Core>(Config(std::move(policy)), options_, clock_)),
      identity_(detail::limiter_identity(P::kind, options_.name, config().binding.params)) {}

template <Policy P, Clock C>
RATELIMIT_DECL std::shared_ptr<Route> RedisLimiter<P, C>::route_from(std::shared_ptr<ConnectionPool> pool) {
  return detail::route_of(std::move(pool));
}

template <Policy P, Clock C>
RATELIMIT_DECL std::shared_ptr<Route> RedisLimiter<P, C>::route_from(std::shared_ptr<Route> route) {
  return detail::route_of(std::move(route));
}

template <Policy P, Clock C>
RATELIMIT_DECL Decision RedisLimiter<P, C>::allow(std::string_view key, std::int64_t cost) {
  return run(key, cost, Mode::check, config()).decision;
}

template <Policy P, Clock C>
RATELIMIT_DECL CheckResult RedisLimiter<P, C>::check(std::string_view key, std::int64_t cost) {
  return run(key, cost, Mode::check, config());
}

template <Policy P, Clock C>
RATELIMIT_DECL Decision RedisLimiter<P, C>::peek(std::string_view key) {
  return run(key, 1, Mode::peek, config()).decision;
}

template <Policy P, Clock C>
RATELIMIT_DECL void RedisLimiter<P, C>::wait_ready(std::chrono::milliseconds timeout) {
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

template <Policy P, Clock C>
RATELIMIT_DECL Decision RedisLimiter<P, C>::refund(std::string_view key, std::int64_t cost) {
  return run(key, cost, Mode::refund, config()).decision;
}

template <Policy P, Clock C>
RATELIMIT_DECL Reservation RedisLimiter<P, C>::reserve_within(std::string_view key, std::int64_t cost,
                                                              std::chrono::nanoseconds max_delay) {
  if constexpr (!ReservableRules<RulesOf<P>>) {
    throw std::logic_error("reserve: only GCRA and the token bucket book ahead");
  } else {
    check_request(key, cost);
    if (max_delay.count() < 0) ratelimit::detail::invalid("max_delay", "must be >= 0");
    const Config& c = config();
    const RulesOf<P>& rules = c.rules;
    // A booking keeps the backlog within the rules' bound (as in memory): its delay at most that less tau.
    const std::int64_t most = rules.max_backlog() - rules.tolerance(), wanted = max_delay.count() / 1000;
    const std::string extra[] = {std::to_string(wanted < most ? wanted : most)};
    const std::int64_t sent = cost > rules.limit() ? rules.limit() + 1 : cost;  // refused alike, and exact in Lua
    std::optional<detail::ReserveReply> booked;
    const Decision d = send_one(c, key, sent, Mode::reserve, extra, &booked).decision;
    if (!booked) {  // the failure policy's or the fallback's answer: nothing to cancel
      if (d.allowed) return Reservation(nullptr, std::string(key), {}, std::chrono::nanoseconds(0), d);
      return Reservation::refused(d.retry_after, d);
    }
    const std::chrono::nanoseconds delay =
        booked->delay_us < 0 ? Decision::never : std::chrono::microseconds(booked->delay_us);
    if (!booked->ok) return Reservation::refused(delay, d);
    // The script's time is the booked TAT less the backlog after it (the decision's reset_after).
    const std::int64_t act_at = booked->booked_tat - d.reset_after.count() / 1000 + booked->delay_us;
    return Reservation(this, std::string(key), {booked->booked_tat, act_at, cost}, delay, d);
  }
}

template <Policy P, Clock C>
RATELIMIT_DECL void RedisLimiter<P, C>::cancel_reservation(
    std::string_view key, const ratelimit::detail::ReservationTicket& ticket) noexcept {
  try {
    const std::string extra[] = {std::to_string(ticket.booked_tat), std::to_string(ticket.act_at)};
    const Config& c = config();
    const std::int64_t limit = c.rules.limit();
    (void)send_one(c, key, ticket.cost < limit ? (ticket.cost > 0 ? ticket.cost : 0) : limit, Mode::cancel, extra);
  } catch (...) {  // counted by the answer step (a BackendError under raise): the slot stays spent
  }
}

template <Policy P, Clock C>
RATELIMIT_DECL Decision RedisLimiter<P, C>::settle(std::string_view key, std::int64_t charged, std::int64_t actual) {
  return settle(key, charged, actual, std::numeric_limits<std::int64_t>::max());
}

template <Policy P, Clock C>
RATELIMIT_DECL Decision RedisLimiter<P, C>::settle(std::string_view key, std::int64_t charged, std::int64_t actual,
                                                   std::int64_t max_debt) {
  return settle_under(config(), key, charged, actual, max_debt);
}

template <Policy P, Clock C>
RATELIMIT_DECL Decision RedisLimiter<P, C>::settle(std::string_view key, std::int64_t charged, std::int64_t actual,
                                                   std::int64_t max_debt, const PreparedPolicy& policy) {
  return settle_under(policy.config_, key, charged, actual, max_debt);
}

template <Policy P, Clock C>
RATELIMIT_DECL Decision RedisLimiter<P, C>::settle_under(const Config& config, std::string_view key,
                                                         std::int64_t charged, std::int64_t actual,
                                                         std::int64_t max_debt) {
  check_key(key);
  ratelimit::detail::require_settle(charged, actual, max_debt);
  const auto [cost, cap] = detail::settle_args<P>(config.rules, max_debt, actual - charged);
  const std::string extra[] = {std::to_string(cap)};
  return send_one(config, key, cost, Mode::settle, extra).decision;
}

template <Policy P, Clock C>
RATELIMIT_DECL CheckResult RedisLimiter<P, C>::send_one(const Config& c, std::string_view key, std::int64_t cost,
                                                        Mode mode, std::span<const std::string> extra,
                                                        std::optional<detail::ReserveReply>* booked) {
  const Request one{key, cost};
  const std::int64_t now = now_us();
  core_->answer.calls.fetch_add(1, std::memory_order_relaxed);
  auto key_of = [this](std::string_view k) { return redis_key(k); };
  std::vector<engine::Reply> replies;
  const CheckResult r = core_->answer
                            .send(*route_, c, std::span<const Request>(&one, 1), mode, now,
                                  detail::time_arg(options_, now), key_of, extra, &replies)
                            .front();
  if (booked != nullptr && !replies.empty() && replies.front())
    booked->emplace(detail::reservation_of(*replies.front()));
  return r;
}

template <Policy P, Clock C>
RATELIMIT_DECL auto RedisLimiter<P, C>::prepare(P policy) const -> std::shared_ptr<const PreparedPolicy> {
  require_name("per-call policies need");
  Config c(std::move(policy));
  c.fallback_share = core_->answer.fallback.prepare_share(c.policy);  // the fallback answers under its share
  return std::make_shared<const PreparedPolicy>(PreparedPolicy(std::move(c)));
}

template <Policy P, Clock C>
RATELIMIT_DECL CheckResult RedisLimiter<P, C>::check(std::string_view key, std::int64_t cost,
                                                     const PreparedPolicy& policy) {
  return run(key, cost, Mode::check, policy.config_);
}

template <Policy P, Clock C>
RATELIMIT_DECL Decision RedisLimiter<P, C>::allow(std::string_view key, std::int64_t cost,
                                                  const PreparedPolicy& policy) {
  return run(key, cost, Mode::check, policy.config_).decision;
}

template <Policy P, Clock C>
RATELIMIT_DECL Decision RedisLimiter<P, C>::peek(std::string_view key, const PreparedPolicy& policy) {
  return run(key, 1, Mode::peek, policy.config_).decision;
}

template <Policy P, Clock C>
RATELIMIT_DECL Decision RedisLimiter<P, C>::refund(std::string_view key, std::int64_t cost,
                                                   const PreparedPolicy& policy) {
  return run(key, cost, Mode::refund, policy.config_).decision;
}

template <Policy P, Clock C>
RATELIMIT_DECL bool RedisLimiter<P, C>::reset(std::string_view key) {
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

template <Policy P, Clock C>
RATELIMIT_DECL std::vector<CheckResult> RedisLimiter<P, C>::check_many(std::span<const Request> requests) {
  ratelimit::detail::validate_batch(requests, options_.max_key_bytes);
  if (requests.empty()) return {};
  return run_many(requests, Mode::check, config());
}

template <Policy P, Clock C>
RATELIMIT_DECL RedisStats RedisLimiter<P, C>::stats() const noexcept {
  RedisStats s;
  static_cast<RouteCounters&>(s) = route_->counters();
  static_cast<FallbackCounters&>(s) = core_->answer.fallback.counters();
  core_->answer.fill(s);
  return s;
}

template <Policy P, Clock C>
RATELIMIT_DECL std::string RedisLimiter<P, C>::redis_key(std::string_view key) const {
  return detail::redis_key(options_.key_prefix, identity_, key, config().binding.suffix);
}

template <Policy P, Clock C>
RATELIMIT_DECL const P& RedisLimiter<P, C>::policy() const noexcept {
  return config().policy;
}

template <Policy P, Clock C>
RATELIMIT_DECL const RulesOf<P>& RedisLimiter<P, C>::rules() const noexcept {
  return config().rules;
}

template <Policy P, Clock C>
RATELIMIT_DECL void RedisLimiter<P, C>::set_policy(P policy) {
  require_name("set_policy needs");
  Config c(std::move(policy));
  // One change at a time: two racing changes could otherwise leave the fallback on one's share and the
  // calls on the other's policy.
  std::lock_guard change(core_->change_mutex);
  core_->answer.fallback.set_policy(c.policy);  // its share too (throws for a bad share before anything changed)
  core_->set_config(std::move(c));
  // Also a return to a policy given before (same id): what it had cached may no longer be true.
  if (core_->answer.denials) core_->answer.denials->invalidate_all();
}

template <Policy P, Clock C>
RATELIMIT_DECL std::uint64_t RedisLimiter<P, C>::policy_generation() const noexcept {
  return core_->generation.load(std::memory_order_acquire);
}

template <Policy P, Clock C>
RATELIMIT_DECL const detail::EmbeddedScript& RedisLimiter<P, C>::script() const noexcept {
  return *config().binding.script;
}

template <Policy P, Clock C>
RATELIMIT_DECL std::shared_ptr<ClusterRouter> RedisLimiter<P, C>::cluster() const noexcept {
  return std::shared_ptr<ClusterRouter>(route_, route_->cluster_router());
}

template <Policy P, Clock C>
RATELIMIT_DECL const void* RedisLimiter<P, C>::joint_domain() const noexcept {
  return route_->domain();
}

template <Policy P, Clock C>
RATELIMIT_DECL bool RedisLimiter<P, C>::check_jointly(std::span<const JointRequest> requests,
                                                      std::span<CheckResult> results) {
  return detail::run_layered(joint_domain(), requests, results);
}

template <Policy P, Clock C>
RATELIMIT_DECL auto RedisLimiter<P, C>::config() const noexcept -> const Config& {
  return *core_->current.load(std::memory_order_acquire);
}

template <Policy P, Clock C>
RATELIMIT_DECL std::int64_t RedisLimiter<P, C>::now_us() {
  return detail::now_us(clock_);
}

template <Policy P, Clock C>
RATELIMIT_DECL detail::LayeredPart RedisLimiter<P, C>::layered_part(std::string_view key, std::int64_t cost) {
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

template <Policy P, Clock C>
RATELIMIT_DECL CheckResult RedisLimiter<P, C>::run(std::string_view key, std::int64_t cost, Mode mode,
                                                   const Config& config) {
  check_request(key, cost);
  const Request one{key, cost};
  return run_many(std::span<const Request>(&one, 1), mode, config).front();
}

template <Policy P, Clock C>
RATELIMIT_DECL std::vector<CheckResult> RedisLimiter<P, C>::run_many(std::span<const Request> requests, Mode mode,
                                                                     const Config& config) {
  const std::int64_t now = now_us();
  core_->answer.calls.fetch_add(requests.size(), std::memory_order_relaxed);
  auto key_of = [this](std::string_view key) { return redis_key(key); };
  return core_->answer.send(*route_, config, requests, mode, now, detail::time_arg(options_, now), key_of);
}

template <Policy P, Clock C>
template <class G>
void RedisLimiter<P, C>::send_async(std::string_view key, std::int64_t cost, Mode mode,
                                    std::chrono::milliseconds timeout, G&& g) {
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

template <Policy P, Clock C>
RATELIMIT_DECL void RedisLimiter<P, C>::send_erased(std::string_view key, std::int64_t cost, Mode mode,
                                                    std::chrono::milliseconds timeout, detail::CheckCallback g) {
  send_async(key, cost, mode, timeout, std::move(g));
}

}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
