#pragma once

/// @file
/// The in-memory fallback of a Redis rate limiter (`FailurePolicy::fallback`, include/ratelimit/redis/README.md
/// "Fallback during outages").

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <type_traits>
#include <utility>

#include "ratelimit/clock.hpp"
#include "ratelimit/decision.hpp"
#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/joint_backend.hpp"
#include "ratelimit/memory/memory_limiter.hpp"
#include "ratelimit/memory/overridable_limiter.hpp"
#include "ratelimit/policy/policy.hpp"
#include "ratelimit/policy/share.hpp"
#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/detail/gate_clock.hpp"
#include "ratelimit/redis/engine/circuit_breaker.hpp"
#include "ratelimit/redis/options.hpp"
#include "ratelimit/redis/stats.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {

namespace detail {

/// What a joint check reaches of a member's fallback, whatever its policy.
class FallbackBase {
 public:
  /// The memory limiter, for a joint check over several members' fallbacks.
  [[nodiscard]] JointBackend* joint() const noexcept { return joint_; }
  /// Reports the outcome of a call that did not ask the gate (a joint check): a failure opens the gate.
  virtual void observe(const BackendError* error) noexcept = 0;
  /// Counts `n` checks answered by the memory limiter.
  void count_served(std::uint64_t n = 1) noexcept { served_.fetch_add(n, std::memory_order_relaxed); }

 protected:
  ~FallbackBase() = default;
  JointBackend* joint_ = nullptr;
  std::atomic<std::uint64_t> served_{0};
};

/// Validates `LimiterOptions::fallback` (`instances` only under `on_error = fallback`). Throws
/// `std::invalid_argument` naming the field.
inline void check_fallback_options(const LimiterOptions& o) {
  const FallbackOptions& f = o.fallback;
  if (o.on_error == FailurePolicy::fallback && (f.instances < 1 || f.instances > 1'000'000)) {
    ratelimit::detail::invalid("LimiterOptions.fallback.instances",
                               "must be in [1, 1000000] with on_error = fallback (the processes sharing the limit)");
  }
  if (f.probe_min.count() <= 0 || f.probe_min > std::chrono::seconds(10)) {
    ratelimit::detail::invalid("LimiterOptions.fallback.probe_min", "must be in (0, 10 s]");
  }
  if (f.probe_max < f.probe_min || f.probe_max > std::chrono::seconds(10)) {
    ratelimit::detail::invalid("LimiterOptions.fallback.probe_max", "must be in [probe_min, 10 s]");
  }
  if (f.max_keys < 1) ratelimit::detail::invalid("LimiterOptions.fallback.max_keys", "must be >= 1");
}

/// The in-memory fallback of one limiter: this process's share of the quota in a `MemoryLimiter` on clock `C`, and
/// a probe gate (a `CircuitBreaker` on clock `G` opening at the first failure): while it is open the memory limiter
/// answers, and one check per probe period goes to Redis, whose reply closes it. Per-call policies (overrides) are
/// answered under their share by an `OverridableMemoryLimiter` made at the first. Thread-safe.
template <Policy P, Clock C, Clock G>
class Fallback final : public FallbackBase {
 public:
  using Overridable = OverridableMemoryLimiter<P, C>;
  /// The share of a per-call policy, prepared for `serve`.
  using Share = typename Overridable::PreparedPolicy;

  /// Holds nothing unless `options.on_error` is `fallback`. Throws `std::invalid_argument` naming the field for bad
  /// options or share (`share_of(policy, instances)`).
  Fallback(const P& policy, const LimiterOptions& options, C clock, G gate_clock) {
    check_fallback_options(options);
    if (options.on_error != FailurePolicy::fallback) return;
    const FallbackOptions& f = options.fallback;
    instances_ = f.instances;
    memory_options_ = MemoryOptions{.max_keys = f.max_keys, .max_key_bytes = options.max_key_bytes};
    memory_ = std::make_unique<MemoryLimiter<P, C>>(share_of(policy, f.instances), memory_options_, std::move(clock));
    joint_ = memory_.get();
    const CircuitBreakerOptions b{.failure_threshold = 1, .open_min = f.probe_min, .open_max = f.probe_max};
    gate_ = std::make_unique<engine::CircuitBreaker<G>>(b, std::move(gate_clock));
  }

  /// Follows the limiter's `set_policy` (the share of `policy`, keys' usage kept). Throws `std::invalid_argument`
  /// for a bad share, changing nothing.
  void set_policy(const P& policy) {
    if (memory_) memory_->set_policy(share_of(policy, instances_));
  }

  /// This process's share of per-call policy `policy` (include/ratelimit/layers/README.md "Per-key quota
  /// overrides"), for `serve`; null when not `enabled()`. Throws `std::invalid_argument` for a bad share.
  [[nodiscard]] std::shared_ptr<const Share> prepare_share(const P& policy) {
    if (!memory_) return nullptr;
    std::call_once(overridable_once_, [&] {
      overridable_ = std::make_unique<Overridable>(memory_->policy(), memory_options_, memory_->clock());
      overridable_ready_.store(overridable_.get(), std::memory_order_release);
    });
    return overridable_->prepare(share_of(policy, instances_));
  }

  /// True when `on_error` is `fallback`.
  [[nodiscard]] bool enabled() const noexcept { return memory_ != nullptr; }

  /// May this check go to Redis (a pass, or the probe), or must `serve` answer? `settle` the ticket. Only when
  /// `enabled()`.
  [[nodiscard]] typename engine::CircuitBreaker<G>::Ticket admit() { return gate_->admit(); }

  /// Reports a sent call's outcome: any reply (an error reply too: the server is alive) closes the gate, a failure
  /// without one opens it.
  static void settle(typename engine::CircuitBreaker<G>::Ticket& ticket, const BackendError* error) noexcept {
    if (error == nullptr || error->cause() == BackendErrorCause::reply) return ticket.succeeded();
    ticket.failed();
  }

  void observe(const BackendError* error) noexcept override {
    auto ticket = gate_->admit();
    settle(ticket, error);
  }

  /// The memory limiter's answer for a check, a `peek` or a `refund`, under `share` (from `prepare_share`) when
  /// given; counted, `Outcome::failure_policy`. Only when `enabled()`. Throws what the memory limiter throws.
  CheckResult serve(std::string_view key, std::int64_t cost, bool peek = false, bool refund = false,
                    const Share* share = nullptr) {
    served_.fetch_add(1, std::memory_order_relaxed);
    auto on = [&](auto& memory, const auto&... per_call) -> Decision {
      if (refund) return memory.refund(key, cost, per_call...);
      return peek ? memory.peek(key, per_call...) : memory.allow(key, cost, per_call...);
    };
    return {share != nullptr ? on(*overridable_, *share) : on(*memory_), Outcome::failure_policy};
  }

  /// Forgets the fallback's state of `key` (under any policy).
  void reset(std::string_view key) {
    if (!memory_) return;
    memory_->reset(key);
    if (Overridable* o = overridable_ready_.load(std::memory_order_acquire)) o->reset(key);
  }

  /// Whether the fallback is active, checks it served, and times it became active.
  [[nodiscard]] FallbackCounters counters() const noexcept {
    return {gate_ != nullptr && gate_->state() != BreakerState::closed, served_.load(std::memory_order_relaxed),
            gate_ != nullptr ? gate_->counters().opens : 0};
  }

 private:
  decltype(FallbackOptions::instances) instances_ = 1;
  MemoryOptions memory_options_{};
  std::unique_ptr<MemoryLimiter<P, C>> memory_;
  std::once_flag overridable_once_;
  std::unique_ptr<Overridable> overridable_;       // the per-call policies' shares; made at the first
  std::atomic<Overridable*> overridable_ready_{};  // overridable_ once made (for reset, which may come first)
  std::unique_ptr<engine::CircuitBreaker<G>> gate_;
};

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
