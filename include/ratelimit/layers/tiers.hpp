#pragma once

/// @file
/// Per-key quotas: a key resolves to a plan (through a user callback, cached), and the plan's
/// per-minute, per-day and burst limits apply together, all or nothing.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ratelimit/clock.hpp"
#include "ratelimit/detail/key_length.hpp"
#include "ratelimit/layers/detail/plan_cache.hpp"
#include "ratelimit/layers/layer.hpp"
#include "ratelimit/layers/layered.hpp"
#include "ratelimit/memory/memory_limiter.hpp"
#include "ratelimit/memory/options.hpp"
#include "ratelimit/policy/fixed_window.hpp"
#include "ratelimit/policy/token_bucket.hpp"

namespace ratelimit {

/// A customer plan. Example: free 30/min, 1,000/day, burst 10; pro 300/min, 50,000/day, burst 50;
/// enterprise 3,000/min, 500,000/day, burst 200.
struct Plan {
  /// The plan's name; it prefixes the layer names ("<name>-minute", "-day", "-burst"), so printable ASCII
  /// if they go into header fields.
  std::string name{};
  /// Requests per aligned minute (`FixedWindow{per_minute, 1 min}`); >= 1.
  std::int64_t per_minute = 0;
  /// Requests per aligned day (`FixedWindow{per_day, 24 h}`; UTC days with `system_clock`); >= 1.
  std::int64_t per_day = 0;
  /// Requests at once from idle (`TokenBucket{burst, per_minute, 1 min}`: refills at the minute rate); >= 1.
  std::int64_t burst = 0;
};

/// Returns the plan name of a key, or nothing for an unknown key (which gets the default plan). Called
/// outside every lock, possibly from several threads at once; may be slow (it is cached).
using PlanResolver = std::function<std::optional<std::string>(std::string_view key)>;

/// Options of `TieredLimiter`; a plain aggregate, every member has a default, so designated
/// initializers may name any subset (`TierOptions{.plans = {...}}`).
struct TierOptions {
  /// The plans; non-empty, distinct names.
  std::vector<Plan> plans{};
  /// The plan of unknown keys and of names the resolver returns that are no plan; empty = the first.
  std::string default_plan{};
  /// Keys whose plan is cached at once; >= 1.
  std::size_t cache_entries = 10'000;
  /// How long a resolved plan is trusted (plan changes take effect within it); > 0.
  std::chrono::nanoseconds cache_ttl = std::chrono::minutes(1);
  /// Options of each plan's limiters (for `TieredLimiter`, the in-memory one). Its `max_key_bytes`
  /// also bounds the keys `plan_for` accepts, checked before the resolver runs or the cache stores
  /// anything; with another backend, set it to that backend's bound (512 by default on both).
  MemoryOptions memory{};
  /// Options of each plan's layers (penalty, on_limited).
  LayerOptions layer{};
};

/// Makes the in-memory limiters of `TieredLimiter`'s plans: `factory(policy, name)` returns
/// `std::unique_ptr<MemoryLimiter<P, C>>` (the layer name is not needed: each limiter has its own store).
template <Clock C>
struct MemoryLimiterFactory {
  MemoryOptions options{};
  C clock{};
  template <Policy P>
  std::unique_ptr<MemoryLimiter<P, C>> operator()(P policy, std::string_view /*name*/) const {
    return std::make_unique<MemoryLimiter<P, C>>(std::move(policy), options, clock);
  }
};

/// Resolves a key to its plan and checks the plan's three limits together (via `check_layers`, so in
/// memory atomically: a request denied by the day limit consumes no minute or burst quota).
///
/// `Factory` makes each plan's limiters: called as `factory(FixedWindow{...}, name)` and
/// `factory(TokenBucket{...}, name)` with the layer's name ("<plan>-minute", "-day", "-burst"), it
/// returns a `std::unique_ptr` to a refundable limiter (in-memory: `MemoryLimiterFactory`; Redis:
/// `RedisLimiter`s sharing a pool, each with its own key prefix built from `name`, since the minute
/// and day limits are both fixed windows over the same keys). `C` is the clock of the plan cache. Thread-safe. Each
/// plan has its own limiters, so a key that changes plan starts afresh in the new one.
template <class Factory, Clock C = std::chrono::steady_clock>
class BasicTieredLimiter {
 public:
  using WindowLimiter = typename std::invoke_result_t<Factory&, FixedWindow, std::string_view>::element_type;
  using BurstLimiter = typename std::invoke_result_t<Factory&, TokenBucket, std::string_view>::element_type;

  /// The limiters and layers of one plan.
  struct PlanLimits {
    PlanLimits(const Plan& p, const TierOptions& o, Factory& make)
        : plan(p),
          minute(make(FixedWindow{p.per_minute, std::chrono::minutes(1)}, p.name + "-minute")),
          day(make(FixedWindow{p.per_day, std::chrono::hours(24)}, p.name + "-day")),
          burst(make(TokenBucket{p.burst, p.per_minute, std::chrono::minutes(1)}, p.name + "-burst")),
          minute_layer(*minute, p.name + "-minute", o.layer),
          day_layer(*day, p.name + "-day", o.layer),
          burst_layer(*burst, p.name + "-burst", o.layer) {}

    Plan plan;
    std::unique_ptr<WindowLimiter> minute;
    std::unique_ptr<WindowLimiter> day;
    std::unique_ptr<BurstLimiter> burst;
    LimiterLayer<WindowLimiter> minute_layer;
    LimiterLayer<WindowLimiter> day_layer;
    LimiterLayer<BurstLimiter> burst_layer;
  };

  /// Throws `std::invalid_argument` naming the field: `TierOptions.plans` (empty, or a duplicate
  /// name), `TierOptions.default_plan` (no such plan), `TierOptions.cache_entries`,
  /// `TierOptions.cache_ttl`, `Plan.per_minute` / `.per_day` / `.burst` (< 1), or `resolver` when it
  /// is empty.
  BasicTieredLimiter(TierOptions options, PlanResolver resolver, Factory factory, C clock = {})
      : resolver_(std::move(resolver)),
        factory_(std::move(factory)),
        clock_(std::move(clock)),
        max_key_bytes_(options.memory.max_key_bytes),
        cache_(checked_entries(options.cache_entries), checked_ttl(options.cache_ttl)) {
    if (!resolver_) detail::invalid("resolver", "must be callable");
    if (options.plans.empty()) detail::invalid("TierOptions.plans", "must not be empty");
    for (const Plan& p : options.plans) {
      detail::require_positive(p.per_minute, "Plan.per_minute");
      detail::require_positive(p.per_day, "Plan.per_day");
      detail::require_positive(p.burst, "Plan.burst");
      for (const auto& existing : plans_) {
        if (existing->plan.name == p.name) detail::invalid("TierOptions.plans", "duplicate plan name '" + p.name + "'");
      }
      plans_.push_back(std::make_unique<PlanLimits>(p, options, factory_));
    }
    if (!options.default_plan.empty()) {
      const auto found = find(options.default_plan);
      if (!found) detail::invalid("TierOptions.default_plan", "no plan named '" + options.default_plan + "'");
      default_ = *found;
    }
  }

  /// The plan of `key`: from the cache, else from the resolver (then cached). Thread-safe.
  /// Throws `std::invalid_argument` ("key: ...") for a key longer than `TierOptions.memory.max_key_bytes`
  /// before any work: the resolver is not called and nothing is cached, so over-long keys cost neither
  /// lookups nor memory. Exceptions of the resolver propagate (nothing is cached then).
  PlanLimits& plan_for(std::string_view key) {
    detail::check_key_length(key, max_key_bytes_);
    const std::int64_t now = detail::now_ns(clock_);
    if (const auto hit = cache_.get(key, now)) return *plans_[*hit];
    const std::uint64_t erasures = cache_.erasures();  // an invalidate from now on voids this answer
    const std::optional<std::string> name = resolver_(key);
    std::size_t index = default_;
    if (name) {
      if (const auto found = find(*name)) index = *found;
    }
    cache_.put(key, index, now, erasures);
    return *plans_[index];
  }

  /// Appends `key`'s three plan layers (minute, day, burst) to `out`, for a check together with other
  /// layers. `key` must outlive the check. Thread-safe; throws as `plan_for`.
  void append_layers(std::string_view key, std::int64_t cost, std::vector<LayerRequest>& out) {
    PlanLimits& p = plan_for(key);
    out.push_back({&p.minute_layer, key, cost});
    out.push_back({&p.day_layer, key, cost});
    out.push_back({&p.burst_layer, key, cost});
  }

  /// Checks `key` against its plan alone. Thread-safe; throws as `plan_for` and `check_layers`.
  LayeredDecision allow(std::string_view key, std::int64_t cost = 1) {
    std::vector<LayerRequest> layers;
    append_layers(key, cost, layers);
    return check_layers(layers);
  }

  /// Forgets the cached plan of `key` (e.g. after an upgrade); a resolution under way meanwhile is used by
  /// its own call but not cached. Thread-safe.
  void invalidate(std::string_view key) { cache_.erase(key); }

  /// The number of plans, and each plan's limiters and layers (for counters and tests), in the order given.
  [[nodiscard]] std::size_t plan_count() const noexcept { return plans_.size(); }
  [[nodiscard]] PlanLimits& plan_at(std::size_t i) { return *plans_.at(i); }
  /// Keys whose plan is cached now.
  [[nodiscard]] std::size_t cached() const { return cache_.size(); }

 private:
  static std::size_t checked_entries(std::size_t n) {
    if (n < 1) detail::invalid("TierOptions.cache_entries", "must be >= 1");
    return n;
  }
  static std::int64_t checked_ttl(std::chrono::nanoseconds ttl) {
    if (ttl.count() <= 0) detail::invalid("TierOptions.cache_ttl", "must be > 0");
    return ttl.count();
  }
  std::optional<std::size_t> find(std::string_view name) const {
    for (std::size_t i = 0; i < plans_.size(); ++i) {
      if (plans_[i]->plan.name == name) return i;
    }
    return std::nullopt;
  }

  PlanResolver resolver_;
  Factory factory_;
  C clock_;
  std::size_t max_key_bytes_;
  detail::PlanCache cache_;
  std::vector<std::unique_ptr<PlanLimits>> plans_;
  std::size_t default_ = 0;
};

/// `BasicTieredLimiter` with in-memory limiters (`TierOptions::memory`) on clock `C`. Thread-safe.
/// Example:
///   // Plans: {name, per_minute, per_day, burst}; the resolver maps a key to its plan's name.
///   ratelimit::TieredLimiter<> tiers(
///       ratelimit::TierOptions{.plans = {{"free", 30, 1'000, 10}, {"pro", 300, 50'000, 50}}},
///       [](std::string_view api_key) -> std::optional<std::string> {
///         if (api_key.starts_with("pro-")) return "pro";
///         return std::nullopt;  // the default plan, the first: free
///       });
///   if (!tiers.allow("pro-7f3a")) { /* 429: over the minute, the day or the burst of pro */ }
template <Clock C = std::chrono::steady_clock>
class TieredLimiter : public BasicTieredLimiter<MemoryLimiterFactory<C>, C> {
 public:
  /// Throws as `BasicTieredLimiter`.
  TieredLimiter(TierOptions options, PlanResolver resolver, C clock = {})
      : BasicTieredLimiter<MemoryLimiterFactory<C>, C>(options, std::move(resolver),
                                                       MemoryLimiterFactory<C>{options.memory, clock}, clock) {}
};

}  // namespace ratelimit
