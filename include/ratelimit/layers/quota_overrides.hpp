#pragma once

/// @file
/// `QuotaOverrides`: per-key quota overrides in one limiter. A user callback resolves a key to its own policy
/// (cached, like the plans of tiers); keys without one use the limiter's policy (include/ratelimit/layers/README.md
/// "Per-key quota overrides").

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/clock.hpp"
#include "ratelimit/decision.hpp"
#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/detail/entropy.hpp"
#include "ratelimit/detail/key_length.hpp"
#include "ratelimit/detail/siphash.hpp"
#include "ratelimit/layers/detail/plan_cache.hpp"
#include "ratelimit/layers/layer.hpp"
#include "ratelimit/policy/policy.hpp"

namespace ratelimit {

/// Returns the policy of `key`, or nothing for a key without override (it gets the limiter's policy). Called
/// outside every lock, possibly from several threads at once; may be slow (it is cached). What it throws reaches
/// the caller of the check, which then consumes nothing (and nothing is cached).
template <Policy P>
using OverrideResolver = std::function<std::optional<P>(std::string_view key)>;

/// Options of `QuotaOverrides`; a plain aggregate, every member has a default.
struct OverrideOptions {
  /// Keys whose resolution (an override or none) is cached at once; >= 1. Least recently used first out.
  std::size_t max_cached_keys = 10'000;
  /// How long a resolution is trusted: a changed override takes effect within it (or at `invalidate`); > 0.
  std::chrono::nanoseconds cache_ttl = std::chrono::minutes(1);
};

/// A limiter whose calls can name another policy of its kind: `OverridableMemoryLimiter` and, named,
/// `redis::RedisLimiter`. `prepare` validates a policy once; the calls taking it convert a key's usage.
template <class L>
concept OverridableLimiter = RefundableLimiter<L> &&
    requires(L& l, const L& cl, typename L::policy_type policy, std::string_view key, std::int64_t cost,
             const typename L::PreparedPolicy& prepared) {
  { cl.prepare(policy) } -> std::same_as<std::shared_ptr<const typename L::PreparedPolicy>>;
  { l.check(key, cost) } -> std::same_as<CheckResult>;
  { l.check(key, cost, prepared) } -> std::same_as<CheckResult>;
  { l.peek(key, prepared) } -> std::same_as<Decision>;
  { l.refund(key, cost, prepared) } -> std::same_as<Decision>;
  { l.options().max_key_bytes } -> std::convertible_to<std::size_t>;
  detail::now_ns(l.clock());
};

/// Per-key quota overrides over one limiter `L` (borrowed: it must outlive this). Each call resolves its key
/// through the resolver, cached (`OverrideOptions`: bounded LRU with a TTL, on the limiter's clock); a key with
/// an override is checked under it, a key without under the limiter's policy (so `set_policy` on the limiter
/// changes those keys and never a key's override). Usage is kept in units when a key's policy changes (an
/// override appears, changes or goes, or `set_policy` changes the limiter's): the key's state is converted
/// with the formulas of include/ratelimit/README.md "Changing a policy at run time" on its next call, at that call's
/// time. Decisions (`limit`, `remaining`, ...) are the key's own policy's, so header fields follow the override.
///
/// A `RefundableLimiter` with `policy()` (the limiter's), `clock()` and `options()`: a `LimiterLayer` over it
/// takes part in `check_layers` by consume-then-refund (include/ratelimit/layers/README.md "Layered limits, all or
/// nothing"), advertising the limiter's policy in `RateLimit-Policy`. Thread-safe; the resolver runs outside every
/// lock, and the cache is split into independently locked shards by key.
/// Example:
///   ratelimit::OverridableMemoryLimiter<ratelimit::Gcra> limiter(
///       ratelimit::Gcra{.limit = 100, .period = std::chrono::minutes(1), .burst = 10});
///   const ratelimit::Gcra partner{.limit = 10'000, .period = std::chrono::minutes(1), .burst = 500};
///   ratelimit::QuotaOverrides overrides(limiter, [partner](std::string_view key) -> std::optional<ratelimit::Gcra> {
///     if (key == "partner:big") return partner;  // e.g. read from a table of contracts
///     return std::nullopt;                       // every other key: the limiter's 100 per minute
///   });
///   if (!overrides.allow("partner:big")) { /* answer 429 */ }
template <OverridableLimiter L>
class QuotaOverrides {
 public:
  using policy_type = typename L::policy_type;
  using clock_type = typename L::clock_type;
  using PreparedPolicy = typename L::PreparedPolicy;

  /// Throws `std::invalid_argument` naming `resolver` (empty), `OverrideOptions.max_cached_keys` or
  /// `OverrideOptions.cache_ttl`, or what `limiter.prepare` throws for the limiter's own policy (on Redis
  /// `LimiterOptions.name` for an unnamed limiter: found here, not at the first override).
  QuotaOverrides(L& limiter, OverrideResolver<policy_type> resolver, OverrideOptions options = {})
      : limiter_(limiter), resolver_(std::move(resolver)), max_key_bytes_(limiter.options().max_key_bytes) {
    detail::fill_with_entropy(hash_key_, 2);
    if (!resolver_) detail::invalid("resolver", "must be callable");
    if (options.max_cached_keys < 1) detail::invalid("OverrideOptions.max_cached_keys", "must be >= 1");
    if (options.cache_ttl.count() <= 0) detail::invalid("OverrideOptions.cache_ttl", "must be > 0");
    (void)limiter_.prepare(limiter_.policy());  // the limiter accepts per-call policies at all
    // Shards share the bound exactly: their capacities add up to max_cached_keys.
    const std::size_t n = options.max_cached_keys < kShards ? options.max_cached_keys : kShards;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t capacity = options.max_cached_keys / n + (i < options.max_cached_keys % n ? 1 : 0);
      shards_.push_back(std::make_unique<Cache>(capacity, options.cache_ttl.count()));
    }
  }

  /// Checks `cost` units for `key` under its policy and consumes them if admitted. Thread-safe. Throws
  /// `std::invalid_argument` for a negative cost or a key longer than the limiter's `max_key_bytes` (before the
  /// resolver runs or anything is cached), or naming the field of a bad override (e.g. `Gcra.burst`; nothing is
  /// cached, so the resolver is asked again next time); what the resolver throws; what the limiter throws.
  /// Nothing is consumed when it throws.
  CheckResult check(std::string_view key, std::int64_t cost = 1) {
    detail::require_cost(cost);
    const auto o = resolve(key);
    return o ? limiter_.check(key, cost, *o) : limiter_.check(key, cost);
  }
  /// As `check`, the decision only.
  Decision allow(std::string_view key, std::int64_t cost = 1) { return check(key, cost).decision; }
  /// What a cost-1 request of `key` would see under its policy, consuming nothing. Thread-safe. Throws as `check`.
  Decision peek(std::string_view key) {
    const auto o = resolve(key);
    return o ? limiter_.peek(key, *o) : limiter_.peek(key);
  }
  /// Gives back up to `cost` units `key` consumed, under its policy. Thread-safe. Throws as `check`.
  Decision refund(std::string_view key, std::int64_t cost) {
    detail::require_cost(cost);
    const auto o = resolve(key);
    return o ? limiter_.refund(key, cost, *o) : limiter_.refund(key, cost);
  }
  /// Makes `key`'s state what charging `actual` instead of `charged` would have made it, under its policy (the
  /// limiter's `settle`, include/ratelimit/README.md "Settling after the response"), with at most `max_debt` units
  /// owed beyond the limit (by default no bound beyond exact arithmetic). For a limiter that settles under a
  /// named policy. Thread-safe. Throws `std::invalid_argument` naming `charged`, `actual` or `max_debt`, or as
  /// `check`.
  Decision settle(std::string_view key, std::int64_t charged, std::int64_t actual,
                  std::int64_t max_debt = detail::kInt64Max) requires
      requires(L& l, std::string_view k, std::int64_t n, const PreparedPolicy& prepared) {
    { l.settle(k, n, n, n, prepared) } -> std::same_as<Decision>;
    { l.settle(k, n, n, n) } -> std::same_as<Decision>;
  }
  {
    detail::require_settle(charged, actual, max_debt);
    const auto o = resolve(key);
    return o ? limiter_.settle(key, charged, actual, max_debt, *o) : limiter_.settle(key, charged, actual, max_debt);
  }
  /// Forgets the key's state (the limiter's `reset`); its cached resolution stays. Thread-safe.
  decltype(auto) reset(std::string_view key) { return limiter_.reset(key); }

  /// The override of `key` (from the cache, else from the resolver), or nothing when it has none.
  /// Thread-safe. Throws as `check`.
  [[nodiscard]] std::optional<policy_type> override_for(std::string_view key) {
    const auto o = resolve(key);
    if (!o) return std::nullopt;
    return o->policy();
  }
  /// Forgets the cached resolution of `key`: its next call asks the resolver. A resolution under way meanwhile
  /// (which may have read the old answer) is used by its own call but not cached. Thread-safe.
  void invalidate(std::string_view key) { shard_of(key).erase(key); }
  /// Keys whose resolution is cached now (at most `max_cached_keys`). Thread-safe (a snapshot).
  [[nodiscard]] std::size_t cached() const {
    std::size_t n = 0;
    for (const auto& s : shards_) n += s->size();
    return n;
  }

  /// The limiter's policy (of keys without override), its generation, options and clock (for `LimiterLayer`).
  [[nodiscard]] decltype(auto) policy() const { return limiter_.policy(); }
  [[nodiscard]] std::uint64_t policy_generation() const noexcept requires requires(const L& l) {
    l.policy_generation();
  }
  { return limiter_.policy_generation(); }
  [[nodiscard]] decltype(auto) options() const noexcept { return limiter_.options(); }
  [[nodiscard]] decltype(auto) clock() noexcept { return limiter_.clock(); }
  /// The limiter.
  [[nodiscard]] L& limiter() noexcept { return limiter_; }

 private:
  using Prepared = std::shared_ptr<const PreparedPolicy>;  // null: no override
  using Cache = detail::BasicPlanCache<Prepared>;
  static constexpr std::size_t kShards = 16;

  Cache& shard_of(std::string_view key) const {
    // A keyed hash: senders of keys cannot aim them all at one shard's lock.
    return *shards_[detail::siphash<1, 3>(hash_key_[0], hash_key_[1], key) % shards_.size()];
  }

  Prepared resolve(std::string_view key) {
    detail::check_key_length(key, max_key_bytes_);
    Cache& cache = shard_of(key);
    const std::int64_t now = detail::now_ns(limiter_.clock());
    if (auto hit = cache.get(key, now)) return std::move(*hit);
    const std::uint64_t erasures = cache.erasures();  // an invalidate from now on voids this answer
    std::optional<policy_type> p = resolver_(key);    // outside every lock; may throw (nothing cached)
    Prepared prepared = p ? limiter_.prepare(std::move(*p)) : nullptr;
    cache.put(key, prepared, now, erasures);
    return prepared;
  }

  L& limiter_;
  OverrideResolver<policy_type> resolver_;
  std::size_t max_key_bytes_;
  std::uint64_t hash_key_[2] = {};
  std::vector<std::unique_ptr<Cache>> shards_;
};

}  // namespace ratelimit
