#pragma once

/// @file
/// All-or-nothing checks over several layers (limiter, key, cost): a request passes only if every
/// layer admits it, and when any layer denies, no layer keeps a consumption.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory_resource>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/decision.hpp"
#include "ratelimit/detail/stack_arena.hpp"
#include "ratelimit/joint_backend.hpp"
#include "ratelimit/layers/layer.hpp"
#include "ratelimit/memory/joint_check.hpp"
#include "ratelimit/most_restrictive.hpp"
#include "ratelimit/policy/policy.hpp"
#include "ratelimit/quota_policy.hpp"

namespace ratelimit {

/// One layer of a request: which layer, for which key, at what cost.
struct LayerRequest {
  /// The layer; must outlive the check.
  Layer* layer = nullptr;
  /// The key in that layer (e.g. the client IP, the API key, "ip:path"); must outlive the check.
  std::string_view key{};
  /// Cost units; >= 0.
  std::int64_t cost = 1;
};

/// What one layer said about a request.
struct LayerOutcome {
  Layer* layer = nullptr;
  Verdict verdict = Verdict::unchecked;
  /// The layer's decision. For `rolled_back`, the key's state after the give-back (`allowed`, current
  /// `remaining`); for `penalized`, `remaining = 0` and `retry_after = reset_after =` the rest of the
  /// penalty (and for a `limited` one that started a penalty, its waits are at least the penalty's); for
  /// `deny_listed`, `retry_after = Decision::never`; meaningless for `allow_listed` and
  /// `unchecked` (they appear in no header).
  Decision decision{};
  /// True when the backend failed and `decision` is its failure policy's answer (`fail_open` admits,
  /// `fail_closed` denies), not a quota decision: no penalty follows such a denial, and the layer
  /// counts a backend error.
  bool backend_failed = false;
  /// True when the layer ran in shadow mode for this check (include/ratelimit/layers/README.md "Shadow mode"): its
  /// denying verdict
  /// (`limited`, `penalized`, `deny_listed`) is a would-be denial that did not deny the request.
  bool shadow = false;

  /// True when this outcome denied the request (a denying verdict, not in shadow mode).
  [[nodiscard]] bool denied() const noexcept { return denies(verdict) && !shadow; }
  /// True when this outcome is a shadow layer's would-be denial.
  [[nodiscard]] bool shadow_denied() const noexcept { return denies(verdict) && shadow; }
  /// True when this outcome holds a consumption of its key: admitted by the backend's own decision. A
  /// failure policy's admission (`backend_failed`) consumed nothing there, so neither a rollback nor
  /// `refund_layers(requests, passed)` gives anything back for it: a refund that reached the recovered
  /// backend would admit one request too many (include/ratelimit/layers/README.md "Layered limits, all or nothing").
  [[nodiscard]] bool consumed() const noexcept { return verdict == Verdict::admitted && !backend_failed; }
  /// True when the outcome appears in header fields: checked (not allow-listed, not unchecked), and not
  /// in shadow mode unless its layer has `LayerOptions::shadow_headers`.
  [[nodiscard]] bool in_headers() const noexcept {
    return verdict != Verdict::allow_listed && verdict != Verdict::unchecked &&
           (!shadow || (layer != nullptr && layer->options().shadow_headers));
  }
  /// The decision as header fields show it: `decision`, except that a shadow layer's entry admits
  /// (`allowed`, `retry_after` 0) with its would-be `remaining` and `reset_after`: the request passed.
  [[nodiscard]] Decision header_decision() const noexcept {
    if (!shadow) return decision;
    Decision d = decision;
    d.allowed = true;
    d.retry_after = std::chrono::nanoseconds::zero();
    return d;
  }
};

/// Options of one layered check.
/// Example:
///   // Dry-run a whole set of layers for one request: each decides and counts, nobody is denied.
///   ratelimit::MemoryLimiter<ratelimit::Gcra> per_ip(
///       ratelimit::Gcra{.limit = 10, .period = std::chrono::seconds(1), .burst = 10});
///   ratelimit::LimiterLayer layer(per_ip, "ip");
///   const auto d = ratelimit::check_layers({{&layer, "203.0.113.7"}}, ratelimit::CheckOptions{.shadow = true});
///   for (const std::string& name : d.shadow_denials()) std::fprintf(stderr, "%s would deny\n", name.c_str());
struct CheckOptions {
  /// Every layer of this check in shadow mode, whatever its own setting (include/ratelimit/layers/README.md "Shadow
  /// mode"): the request always passes, and each layer decides and keeps state as if it enforced alone.
  bool shadow = false;
};

/// The answer of a layered check.
struct LayeredDecision {
  /// The most restrictive of the header entries' decisions (`most_restrictive` over `header_decision()`
  /// of the outcomes `in_headers()`); `allowed` iff every enforcing layer admitted. With no such entry
  /// (all allow-listed, or only shadow layers without headers): allowed, `limit = 0`.
  Decision decision{.allowed = true};
  /// The index (in the request's layers) of the layer whose decision is `decision`, if any.
  std::optional<std::size_t> reported_by{};
  /// One outcome per requested layer, in order.
  std::vector<LayerOutcome> layers{};

  explicit operator bool() const noexcept { return decision.allowed; }

  /// True when `verdict` of layer `i` appears in headers (checked, not skipped); shadow layers also
  /// need `LayerOptions::shadow_headers` (see `LayerOutcome::in_headers`).
  [[nodiscard]] static bool reported(Verdict v) noexcept {
    return v != Verdict::allow_listed && v != Verdict::unchecked;
  }
  /// The (policy, decision) entries for `http::rate_limit_fields`: the outcomes `in_headers()`, in
  /// order, each with its `header_decision()`.
  [[nodiscard]] std::vector<PolicyDecision> policy_decisions() const {
    std::vector<PolicyDecision> out;
    for (const LayerOutcome& o : layers) {
      if (o.in_headers()) out.push_back({&o.layer->quota(), o.header_decision()});
    }
    return out;
  }
  /// The names of the denying layers, for the problem body's `violated-policies` (shadow layers never).
  [[nodiscard]] std::vector<std::string> violated_policies() const {
    std::vector<std::string> out;
    for (const LayerOutcome& o : layers) {
      if (o.denied()) out.emplace_back(o.layer->name());
    }
    return out;
  }
  /// The names of the shadow layers that would have denied the request.
  [[nodiscard]] std::vector<std::string> shadow_denials() const {
    std::vector<std::string> out;
    for (const LayerOutcome& o : layers) {
      if (o.shadow_denied()) out.emplace_back(o.layer->name());
    }
    return out;
  }
};

namespace detail {

inline Decision listed_denial(const Layer& layer) {
  return Decision{.allowed = false, .limit = layer.quota().quota, .remaining = 0, .retry_after = Decision::never};
}

inline Decision penalty_denial(const Layer& layer, std::int64_t left_ns) {
  const std::chrono::nanoseconds left(left_ns);
  return Decision{
      .allowed = false, .limit = layer.quota().quota, .remaining = 0, .retry_after = left, .reset_after = left};
}

/// The denial that starts (or extends) a penalty says the penalty's wait when it is longer than the
/// quota's: a client obeying the first 429 must not be denied again for it (include/ratelimit/layers/README.md
/// "Penalties and lists").
inline void carry_penalty(Decision& d, std::int64_t left_ns) {
  const std::chrono::nanoseconds left(left_ns);
  d.retry_after = std::max(d.retry_after, left);
  d.reset_after = std::max(d.reset_after, left);
}

/// Step 2 of `check_layers` when every active layer (verdict `unchecked`) has a `JointBackend` of one
/// `joint_domain()` and there are at least two: one `check_jointly` call. Sets the active layers'
/// outcomes and `denied`, and returns true; returns false (outcomes untouched) when there is no such
/// backend or it declines, for the layer-by-layer path. A backend exception counts a backend error on
/// every active layer and propagates (nothing to give back: the step is all or nothing).
inline bool check_jointly(std::span<const LayerRequest> requests, std::vector<LayerOutcome>& outcomes,
                          std::span<const char> skipped, bool& denied) {
  StackArena arena;
  std::pmr::vector<JointRequest> joint(&arena.resource);
  std::pmr::vector<std::size_t> index(&arena.resource);
  joint.reserve(requests.size());
  index.reserve(requests.size());
  const void* domain = nullptr;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (outcomes[i].verdict != Verdict::unchecked || skipped[i]) continue;
    JointBackend* backend = requests[i].layer->joint();
    if (backend == nullptr || backend->joint_domain() == nullptr) return false;
    if (joint.empty()) domain = backend->joint_domain();
    if (backend->joint_domain() != domain) return false;
    joint.push_back(JointRequest{backend, requests[i].key, requests[i].cost, outcomes[i].shadow});
    index.push_back(i);
  }
  if (joint.size() < 2) return false;
  std::pmr::vector<CheckResult> results(joint.size(), &arena.resource);
  bool ran = false;
  try {
    ran = joint.front().backend->check_jointly(joint, results);
  } catch (const std::invalid_argument&) {
    throw;  // the caller's mistake, not the backend's
  } catch (...) {
    for (const std::size_t i : index) requests[i].layer->stats().add_backend_error();
    throw;
  }
  if (!ran) return false;
  bool all = true;  // every enforcing layer admitted
  for (std::size_t k = 0; k < joint.size(); ++k) all = all && (results[k].decision.allowed || joint[k].shadow);
  for (std::size_t k = 0; k < joint.size(); ++k) {
    LayerOutcome& o = outcomes[index[k]];
    const Decision& d = results[k].decision;
    o.verdict = !d.allowed ? Verdict::limited : (all ? Verdict::admitted : Verdict::rolled_back);
    o.decision = o.verdict == Verdict::rolled_back ? given_back(d) : d;
    o.backend_failed = results[k].failed();
  }
  denied = !all;
  return true;
}

/// Marks (in `skipped`) each active shadow layer that shares its state (`Layer::state_holder()` and key)
/// with an active enforcing layer of the check: its consumption would be the enforcing layer's too, and
/// change what the client sees, so it is not checked (include/ratelimit/layers/README.md "Shadow mode").
inline void skip_shadows_sharing_state(std::span<const LayerRequest> requests,
                                       const std::vector<LayerOutcome>& outcomes, std::span<char> skipped) {
  auto active = [&](std::size_t i) { return outcomes[i].verdict == Verdict::unchecked; };
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (!active(i) || !outcomes[i].shadow) continue;
    for (std::size_t j = 0; j < requests.size() && !skipped[i]; ++j) {
      skipped[i] = active(j) && !outcomes[j].shadow && requests[j].key == requests[i].key &&
                   requests[j].layer->state_holder() == requests[i].layer->state_holder();
    }
  }
}

}  // namespace detail

namespace detail {

// Lists and penalties, before any backend is asked: fills the outcomes of listed and penalized layers
// and says whether an enforcing one of them denies.
inline bool screen_layers(std::span<const LayerRequest> requests, const CheckOptions& options,
                          std::span<LayerOutcome> outcomes) {
  bool denied_early = false;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const LayerRequest& r = requests[i];
    if (r.layer == nullptr) detail::invalid("layer", "must not be null");
    detail::require_cost(r.cost);
    LayerOutcome& o = outcomes[i];
    o.layer = r.layer;
    o.shadow = options.shadow || r.layer->shadow();  // read once: the whole check runs in one mode
    switch (r.layer->lists().lookup(r.key)) {
      case Listing::denied:
        o.verdict = Verdict::deny_listed;
        o.decision = detail::listed_denial(*r.layer);
        denied_early = denied_early || !o.shadow;
        continue;
      case Listing::allowed:
        o.verdict = Verdict::allow_listed;
        o.decision = Decision{.allowed = true, .limit = r.layer->quota().quota, .remaining = r.layer->quota().quota};
        continue;
      case Listing::none: break;
    }
    if (r.layer->options().penalty.count() > 0) {
      if (const std::int64_t left = r.layer->penalties().blocked_for(r.key, r.layer->now_ns()); left > 0) {
        o.verdict = Verdict::penalized;
        o.decision = detail::penalty_denial(*r.layer, left);
        denied_early = denied_early || !o.shadow;
      }
    }
  }
  return denied_early;
}

// The layers `active` selects, one by one in order, until an enforcing one denies (`denied`); then every
// admitted layer is given back. Backend exceptions propagate after the give-back.
template <class Active>
void check_one_by_one(std::span<const LayerRequest> requests, std::span<LayerOutcome> outcomes, Active active,
                      bool& denied, std::pmr::memory_resource* memory) {
  std::pmr::vector<std::size_t> consumed(memory);
  consumed.reserve(requests.size());
  // Every admitted layer is given back even when one refund throws; the first refund error is kept.
  auto give_back = [&] {
    std::exception_ptr first_error;
    for (auto it = consumed.rbegin(); it != consumed.rend(); ++it) {
      const LayerRequest& r = requests[*it];
      LayerOutcome& o = outcomes[*it];
      if (!o.consumed()) {  // a failure policy's admission: nothing to give back
        o.decision = detail::given_back(o.decision);
        o.verdict = Verdict::rolled_back;
        continue;
      }
      try {
        o.decision = detail::given_back(r.layer->backend_refund(r.key, r.cost));
        o.verdict = Verdict::rolled_back;
      } catch (...) {
        if (!first_error) first_error = std::current_exception();
      }
    }
    return first_error;
  };
  try {
    for (std::size_t i = 0; i < requests.size() && !denied; ++i) {
      if (!active(i)) continue;
      const LayerRequest& r = requests[i];
      LayerOutcome& o = outcomes[i];
      const CheckResult checked = r.layer->backend_allow(r.key, r.cost);
      o.decision = checked.decision;
      o.backend_failed = checked.failed();
      o.verdict = o.decision.allowed ? Verdict::admitted : Verdict::limited;
      if (!o.decision.allowed && !o.shadow) denied = true;
      if (o.decision.allowed && r.cost > 0) consumed.push_back(i);
    }
  } catch (...) {
    (void)give_back();  // the error that stopped the check is the one to report
    throw;
  }
  if (denied) {
    if (const std::exception_ptr e = give_back()) std::rethrow_exception(e);
  }
}

// Penalties, counters and callbacks, outside every lock; the most restrictive reported decision.
inline void report_layers(std::span<const LayerRequest> requests, LayeredDecision& result,
                          std::pmr::memory_resource* memory) {
  std::pmr::vector<Decision> reported(memory);
  std::pmr::vector<std::size_t> index(memory);
  reported.reserve(requests.size());
  index.reserve(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const LayerRequest& r = requests[i];
    LayerOutcome& o = result.layers[i];
    if (o.backend_failed) r.layer->stats().add_backend_error();
    switch (o.verdict) {
      case Verdict::admitted: r.layer->stats().add_allowed(); break;
      case Verdict::rolled_back: r.layer->stats().add_rolled_back(); break;
      case Verdict::limited:
        // A penalty answers a key that exceeded its quota, not a backend that failed.
        if (r.layer->options().penalty.count() > 0 && o.decision.retry_after != Decision::never && !o.backend_failed) {
          const std::int64_t now = r.layer->now_ns();
          r.layer->penalties().block(r.key, now, r.layer->options().penalty.count());
          detail::carry_penalty(o.decision, r.layer->penalties().blocked_for(r.key, now));
        }
        [[fallthrough]];
      case Verdict::penalized:
      case Verdict::deny_listed:
        if (o.shadow) {
          r.layer->stats().add_shadow_denied();
        } else {
          r.layer->stats().add_denied();
        }
        if (r.layer->options().on_limited) {
          r.layer->options().on_limited(LimitedEvent{r.layer->name(), r.key, o.decision, o.verdict, o.shadow});
        }
        break;
      case Verdict::allow_listed:
      case Verdict::unchecked: break;
    }
    if (o.in_headers()) {
      reported.push_back(o.header_decision());
      index.push_back(i);
    }
  }
  if (!reported.empty()) {
    const std::size_t best = most_restrictive(reported);
    result.decision = reported[best];
    result.reported_by = index[best];
  }
}

}  // namespace detail

/// Checks a request against every layer in `requests`, all or nothing.
///
/// 1. From memory, without touching any backend: a key on a layer's deny list is denied
///    (`deny_listed`), a key in a layer's penalty is denied (`penalized`); a key on a layer's allow
///    list skips that layer (`allow_listed`). If any is denied, no backend is checked.
/// 2. If every remaining layer (at least two) has a `JointBackend` of one `joint_domain()`: one atomic
///    `check_jointly` evaluates every layer and keeps the consumptions only if all admit. In memory
///    (any `MemoryLimiter`s) the shard locks of all keys are taken in one global order, every layer
///    consumes, and on a denial every consumption is given back under the same locks; on Redis (layers
///    on one server's pool, or on Redis Cluster one router with every key in one slot) it is one Lua
///    script over all keys. No other check sees a partial state, and no layer's count ever holds a
///    request that another layer denied. Redis failures: each layer's `on_error` applies as for its
///    single checks; if any layer's is `raise`, `BackendError` propagates (counted as a backend error
///    on every remaining layer); otherwise `fail_open` layers admit and `fail_closed` layers deny, all
///    or nothing.
/// 3. Otherwise (mixed backends, keys in different cluster slots, one Redis key twice): layers are
///    checked in order, stopping at the first denial, and the admitted ones are refunded. Between
///    consume and refund, other requests see the consumption (they may be denied spuriously; never
///    admitted extra): the documented window of inexactness.
/// 4. After the checks: a layer that denied for quota (with a finite wait) and has a penalty blocks
///    the key, and its decision's `retry_after` and `reset_after` become at least the penalty's rest
///    (so the headers of this first denial already name the penalty's wait); counters are updated;
///    `on_limited` runs for each denying layer.
///
/// Shadow mode (`LayerOptions::shadow`, `Layer::set_shadow`, or `options.shadow` for every layer;
/// include/ratelimit/layers/README.md "Shadow mode"): the enforcing layers decide the request; a shadow layer goes
/// through every step above as it would enforcing (lists, penalty, the same joint or layer-by-layer check), consumes
/// when the request passes and it admits, and when it would deny it records a would-be denial (`shadow_denied`) and
/// causes no rollback and no denial. A shadow layer admitted in a request an enforcing layer denied is rolled back like
/// any other. A shadow layer on the same state (limiter and key) as an enforcing layer of the check is not checked
/// (`unchecked`): its consumption would count against the enforcing one.
///
/// The same (layer, key) twice in one request consumes both costs; each outcome is that check's own
/// (the second sees the first's consumption), and a rolled-back one reports the state after the give-back. Thread-safe.
/// Throws `std::invalid_argument` for a null layer, a negative cost or a key too long for a layer;
/// backend exceptions propagate after the admitted layers are given back (each of them, even when
/// another's refund throws; the check's own error wins, else the first refund's).
/// Example:
///   ratelimit::MemoryLimiter<ratelimit::FixedWindow> per_ip(
///       ratelimit::FixedWindow{.limit = 60, .window = std::chrono::minutes(1)});
///   ratelimit::MemoryLimiter<ratelimit::FixedWindow> per_key(
///       ratelimit::FixedWindow{.limit = 1000, .window = std::chrono::hours(1)});
///   ratelimit::LimiterLayer ip_layer(per_ip, "ip");
///   ratelimit::LimiterLayer key_layer(per_key, "api-key");
///   const auto d = ratelimit::check_layers({{&ip_layer, "203.0.113.7"}, {&key_layer, "7f3a"}});
///   if (!d) { /* 429: d.violated_policies() names who denied; no layer kept a consumption */ }
inline LayeredDecision check_layers(std::span<const LayerRequest> requests, const CheckOptions& options = {}) {
  LayeredDecision result;
  result.layers.resize(requests.size());
  const bool denied_early = detail::screen_layers(requests, options, result.layers);
  detail::StackArena arena;  // the check's working arrays (consumptions, reported decisions)
  std::pmr::vector<char> skipped(requests.size(), 0, &arena.resource);
  detail::skip_shadows_sharing_state(requests, result.layers, skipped);
  auto active = [&](std::size_t i) { return result.layers[i].verdict == Verdict::unchecked && !skipped[i]; };
  bool denied = denied_early;
  if (!denied_early && !detail::check_jointly(requests, result.layers, skipped, denied)) {
    detail::check_one_by_one(requests, result.layers, active, denied, &arena.resource);
  }
  detail::report_layers(requests, result, &arena.resource);
  return result;
}

/// `check_layers` over a list written in place: `check_layers({{&ip, ip}, {&key, api_key}})`.
inline LayeredDecision check_layers(std::initializer_list<LayerRequest> requests, const CheckOptions& options = {}) {
  return check_layers(std::span<const LayerRequest>(requests.begin(), requests.size()), options);
}

/// Gives back the consumption of a request that passed `check_layers` but then failed or was
/// cancelled: each layer refunds `cost` for its key (see `ratelimit::refund`; allow-listed keys are
/// skipped). Each layer is refunded on its own, not atomically across layers. Counts `refunded`.
/// Thread-safe. Throws `std::invalid_argument` for a null layer or a negative cost.
inline void refund_layers(std::span<const LayerRequest> requests) {
  for (const LayerRequest& r : requests) {
    if (r.layer == nullptr) detail::invalid("layer", "must not be null");
    detail::require_cost(r.cost);
  }
  for (const LayerRequest& r : requests) {
    if (r.layer->lists().lookup(r.key) == Listing::allowed) continue;
    r.layer->backend_refund(r.key, r.cost);
    r.layer->stats().add_refunded();
  }
}

/// `refund_layers` over a list written in place: `refund_layers({{&ip, ip}, {&key, api_key}})`.
inline void refund_layers(std::initializer_list<LayerRequest> requests) {
  refund_layers(std::span<const LayerRequest>(requests.begin(), requests.size()));
}

/// As `refund_layers(requests)`, for the request `passed` answered (`passed = check_layers(requests)`), giving
/// back only what that request consumed: the layers whose outcome is `consumed()` (verdict `admitted`, backend
/// not failed: a fail_open admission consumed nothing). A shadow layer's would-be denial consumed nothing either, so a
/// shadow layer keeps exactly the state enforcement would keep (include/ratelimit/layers/README.md "Shadow mode"); a
/// denied request (every consumption rolled back) gives back nothing. Use this form whenever a layer may be in shadow
/// mode. Throws `std::invalid_argument` naming `passed` when its outcomes are not one per request, for the same layers,
/// or as `refund_layers(requests)`. Thread-safe.
/// Example:
///   ratelimit::MemoryLimiter<ratelimit::Gcra> per_user(
///       ratelimit::Gcra{.limit = 100, .period = std::chrono::minutes(1), .burst = 10});
///   ratelimit::LimiterLayer layer(per_user, "user");
///   const ratelimit::LayerRequest request[] = {{&layer, "user:42", 1}};
///   const ratelimit::LayeredDecision passed = ratelimit::check_layers(request);
///   const bool upstream_failed = true;  // e.g. the upstream answered 503: the call should not count
///   if (passed && upstream_failed) ratelimit::refund_layers(request, passed);
inline void refund_layers(std::span<const LayerRequest> requests, const LayeredDecision& passed) {
  if (passed.layers.size() != requests.size()) detail::invalid("passed", "must be the decision of these requests");
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].layer == nullptr) detail::invalid("layer", "must not be null");
    detail::require_cost(requests[i].cost);
    if (passed.layers[i].layer != requests[i].layer)
      detail::invalid("passed", "must be the decision of these requests");
  }
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const LayerOutcome& o = passed.layers[i];
    if (!o.consumed()) continue;
    requests[i].layer->backend_refund(requests[i].key, requests[i].cost);
    requests[i].layer->stats().add_refunded();
  }
}

/// After the response, settles every layer the request `passed` consumed in (`passed = check_layers(requests)`,
/// the layers whose outcome is `consumed()`, as `refund_layers(requests, passed)` picks them): layer `i` was charged
/// `requests[i].cost` and settles to `actual[i]` with its limiter's `settle` (include/ratelimit/README.md
/// "Settling after the response"): above the charge debited even past the limit (at most `max_debt` units owed
/// beyond it), below it given back. One `actual` per request, since layers may count in other units (requests
/// on one, tokens on another). Each layer settles on its own, not atomically across layers. Thread-safe. Throws
/// `std::invalid_argument` as `refund_layers(requests, passed)`, naming `actual` when its size is not
/// `requests.size()`, `actual[i]` for a negative value, or `max_debt` when negative; `std::logic_error`, settling
/// nothing, when a layer that must debit cannot (`Layer::can_settle`); then what a backend throws.
/// Example:
///   ratelimit::MemoryLimiter<ratelimit::Gcra> requests_per_user(
///       ratelimit::Gcra{.limit = 60, .period = std::chrono::minutes(1), .burst = 10});
///   ratelimit::MemoryLimiter<ratelimit::Gcra> tokens_per_user(
///       ratelimit::Gcra{.limit = 100'000, .period = std::chrono::minutes(1), .burst = 20'000});
///   ratelimit::LimiterLayer calls(requests_per_user, "calls");
///   ratelimit::LimiterLayer tokens(tokens_per_user, "tokens");
///   const ratelimit::LayerRequest request[] = {{&calls, "user:42", 1}, {&tokens, "user:42", 1'000}};
///   const ratelimit::LayeredDecision passed = ratelimit::check_layers(request);
///   if (passed) {
///     const std::int64_t used[] = {1, 1'750};  // the answer took 1,750 tokens, not the 1,000 estimated
///     ratelimit::settle_layers(request, passed, used);
///   }
inline void settle_layers(std::span<const LayerRequest> requests, const LayeredDecision& passed,
                          std::span<const std::int64_t> actual, std::int64_t max_debt = detail::kInt64Max) {
  if (passed.layers.size() != requests.size()) detail::invalid("passed", "must be the decision of these requests");
  if (max_debt < 0) detail::throw_negative_cost(max_debt, "max_debt");
  if (actual.size() != requests.size()) {
    detail::invalid("actual", "must hold one value per request (" + std::to_string(requests.size()) + "), got " +
                                  std::to_string(actual.size()));
  }
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].layer == nullptr) detail::invalid("layer", "must not be null");
    detail::require_cost(requests[i].cost);
    if (actual[i] < 0) detail::throw_negative_cost(actual[i], "actual[" + std::to_string(i) + "]");
    if (passed.layers[i].layer != requests[i].layer)
      detail::invalid("passed", "must be the decision of these requests");
  }
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (passed.layers[i].consumed() && actual[i] > requests[i].cost && !requests[i].layer->can_settle())
      throw std::logic_error("settle: not supported by this layer (its limiter has no settle)");
  }
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (!passed.layers[i].consumed()) continue;
    requests[i].layer->backend_settle(requests[i].key, requests[i].cost, actual[i], max_debt);
  }
}

}  // namespace ratelimit
