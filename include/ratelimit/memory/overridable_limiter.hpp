#pragma once

/// @file
/// `OverridableMemoryLimiter`: an in-memory limiter whose calls may each name the policy of their key (per-key
/// quota overrides, include/ratelimit/layers/README.md "Per-key quota overrides"); every key's state remembers the
/// rules it was written under.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

#include "ratelimit/clock.hpp"
#include "ratelimit/decision.hpp"
#include "ratelimit/detail/key_length.hpp"
#include "ratelimit/memory/memory_limiter.hpp"
#include "ratelimit/memory/options.hpp"
#include "ratelimit/memory/sharded_store.hpp"
#include "ratelimit/policy/policy.hpp"

namespace ratelimit {

/// The in-process backend of `QuotaOverrides`: per-key state for one policy `P`, as `MemoryLimiter`, except that
/// each call may give another policy of `P`'s kind for its key (a `PreparedPolicy`), and each key's state keeps
/// the rules it was written under. A call under other rules first converts the key's usage in units with the
/// formulas of include/ratelimit/README.md "Changing a policy at run time", at the call's effective time (as Redis does
/// on a key's next touch), so a key whose policy changes keeps its usage. Checks of one key are linearizable: the
/// conversion and the decision run under the key's shard lock. Memory per key: a `MemoryLimiter`'s plus one copy
/// of the rules (32 bytes for GCRA); bounds as `MemoryLimiter` (`MemoryOptions`), reclaiming a key when it
/// is full under its own rules. Not a `JointBackend`: in `check_layers` it is checked by consume-then-refund.
///
/// Thread-safe: every method may be called from any number of threads.
///
/// @tparam P a `Policy`. @tparam C a `Clock`.
template <Policy P, Clock C = std::chrono::steady_clock>
class OverridableMemoryLimiter {
 public:
  using policy_type = P;
  using clock_type = C;
  using time_point = typename C::time_point;

  /// A policy validated for this limiter and its rules in 1 ns ticks; made by `prepare`. Immutable.
  class PreparedPolicy {
   public:
    [[nodiscard]] const P& policy() const noexcept { return policy_; }
    [[nodiscard]] const RulesOf<P>& rules() const noexcept { return rules_; }

   private:
    friend class OverridableMemoryLimiter;
    PreparedPolicy(P p, RulesOf<P> r) : policy_(std::move(p)), rules_(std::move(r)) {}
    P policy_;
    RulesOf<P> rules_;
  };

  /// Throws `std::invalid_argument` naming the field as `MemoryLimiter`'s constructor.
  explicit OverridableMemoryLimiter(P policy, MemoryOptions options = {}, C clock = {})
      : bases_{make_prepared(policy)},
        base_(&bases_.front()),
        options_(detail::validated_memory_options(options, bases_.front().rules_)),
        clock_(std::move(clock)),
        store_(options_.max_keys, detail::memory_shards_for(options_, bases_.front().rules_), options_.max_bytes) {}

  /// Validates `policy` for this limiter, for calls that name it. Throws `std::invalid_argument` naming the field
  /// (e.g. `Gcra.burst`; `MemoryOptions.max_bytes` when a shard's share of it cannot hold one key's longest log
  /// of that limit). Thread-safe.
  [[nodiscard]] std::shared_ptr<const PreparedPolicy> prepare(P policy) const {
    auto p = std::make_shared<const PreparedPolicy>(make_prepared(std::move(policy)));
    check_fits(p->rules_);
    return p;
  }

  /// Checks `cost` units for `key` under the limiter's policy (`policy()`) and consumes them if admitted.
  /// Thread-safe. Throws `std::invalid_argument` for a negative cost or a key longer than `max_key_bytes`.
  Decision allow(std::string_view key, std::int64_t cost = 1) { return allow(key, cost, base()); }
  /// As `allow`, under `policy` instead (the key's usage converted to it first if it was written under other
  /// rules). Throws as `allow`.
  Decision allow(std::string_view key, std::int64_t cost, const PreparedPolicy& policy) {
    check_key(key);
    detail::require_cost(cost);
    const RulesOf<P>& rules = policy.rules_;
    const std::int64_t t = detail::now_ns(clock_);
    auto fn = [&](Tagged& s, bool present) {
      convert(s, rules, t);
      const TickDecision d = ratelimit::decide(rules, s.state, t, cost);
      const bool keep = (d.allowed && cost > 0) || (present && !rules.is_full(s.state, t));
      return std::pair{d, keep};
    };
    return to_decision(store_.update(key, store_.hash(key), fn, is_full_fn(t)), kTickNs);
  }
  /// As `allow`, saying who decided (always `Outcome::decided` in memory). Thread-safe.
  CheckResult check(std::string_view key, std::int64_t cost = 1) { return {allow(key, cost), Outcome::decided}; }
  /// As `check`, under `policy`.
  CheckResult check(std::string_view key, std::int64_t cost, const PreparedPolicy& policy) {
    return {allow(key, cost, policy), Outcome::decided};
  }

  /// What a cost-1 request would see under the limiter's policy, consuming and writing nothing. Thread-safe.
  Decision peek(std::string_view key) { return peek(key, base()); }
  /// As `peek`, under `policy` (a converted copy of the state is looked at; nothing is written).
  Decision peek(std::string_view key, const PreparedPolicy& policy) {
    check_key(key);
    const RulesOf<P>& rules = policy.rules_;
    const std::int64_t t = detail::now_ns(clock_);
    const TickDecision d = store_.read(key, store_.hash(key), [&](const Tagged& s) {
      if (!s.rules || *s.rules == rules) return ratelimit::peek(rules, s.state, t);
      Tagged copy = s;
      convert(copy, rules, t);
      return ratelimit::peek(rules, copy.state, t);
    });
    return to_decision(d, kTickNs);
  }

  /// Gives back up to `cost` units `key` consumed, never past full (`ratelimit::refund`), under the limiter's
  /// policy. Thread-safe. Throws as `allow`.
  Decision refund(std::string_view key, std::int64_t cost) { return refund(key, cost, base()); }
  /// As `refund`, under `policy` (the usage converted to it first).
  Decision refund(std::string_view key, std::int64_t cost, const PreparedPolicy& policy) {
    check_key(key);
    detail::require_cost(cost);
    const RulesOf<P>& rules = policy.rules_;
    const std::int64_t t = detail::now_ns(clock_);
    auto fn = [&](Tagged& s, bool present) {
      if (!present) return std::pair{rules.evaluate(s.state, t, 0), false};  // full: nothing to give back
      convert(s, rules, t);
      const TickDecision d = rules.refund(s.state, t, cost);
      return std::pair{d, !rules.is_full(s.state, t)};
    };
    return to_decision(store_.update(key, store_.hash(key), fn, is_full_fn(t)), kTickNs);
  }

  /// Makes `key`'s state what charging `actual` instead of `charged` would have made it (`MemoryLimiter::settle`,
  /// include/ratelimit/README.md "Settling after the response"), under the limiter's policy, with no bound on the
  /// debt beyond exact arithmetic. Thread-safe. Throws `std::invalid_argument` naming `charged` or `actual`, or as
  /// `allow`.
  Decision settle(std::string_view key, std::int64_t charged, std::int64_t actual) {
    return settle(key, charged, actual, detail::kInt64Max, base());
  }
  /// As `settle(key, charged, actual)`, at most `max_debt` units (>= 0, else `std::invalid_argument` naming
  /// `max_debt`) owed beyond the limit.
  Decision settle(std::string_view key, std::int64_t charged, std::int64_t actual, std::int64_t max_debt) {
    return settle(key, charged, actual, max_debt, base());
  }
  /// As `settle(key, charged, actual, max_debt)`, under `policy` (the usage converted to it first).
  Decision settle(std::string_view key, std::int64_t charged, std::int64_t actual, std::int64_t max_debt,
                  const PreparedPolicy& policy) {
    check_key(key);
    detail::require_settle(charged, actual, max_debt);
    const RulesOf<P>& rules = policy.rules_;
    const std::int64_t t = detail::now_ns(clock_);
    auto fn = [&](Tagged& s, bool present) {
      // An absent key is full: a give-back leaves it so, and nothing is inserted.
      if (!present && actual <= charged) return std::pair{rules.evaluate(s.state, t, 0), false};
      convert(s, rules, t);
      const TickDecision d = ratelimit::settle(rules, s.state, t, charged, actual, max_debt);
      return std::pair{d, !rules.is_full(s.state, t)};
    };
    return to_decision(store_.update(key, store_.hash(key), fn, is_full_fn(t)), kTickNs);
  }

  /// Forgets the key's state: it is full again. Thread-safe. Throws for a key longer than `max_key_bytes`.
  void reset(std::string_view key) {
    check_key(key);
    store_.erase(key, store_.hash(key));
  }

  /// Reclaims every key full now under its own rules; returns how many. Thread-safe.
  std::size_t sweep() { return store_.sweep(is_full_fn(detail::now_ns(clock_))); }

  /// Replaces the limiter's policy (the one of calls that name none). Keys are converted lazily, on their next
  /// call under it, at that call's effective time (as on Redis; include/ratelimit/README.md "Changing a policy at run
  /// time"); keys last written under another policy (an override) keep their own until a call under this one.
  /// Thread-safe: each call runs wholly under the policy current when it started. Every policy given is kept for the
  /// limiter's life, each once (one equal to one given before reuses it; one of the same rules in ticks converts
  /// nothing, as on Redis). Throws `std::invalid_argument` as `prepare`, changing nothing.
  void set_policy(P policy) {
    PreparedPolicy p = make_prepared(std::move(policy));
    check_fits(p.rules_);
    std::lock_guard guard(bases_mutex_);
    const PreparedPolicy* same = nullptr;
    for (const PreparedPolicy& known : bases_) {
      if (known.policy_ == p.policy_) same = &known;  // equal policies have equal rules
    }
    base_.store(same != nullptr ? same : &bases_.emplace_back(std::move(p)), std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
  }
  /// How many times `set_policy` has run (0 at first). Thread-safe (one load).
  [[nodiscard]] std::uint64_t policy_generation() const noexcept { return generation_.load(std::memory_order_acquire); }
  /// The limiter's policy now, as given. Thread-safe; the reference stays valid while the limiter lives.
  [[nodiscard]] const P& policy() const noexcept { return base().policy_; }
  /// The limiter's policy now, prepared (for calls that name it explicitly). Thread-safe; valid as `policy()`.
  [[nodiscard]] const PreparedPolicy& base() const noexcept { return *base_.load(std::memory_order_acquire); }

  /// Keys held now; keys evicted while not full. Thread-safe (snapshots).
  [[nodiscard]] std::size_t size() const { return store_.size(); }
  [[nodiscard]] std::size_t evictions() const { return store_.evictions(); }
  /// The options as given. Thread-safe (immutable).
  [[nodiscard]] const MemoryOptions& options() const noexcept { return options_; }
  /// The clock this limiter reads.
  [[nodiscard]] C& clock() noexcept { return clock_; }

 private:
  static constexpr std::int64_t kTickNs = 1;

  /// A key's state and the rules it was written under (none for a fresh state).
  struct Tagged {
    StateOf<P> state{};
    std::optional<RulesOf<P>> rules{};
    [[nodiscard]] std::size_t heap_bytes() const noexcept requires detail::HeapState<StateOf<P>> {
      return state.heap_bytes();
    }
  };

  /// Carries `s`'s usage from the rules it was written under to `rules` at `t`, and tags it with `rules`.
  static void convert(Tagged& s, const RulesOf<P>& rules, std::int64_t t) {
    if (s.rules && !(*s.rules == rules)) rules.carry(*s.rules, s.state, t);
    s.rules = rules;
  }

  static auto is_full_fn(std::int64_t t) {
    return [t](const Tagged& s) { return !s.rules || s.rules->is_full(s.state, t); };
  }

  static PreparedPolicy make_prepared(P policy) {
    RulesOf<P> rules = policy.rules(kTickNs);
    return PreparedPolicy(std::move(policy), std::move(rules));
  }
  void check_fits(const RulesOf<P>& rules) const {
    (void)detail::validated_memory_options(options_, rules);
    if (!detail::shard_share_holds(options_.max_bytes, store_.shard_count(), detail::max_state_heap_bytes(rules))) {
      detail::invalid("MemoryOptions.max_bytes", "a shard's share cannot hold one key's log of this limit");
    }
  }

  void check_key(std::string_view key) const { detail::check_key_length(key, options_.max_key_bytes); }

  mutable std::mutex bases_mutex_;    // guards appending to bases_
  std::deque<PreparedPolicy> bases_;  // every limiter policy given so far (a deque: references stay valid)
  std::atomic<const PreparedPolicy*> base_;
  std::atomic<std::uint64_t> generation_{0};
  MemoryOptions options_;
  C clock_;
  detail::ShardedStore<Tagged> store_;
};

}  // namespace ratelimit
