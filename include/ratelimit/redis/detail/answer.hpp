#pragma once

/// @file
/// The answer step of the Redis limiters: reply or failure to `Decision` / `CheckResult`, through the failure policy,
/// the fallback and its probe gate, the denial cache, the failure hook and the counters.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
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
#include "ratelimit/error.hpp"
#include "ratelimit/policy/policy.hpp"
#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/denial_cache.hpp"
#include "ratelimit/redis/detail/limiter_setup.hpp"
#include "ratelimit/redis/detail/decision_reply.hpp"
#include "ratelimit/redis/detail/script_binding.hpp"
#include "ratelimit/redis/detail/script_mode.hpp"
#include "ratelimit/redis/engine/route.hpp"
#include "ratelimit/redis/engine/script_call.hpp"
#include "ratelimit/redis/failure_report.hpp"
#include "ratelimit/redis/fallback.hpp"
#include "ratelimit/redis/options.hpp"
#include "ratelimit/redis/stats.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace detail {

/// The failure policy, hook and counters of one limiter, whatever its policy (what a joint check reaches). Thread-safe.
class Answers {
 public:
  Answers(const RedisOptions& o, std::function<void(const BackendError&)> hook)
      : on_error(o.on_error),
        failure_wait_(std::chrono::duration_cast<std::chrono::nanoseconds>(o.failure_retry_after)),
        hook_(std::move(hook)) {}
  Answers(const Answers&) = delete;
  Answers& operator=(const Answers&) = delete;

  const FailurePolicy on_error;
  std::atomic<std::uint64_t> calls{0};
  std::atomic<std::uint64_t> failures{0};
  std::atomic<std::uint64_t> cached_denials{0};

  /// Counts `n` failures of `e`'s cause and tells the hook once.
  void failed(const BackendError& e, std::size_t n = 1) noexcept {
    failures.fetch_add(n, std::memory_order_relaxed);
    by_cause_[static_cast<std::size_t>(e.cause())].fetch_add(n, std::memory_order_relaxed);
    notify(e);
  }
  /// Tells the hook of `e`; what it throws is ignored (the failure policy answers, not an exception).
  void notify(const BackendError& e) const noexcept {
    if (!hook_) return;
    try {
      hook_(e);
    } catch (...) {
    }
  }

  /// `run_script` of `batch`, each key's calls in their order, timed and its reloads counted.
  void run(Route& route, const EmbeddedScript& script, std::span<engine::RouteCall> batch) {
    std::vector<std::string_view> order;
    if (batch.size() > 1) {
      order.reserve(batch.size());
      for (const engine::RouteCall& c : batch) order.push_back(c.key);
    }
    const auto started = std::chrono::steady_clock::now();
    const std::size_t reloads = engine::run_script(route, script, batch, order);
    record_latency(std::chrono::steady_clock::now() - started);
    reloaded(reloads);
  }
  void reloaded(std::size_t n) noexcept {
    if (n != 0) reloads_.fetch_add(n, std::memory_order_relaxed);
  }
  void record_latency(std::chrono::steady_clock::duration d) noexcept {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
    const std::uint64_t u = us > 0 ? static_cast<std::uint64_t>(us) : 0;
    latency_[BackendLatency::bucket_of(u)].fetch_add(1, std::memory_order_relaxed);
    latency_sum_us_.fetch_add(u, std::memory_order_relaxed);
  }

  /// The failure step of a reset that Redis failed with `e`: counted and told; thrown under `raise`, else false.
  bool failed_reset(const BackendError& e) {
    failed(e);
    if (on_error == FailurePolicy::raise) throw e;
    return false;
  }

  /// fail_open: `fresh()`, a fresh key's decision (a cost above the limit is still `never`); otherwise a denial of
  /// `failure_retry_after` (under `raise`, what an async callback gets beside the error).
  template <class Fresh>
  [[nodiscard]] Decision failure_decision(std::int64_t limit, Fresh&& fresh) const {
    if (on_error == FailurePolicy::fail_open) return to_decision(fresh(), kTickNs);
    return Decision{false, limit, 0, failure_wait_, failure_wait_};
  }

  /// The fallback, or null.
  [[nodiscard]] FallbackBase* fallback_base() const noexcept { return fallback_base_; }

  /// This limiter's own fields of `RedisStats` (not its route's or its fallback's).
  void fill(RedisStats& s) const noexcept {
    auto load = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    s.calls = load(calls);
    s.failures = load(failures);
    s.io_errors = load(by_cause_[0]);
    s.timeouts = load(by_cause_[1]);
    s.protocol_errors = load(by_cause_[2]);
    s.reply_errors = load(by_cause_[3]);
    s.short_circuited = load(by_cause_[4]);
    s.script_reloads = load(reloads_);
    for (std::size_t i = 0; i < s.latency.buckets.size(); ++i) s.latency.buckets[i] = load(latency_[i]);
    s.latency.sum_us = load(latency_sum_us_);
    s.cached_denials = load(cached_denials);
  }

 protected:
  ~Answers() = default;
  FallbackBase* fallback_base_ = nullptr;

 private:
  std::chrono::nanoseconds failure_wait_;
  std::function<void(const BackendError&)> hook_;
  std::array<std::atomic<std::uint64_t>, 5> by_cause_{};  // by BackendErrorCause
  std::atomic<std::uint64_t> reloads_{0};
  std::array<std::atomic<std::uint64_t>, BackendLatency::kBoundsUs.size() + 1> latency_{};
  std::atomic<std::uint64_t> latency_sum_us_{0};
};

/// One policy script call as sent: user key, cost, mode, the limiter's time; for the denial cache the send time and
/// the key's stamp.
struct Sent {
  std::string_view key;
  std::int64_t cost = 0;
  Mode mode = Mode::check;
  std::int64_t now_us = 0;
  std::int64_t sent_ns = 0;
  DenialCache::Stamp stamp = 0;
};

/// One policy of a `RedisLimiter` (immutable): rules at 1 us, script binding, an id unique in the process for the
/// denial cache (an address could be reused), and a per-call policy's fallback share (null for the limiter's own).
/// Throws `std::invalid_argument` naming the field for a policy Redis cannot take.
template <Policy P, class Share>
struct PolicyConfig {
  explicit PolicyConfig(P p) : policy(std::move(p)), rules(policy.rules(kTickNs)), binding(bind<P>(rules)) {}
  /// Its script's call on Redis key `key`, `extra` after the parameters (the strings must outlive the call).
  [[nodiscard]] engine::RouteCall call(std::string_view key, std::string_view now, std::string_view cost, Mode mode,
                                       std::span<const std::string> extra = {}) const {
    const std::span<const std::string> params(binding.params.data(), kScriptParams);
    engine::RouteCall c = script_call(*binding.script, key, {now, cost, mode_arg(mode)}, params);
    for (const std::string& e : extra) c.args.push_back(e);
    return c;
  }
  P policy;
  RulesOf<P> rules;
  ScriptBinding binding;
  std::uint64_t id = [] {
    static std::atomic<std::uint64_t> last{0};
    return last.fetch_add(1, std::memory_order_relaxed) + 1;
  }();
  std::shared_ptr<const Share> fallback_share{};
};

/// The answer step of one limiter of policy `P` on clock `C` (probe gate and denial cache on the monotonic clock
/// `G`): `Answers`, the fallback, and for `RedisLimiter` the denial cache. Thread-safe.
template <Policy P, Clock C, Clock G>
class Answer final : public Answers {
 public:
  using Ticket = typename engine::CircuitBreaker<G>::Ticket;
  using Share = typename Fallback<P, C, G>::Share;
  using Config = PolicyConfig<P, Share>;

  /// Throws `std::invalid_argument` for bad fallback options (naming the field).
  Answer(const P& policy, const RedisOptions& o, const C& clock, G gate, bool denial_cache)
      : Answers(o, failure_hook(o, gate)),
        mono(gate),
        fallback(policy, o.limiter(), clock, std::move(gate)),
        denials(denial_cache && o.deny_cache.enabled ? std::make_unique<DenialCache>(o.deny_cache.max_keys) : nullptr) {
    if (fallback.enabled()) fallback_base_ = &fallback;
  }

  G mono;                                      // the gate's and the denial cache's clock
  Fallback<P, C, G> fallback;                  // holds nothing unless on_error is fallback
  const std::unique_ptr<DenialCache> denials;  // null unless enabled (`RedisLimiter` only)

  [[nodiscard]] std::int64_t mono_ns() { return ratelimit::detail::now_ns(mono); }
  using Answers::failure_decision;

  /// May a call go to Redis? Without a fallback always; with one, its probe gate's ticket (refused while Redis is
  /// failing and no probe is due: then `serve` answers).
  [[nodiscard]] Ticket admit() { return fallback.enabled() ? fallback.admit() : Ticket::unguarded(); }
  /// Reports a sent call's outcome to its ticket: null for a reply (error replies too: the server is alive).
  static void settle(Ticket& ticket, const BackendError* error) noexcept { Fallback<P, C, G>::settle(ticket, error); }
  /// The fallback's answer for a call the gate refused (or that failed), counted: a reserve is its check, a settle
  /// below what was charged its refund, one above and a cancel its peek (it keeps no debts nor bookings).
  CheckResult serve(std::string_view key, std::int64_t cost, Mode mode, const Share* share = nullptr) {
    const bool refund = mode == Mode::refund || (mode == Mode::settle && cost < 0);
    const bool peek = mode == Mode::peek || mode == Mode::cancel || (mode == Mode::settle && cost >= 0);
    return fallback.serve(key, cost < 0 ? -cost : cost, peek, refund, share);
  }

  /// The failure step of a call of `key` failed with `e`: counted and told, a refund's key's cached denial dropped;
  /// the fallback (share `share`) answers, else `failure()`. Under `raise` the caller throws.
  template <class Failure>
  CheckResult failed_call(const BackendError& e, std::string_view key, std::int64_t cost, Mode mode, const Share* share,
                          Failure&& failure) {
    failed(e);
    if (denials && mode != Mode::check && mode != Mode::peek) denials->invalidate(key);
    if (fallback.enabled()) {
      try {
        return serve(key, cost, mode, share);
      } catch (...) {  // the fallback's allocation failed: the plain failure decision
      }
    }
    return {failure(), Outcome::failure_policy};
  }

  /// A policy script's failure decision under `rules`; a refund's is a fresh key's state under any policy, a settle's
  /// and a cancel's the failure policy's on a fresh key's cost-0 view, a reserve's a check's.
  [[nodiscard]] Decision failure_decision(const RulesOf<P>& rules, std::int64_t now, std::int64_t cost,
                                          Mode mode) const {
    if (mode == Mode::refund) return to_decision(rules.evaluate(StateOf<P>{}, now, 0), kTickNs);
    return Answers::failure_decision(rules.limit(), [&] {
      const StateOf<P> fresh{};
      if (mode == Mode::settle || mode == Mode::cancel) return rules.evaluate(fresh, now, 0);
      return mode == Mode::peek ? ratelimit::peek(rules, fresh, now) : rules.evaluate(fresh, now, cost);
    });
  }

  /// The answer to call `s` sent under `config`: the decision in `reply`, fed to the denial cache; for `error` or a
  /// reply breaking the contract the failure step's, the error kept in `raised` unless one is. Settles no gate.
  CheckResult answer(const Config& config, const Sent& s, const redisReply* reply, const BackendError* error,
                     std::optional<BackendError>& raised) {
    try {
      if (error != nullptr) throw *error;
      const CheckResult r{decision_of(*reply, config.rules.limit(), s.mode == Mode::reserve ? 8 : 5), Outcome::decided};
      learn(s, r.decision, config.id);
      return r;
    } catch (const BackendError& e) {
      if (!raised) raised = e;
      return failed_call(e, s.key, s.cost, s.mode, config.fallback_share.get(),
                         [&] { return failure_decision(config.rules, s.now_us, s.cost, s.mode); });
    }
  }

  /// The cached denial of a check of `key` at `cost` under policy `id`, counted.
  [[nodiscard]] bool cached(std::string_view key, std::int64_t cost, std::int64_t now, std::uint64_t id, Decision& d) {
    if (!denials || !denials->lookup(key, cost, now, d, id)) return false;
    cached_denials.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  /// The answers of `requests` under `config`, in order: checks the denial cache answers first, the rest as one
  /// pipelined batch on `route` (Redis key `key_of(key)`, time argument `now_arg`), or the fallback's while its gate
  /// is shut. The ticket is settled once (any reply, an error reply too: the server is alive). Under `raise` the first
  /// failure is thrown once every request was answered. `extra` goes after every call's parameters; `replies`, when
  /// given, receives the replies of the calls Redis decided, in order (a reserve reads its three values from them).
  template <class KeyOf>
  std::vector<CheckResult> send(Route& route, const Config& config, std::span<const BatchRequest> requests, Mode mode,
                                std::int64_t now, std::string_view now_arg, KeyOf&& key_of,
                                std::span<const std::string> extra = {},
                                std::vector<engine::Reply>* replies = nullptr) {
    std::vector<CheckResult> out(requests.size());
    std::vector<std::size_t> at;  // the requests that go to Redis
    at.reserve(requests.size());
    const std::int64_t looked_ns = denials ? mono_ns() : 0;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const BatchRequest& r = requests[i];
      if (mode != Mode::check || !cached(r.key, r.cost, looked_ns, config.id, out[i].decision)) at.push_back(i);
    }
    if (at.empty()) return out;
    Ticket ticket = admit();
    if (!ticket) {
      for (const std::size_t i : at)
        out[i] = serve(requests[i].key, requests[i].cost, mode, config.fallback_share.get());
      return out;
    }
    std::vector<std::array<std::string, 2>> args(at.size());  // each call's Redis key and cost
    std::vector<engine::RouteCall> batch(at.size());
    std::vector<Sent> sent(at.size());
    for (std::size_t k = 0; k < at.size(); ++k) {
      const BatchRequest& r = requests[at[k]];
      sent[k] = {r.key, r.cost, mode, now, 0, denials ? denials->stamp(r.key) : 0};
      args[k] = {key_of(r.key), std::to_string(r.cost)};
      batch[k] = config.call(args[k][0], now_arg, args[k][1], mode, extra);
    }
    const std::int64_t sent_ns = denials ? mono_ns() : 0;
    run(route, *config.binding.script, batch);
    std::optional<BackendError> raised;
    bool any_reply = false;
    for (std::size_t k = 0; k < at.size(); ++k) {
      any_reply = any_reply || batch[k].reply != nullptr;
      sent[k].sent_ns = sent_ns;
      out[at[k]] = answer(config, sent[k], batch[k].reply.get(), batch[k].error ? &*batch[k].error : nullptr, raised);
      if (replies != nullptr && out[at[k]].outcome == Outcome::decided) replies->push_back(std::move(batch[k].reply));
    }
    settle(ticket, any_reply ? nullptr : &*raised);
    if (raised && on_error == FailurePolicy::raise) throw *raised;
    return out;
  }

  /// What an async call keeps from its start to its completion.
  struct Pending {
    Sent sent;
    std::string key;  // `sent.key`, owned (with a denial cache or a fallback)
    std::optional<Decision> cached;
    std::optional<Ticket> ticket;
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    /// Answered without being written: by the denial cache, or the fallback (gate shut).
    [[nodiscard]] bool local() const noexcept { return cached || (ticket && !*ticket); }
  };
  /// An async call of `key` about to start under policy `id` at `now_us`: the denial cache's answer, or a ticket.
  Pending pending(std::string_view key, std::int64_t cost, Mode mode, std::int64_t now_us, std::uint64_t id) {
    Pending p{{{}, cost, mode, now_us}, denials || fallback.enabled() ? std::string(key) : std::string(), {}, {}};
    if (denials) {
      p.sent.stamp = denials->stamp(key);
      p.sent.sent_ns = mono_ns();
      if (Decision d; mode == Mode::check && cached(key, cost, p.sent.sent_ns, id, d)) p.cached = d;
    }
    if (fallback.enabled() && !p.cached) p.ticket.emplace(fallback.admit());
    return p;
  }
  /// The answer of async call `p` completed with `reply` or `error` (`was_reloaded`: after a `NOSCRIPT`): timed and
  /// counted, then the local answer or `answer`'s (the ticket settled); `raised` gets the failure under `raise`.
  CheckResult finish(const Config& config, Pending& p, const engine::Reply& reply,
                     const std::optional<BackendError>& error, bool was_reloaded, std::exception_ptr& raised) noexcept {
    Sent s = p.sent;
    s.key = p.key;
    try {
      if (p.cached) return {*p.cached, Outcome::decided};  // local answers: no backend call to time
      if (p.ticket && !*p.ticket) return serve(s.key, s.cost, s.mode, config.fallback_share.get());
      record_latency(std::chrono::steady_clock::now() - p.started);
      reloaded(was_reloaded ? 1 : 0);
      if (p.ticket) settle(*p.ticket, reply || !error ? nullptr : &*error);
      std::optional<BackendError> failure;
      const CheckResult r = answer(config, s, reply.get(), error ? &*error : nullptr, failure);
      if (failure && on_error == FailurePolicy::raise) raised = std::make_exception_ptr(*failure);
      return r;
    } catch (...) {  // an allocation failed: the plain failure decision
      return {failure_decision(config.rules, s.now_us, s.cost, s.mode), Outcome::failure_policy};
    }
  }

 private:
  /// Feeds Redis's decision `d` of call `s` to the denial cache (include/ratelimit/redis/README.md "Denial cache").
  void learn(const Sent& s, const Decision& d, std::uint64_t id) {
    if (!denials || s.mode == Mode::peek) return;
    if (s.mode != Mode::check) {  // a refund, booking, cancel or settle: what was denied may pass now, or not yet
      denials->invalidate(s.key);
    } else if (!d.allowed && s.cost > 0) {
      denials->remember(s.key, s.cost, d, s.sent_ns, mono_ns(), id, s.stamp);
    } else if (d.allowed) {
      denials->forget(s.key);
    }
  }
};

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
