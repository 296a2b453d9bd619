#pragma once

/// @file
/// `Layer`: a named limiter taking part in layered checks, with its counters, penalty, lists and
/// `on_limited` callback; `LimiterLayer<L>` adapts any limiter (in-memory ones support atomic checks).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "ratelimit/clock.hpp"
#include "ratelimit/decision.hpp"
#include "ratelimit/joint_backend.hpp"
#include "ratelimit/layers/key_lists.hpp"
#include "ratelimit/layers/layer_stats.hpp"
#include "ratelimit/layers/penalty_box.hpp"
#include "ratelimit/limiter.hpp"
#include "ratelimit/quota_policy.hpp"

namespace ratelimit {

/// Why a layer's outcome in a layered check is what it is.
enum class Verdict {
  /// The layer admitted the request and, every layer admitting, kept the consumption.
  admitted,
  /// The layer admitted the request but another layer denied it: the consumption was given back.
  rolled_back,
  /// The layer denied the request: over its quota.
  limited,
  /// The layer denied the request from memory: the key is in a penalty (block-after-exceed).
  penalized,
  /// The layer denied the request: the key is on its deny list.
  deny_listed,
  /// The key is on the layer's allow list: not checked, not counted.
  allow_listed,
  /// Not checked: the request was already denied from memory (penalty or deny list) or, on a
  /// backend without atomic multi-key checks, by an earlier layer.
  unchecked,
};

/// True for the verdicts that deny the request.
[[nodiscard]] constexpr bool denies(Verdict v) noexcept {
  return v == Verdict::limited || v == Verdict::penalized || v == Verdict::deny_listed;
}

/// What `on_limited` receives when a layer denies a request.
struct LimitedEvent {
  /// The layer's policy name.
  std::string_view layer;
  /// The key the layer denied.
  std::string_view key;
  /// The layer's decision.
  const Decision& decision;
  /// `limited`, `penalized` or `deny_listed`.
  Verdict verdict;
  /// True for a would-be denial of a layer in shadow mode: the request was not denied by it.
  bool shadow = false;
};

/// Options of a layer; every field has a working default (no penalty, no callback). A plain aggregate; the
/// layer validates it (`std::invalid_argument` naming `LayerOptions.penalty`).
/// Example:
///   // Try a stricter limit in production: it decides and counts, but denies nobody yet.
///   ratelimit::MemoryLimiter<ratelimit::Gcra> strict(
///       ratelimit::Gcra{.limit = 5, .period = std::chrono::seconds(1), .burst = 5});
///   ratelimit::LimiterLayer trial(strict, "strict-trial", ratelimit::LayerOptions{.shadow = true});
///   const ratelimit::LayeredDecision d = ratelimit::check_layers({{&trial, "client-42"}});
///   if (!d.shadow_denials().empty()) { /* would have been denied: log it */ }
///   trial.set_shadow(false);  // enforce from the next check on
struct LayerOptions {
  /// Block-after-exceed: a key this layer denies for its quota is then denied for this long, from
  /// memory, without a backend check. 0 (default) turns it off; otherwise > 0, any length up to
  /// `nanoseconds::max()`: a penalty ends at the latest at INT64_MAX ns on the layer's clock (saturating),
  /// and the header fields saturate there too.
  std::chrono::nanoseconds penalty{0};
  /// Most keys in a penalty at once (see `PenaltyBox`); >= 1.
  std::size_t penalty_max_keys = 100'000;
  /// Called after every denial by this layer, outside every lock, on the calling thread; must be
  /// thread-safe and should be quick. Exceptions it throws reach the caller of `check_layers`.
  std::function<void(const LimitedEvent&)> on_limited{};
  /// Shadow (dry-run) mode: the layer decides and keeps state exactly as if it enforced, but its
  /// denials do not deny the request; they are counted as `shadow_denied` and reported to `on_limited`
  /// with `shadow = true` (include/ratelimit/layers/README.md "Shadow mode"). Changeable at run time with
  /// `Layer::set_shadow`.
  bool shadow = false;
  /// In shadow mode, whether the layer's entry appears in the header fields (`policy_decisions()`),
  /// as an admitting entry with the layer's would-be `remaining` and `reset_after`. Default: no, a
  /// shadow layer changes nothing the client sees.
  bool shadow_headers = false;
};

/// A named limiter in a layered check (`check_layers`). Abstract: the backend hooks are implemented
/// by `LimiterLayer<L>`. Thread-safe: any number of checks may use one layer at once.
class Layer {
 public:
  /// `max_key_bytes`: the longest key the layer's limiter accepts (its penalty box accepts the same).
  /// Throws `std::invalid_argument` naming `LayerOptions.penalty` when it is negative, or
  /// `PenaltyBox.max_keys`.
  Layer(QuotaPolicy quota, LayerOptions options, std::size_t max_key_bytes = 512)
      : quotas_{std::move(quota)},
        first_quota_(&quotas_.front()),
        quota_(first_quota_),
        options_(std::move(options)),
        penalties_(options_.penalty_max_keys, max_key_bytes),
        shadow_(options_.shadow) {
    if (options_.penalty.count() < 0) detail::invalid("LayerOptions.penalty", "must be >= 0");
  }
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;
  virtual ~Layer() = default;

  /// The policy name (for headers, problem bodies, counters).
  [[nodiscard]] std::string_view name() const noexcept { return first_quota_->name; }
  /// The advertised quota of the layer's policy now: a `LimiterLayer` follows its limiter's
  /// `set_policy` (include/ratelimit/README.md "Changing a policy at run time"). The reference stays valid, and its
  /// value unchanged, as long as the layer lives (each distinct quota is kept once), so `PolicyDecision`s made from it
  /// stay valid too. Thread-safe; a relaxed load when nothing changed. Throws `std::bad_alloc` only on the first call
  /// after a change to a quota not advertised before.
  [[nodiscard]] const QuotaPolicy& quota() const {
    sync_quota();
    return *quota_.load(std::memory_order_acquire);
  }
  /// The options as given. Thread-safe (immutable).
  [[nodiscard]] const LayerOptions& options() const noexcept { return options_; }
  /// Live counters. Thread-safe.
  [[nodiscard]] LayerStats& stats() noexcept { return stats_; }
  [[nodiscard]] const LayerStats& stats() const noexcept { return stats_; }
  /// The allow and deny lists. Thread-safe.
  [[nodiscard]] KeyLists& lists() noexcept { return lists_; }
  /// The keys in a penalty. Thread-safe.
  [[nodiscard]] PenaltyBox& penalties() noexcept { return penalties_; }
  /// True while the layer is in shadow mode (starts as `LayerOptions::shadow`). Thread-safe.
  [[nodiscard]] bool shadow() const noexcept { return shadow_.load(std::memory_order_relaxed); }
  /// Switches shadow mode on or off for the checks that start afterwards (a check already running
  /// keeps the mode it read). The layer's state is the same either way, so switching loses nothing.
  /// Thread-safe.
  void set_shadow(bool on) noexcept { shadow_.store(on, std::memory_order_relaxed); }

  // Backend hooks, used by `check_layers`, `refund_layers` and `settle_layers`.

  /// Nanoseconds since the epoch of the layer's clock (penalties run on it).
  [[nodiscard]] virtual std::int64_t now_ns() = 0;
  /// The backend able to check this layer together with others in one atomic step (see
  /// `JointBackend`: a `MemoryLimiter` or a `RedisLimiter`), or null. Layers whose backends share a
  /// `joint_domain()` are checked by one `check_jointly` call instead of consume-then-refund.
  [[nodiscard]] virtual JointBackend* joint() noexcept { return nullptr; }
  /// The backend's own check of `cost` for `key` (its `check`, else `allow`), saying whether the
  /// backend's failure policy answered; counts a backend error and rethrows when it throws.
  virtual CheckResult backend_allow(std::string_view key, std::int64_t cost) = 0;
  /// The backend's own `refund(key, cost)`; counts a backend error and rethrows when it throws.
  virtual Decision backend_refund(std::string_view key, std::int64_t cost) = 0;
  /// True when `backend_settle` can debit (its limiter has `settle`); false by default.
  [[nodiscard]] virtual bool can_settle() const noexcept { return false; }
  /// The backend's own `settle(key, charged, actual, max_debt)` (include/ratelimit/README.md "Settling after the
  /// response"); counts a backend error and rethrows when it throws. By default (a layer whose backend cannot
  /// debit) a settle at or below the charge is the refund it is, `backend_refund(key, charged - actual)`, and one
  /// above it throws `std::logic_error`: the debt cannot be recorded, and admitting it silently would lie.
  virtual Decision backend_settle(std::string_view key, std::int64_t charged, std::int64_t actual,
                                  std::int64_t max_debt) {
    (void)max_debt;
    if (actual > charged) throw std::logic_error("settle: not supported by this layer (its limiter has no settle)");
    return backend_refund(key, charged - actual);
  }
  /// What holds this layer's key states (a `LimiterLayer`'s limiter; by default the layer itself): two
  /// layers with one holder share the state of each key.
  [[nodiscard]] virtual const void* state_holder() const noexcept { return this; }

 protected:
  /// Called by `quota()`: a layer whose limiter's policy can change calls `advertise` when it did.
  virtual void sync_quota() const {}
  /// Advertises `quota` (its name is ignored: a layer keeps its name) from now on. Thread-safe.
  void advertise(const QuotaPolicy& quota) const {
    std::lock_guard guard(quotas_mutex_);
    const QuotaPolicy* now = quota_.load(std::memory_order_relaxed);
    if (now->quota == quota.quota && now->window == quota.window) return;
    for (const QuotaPolicy& q : quotas_) {
      if (q.quota == quota.quota && q.window == quota.window) {
        quota_.store(&q, std::memory_order_release);
        return;
      }
    }
    quota_.store(&quotas_.emplace_back(QuotaPolicy{quotas_.front().name, quota.quota, quota.window}),
                 std::memory_order_release);
  }

 private:
  mutable std::mutex quotas_mutex_;                // guards appending to quotas_
  mutable std::deque<QuotaPolicy> quotas_;         // every quota advertised so far (a deque: references stay)
  const QuotaPolicy* first_quota_;                 // the name's; elements never move (read without the lock)
  mutable std::atomic<const QuotaPolicy*> quota_;  // the one advertised now
  LayerOptions options_;
  LayerStats stats_;
  KeyLists lists_;
  PenaltyBox penalties_;
  std::atomic<bool> shadow_;
};

/// A limiter that can give quota back.
template <class L>
concept RefundableLimiter = Limiter<L> && requires(L& l, std::string_view key, std::int64_t cost) {
  { l.refund(key, cost) } -> std::same_as<Decision>;
};

/// Adapts a limiter `L` (borrowed: it must outlive the layer) into a `Layer`. `L` needs `refund`, a
/// `policy()` (for the advertised quota) and a `clock()`; a `JointBackend` (`MemoryLimiter`: shard
/// locks; `RedisLimiter`: one script) also gives atomic layered checks. Thread-safe as `Layer`.
/// Example:
///   ratelimit::MemoryLimiter<ratelimit::FixedWindow> logins(
///       ratelimit::FixedWindow{.limit = 5, .window = std::chrono::minutes(1)});
///   // After a denial the key stays blocked for 15 minutes, answered from memory.
///   ratelimit::LimiterLayer layer(logins, "login", ratelimit::LayerOptions{
///       .penalty = std::chrono::minutes(15),
///       .on_limited = [](const ratelimit::LimitedEvent&) { /* log the layer and the key */ }});
///   if (!ratelimit::check_layers({{&layer, "alice"}})) { /* answer 429 */ }
template <RefundableLimiter L>
class LimiterLayer final : public Layer {
 public:
  /// A layer named `name` (any string; header fields need printable ASCII when they write it),
  /// advertising `quota_policy(name, limiter.policy())`, and again after each `set_policy` of a limiter
  /// that has `policy_generation()`. Throws `std::invalid_argument` for bad options.
  LimiterLayer(L& limiter, std::string name, LayerOptions options = {})
      : Layer(quota_policy(std::move(name), limiter.policy()), std::move(options), max_key_bytes_of(limiter)),
        limiter_(limiter),
        seen_generation_(generation_of(limiter)) {}

  /// The adapted limiter.
  [[nodiscard]] L& limiter() noexcept { return limiter_; }

  [[nodiscard]] std::int64_t now_ns() override { return detail::now_ns(limiter_.clock()); }

  [[nodiscard]] JointBackend* joint() noexcept override {
    if constexpr (std::is_base_of_v<JointBackend, L>) {
      return &limiter_;
    } else {
      return nullptr;
    }
  }
  CheckResult backend_allow(std::string_view key, std::int64_t cost) override {
    return counting_errors([&] {
      if constexpr (requires {
                      { limiter_.check(key, cost) } -> std::same_as<CheckResult>;
                    }) {
        return limiter_.check(key, cost);
      } else {
        return CheckResult{limiter_.allow(key, cost), Outcome::decided};  // a backend that cannot fail
      }
    });
  }
  Decision backend_refund(std::string_view key, std::int64_t cost) override {
    return counting_errors([&] { return limiter_.refund(key, cost); });
  }
  [[nodiscard]] bool can_settle() const noexcept override { return kSettles; }
  Decision backend_settle(std::string_view key, std::int64_t charged, std::int64_t actual,
                          std::int64_t max_debt) override {
    if constexpr (kSettles) {
      return counting_errors([&] { return limiter_.settle(key, charged, actual, max_debt); });
    } else {
      return Layer::backend_settle(key, charged, actual, max_debt);
    }
  }
  [[nodiscard]] const void* state_holder() const noexcept override { return &limiter_; }

 private:
  template <class Fn>
  auto counting_errors(Fn fn) -> decltype(fn()) {
    try {
      return fn();
    } catch (const std::invalid_argument&) {
      throw;  // the caller's mistake, not the backend's
    } catch (...) {
      stats().add_backend_error();
      throw;
    }
  }

  /// The limiter's key bound, for its penalty box (512, the limiters' default, if it has none).
  static std::size_t max_key_bytes_of(L& limiter) {
    if constexpr (requires { limiter.options().max_key_bytes; }) {
      return limiter.options().max_key_bytes;
    } else {
      return 512;
    }
  }

  void sync_quota() const override {
    if constexpr (requires { limiter_.policy_generation(); }) {
      if (limiter_.policy_generation() == seen_generation_.load(std::memory_order_relaxed)) return;
      std::lock_guard guard(sync_mutex_);  // one refresh at a time: a stale policy never wins
      const std::uint64_t g = limiter_.policy_generation();
      if (g == seen_generation_.load(std::memory_order_relaxed)) return;
      // The generation is bumped after the policy is replaced: the policy read now is g's or newer.
      advertise(quota_policy(std::string(name()), limiter_.policy()));
      seen_generation_.store(g, std::memory_order_relaxed);
    }
  }
  static std::uint64_t generation_of(L& limiter) {
    if constexpr (requires { limiter.policy_generation(); }) {
      return limiter.policy_generation();
    } else {
      return 0;
    }
  }

  static constexpr bool kSettles = requires(L & l, std::string_view key, std::int64_t n) {
    { l.settle(key, n, n, n) } -> std::same_as<Decision>;
  };

  L& limiter_;
  mutable std::mutex sync_mutex_;
  mutable std::atomic<std::uint64_t> seen_generation_;  // the limiter's generation quota() advertises
};

}  // namespace ratelimit
