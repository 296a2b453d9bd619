#pragma once

/// @file
/// Rate and concurrency together: a request passes only if every rate layer admits it and every
/// concurrency limit has room; otherwise nothing is consumed and no permit is held
/// (include/ratelimit/concurrency/README.md "Concurrency limits", together with rate limits).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/concurrency/permit.hpp"
#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/layers/layered.hpp"

namespace ratelimit {

/// A concurrency limit as one layer of a request: a name (for problem bodies and logs) and a limiter
/// taking units without waiting. Any limiter with `try_acquire(key, units) -> PermitResult` fits
/// (`ConcurrencyLimiter`, `redis::RedisConcurrencyLimiter`). The limiter must outlive the layer.
/// Thread-safe as the limiter is (both are).
class ConcurrencyLayer {
 public:
  /// Throws `std::invalid_argument` (`name`) for an empty name.
  template <class L>
  ConcurrencyLayer(std::string name, L& limiter)
      : name_(std::move(name)),
        acquire_([&limiter](std::string_view key, std::int64_t units) { return limiter.try_acquire(key, units); }) {
    if (name_.empty()) detail::invalid("name", "must not be empty");
  }

  /// Takes `units` for `key` now, or says why not. Thread-safe. Throws what the limiter throws.
  PermitResult try_acquire(std::string_view key, std::int64_t units) const { return acquire_(key, units); }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  std::string name_;
  std::function<PermitResult(std::string_view, std::int64_t)> acquire_;
};

/// One concurrency limit of a request: which layer, for which key, how many units.
struct ConcurrencyRequest {
  /// The layer; must outlive the check.
  ConcurrencyLayer* layer = nullptr;
  /// The key in that layer (e.g. the API key); must outlive the check.
  std::string_view key{};
  /// Units to hold while the request runs; >= 1.
  std::int64_t units = 1;
};

/// The answer of `check_layers(rate, concurrency)`.
struct AdmittedRequest {
  /// The rate layers' answer; when a concurrency limit denied first, the rate layers were not checked
  /// (every outcome `unchecked`, `decision.allowed` true, nothing consumed).
  LayeredDecision rate{};
  /// One permit per concurrency request, in order, when admitted (hold them while the request runs);
  /// empty otherwise.
  std::vector<Permit> permits{};
  /// The index of the concurrency request that denied, if one did.
  std::optional<std::size_t> denied_by{};
  /// That request's answer (its status and the key's `in_flight`); `acquired` when none denied.
  PermitResult concurrency{{}, PermitStatus::acquired, 0, 0, 0};

  /// True when every rate layer admitted and every permit was taken.
  [[nodiscard]] bool allowed() const noexcept { return !denied_by && rate.decision.allowed; }
  explicit operator bool() const noexcept { return allowed(); }
};

namespace detail {
/// Returns permits taken for a request that was then refused: unmeasured, so an adaptive limit takes no
/// latency sample of work that never ran.
inline void release_unused(std::vector<Permit>& held) noexcept {
  for (Permit& p : held) p.release_unused();
  held.clear();
}
}  // namespace detail

/// Checks a request against rate layers and concurrency limits, all or nothing.
///
/// 1. Takes each concurrency request's permit in order (no waiting). At the first one without room,
///    the permits already taken are released and the denial is returned; no rate layer is checked, so
///    nothing is consumed.
/// 2. Runs `check_layers(rate)` (all or nothing among the rate layers). If it denies, every permit is
///    released.
/// 3. Otherwise the permits are returned in the answer: the request holds them until they are
///    destroyed or released (when it ends).
/// Between steps 1 and 3 a permit is held for a request that may still be denied: another request can
/// meanwhile be denied for concurrency spuriously, never admitted beyond the limit; a rate denial
/// consumes no concurrency and a concurrency denial no rate. Thread-safe. Throws
/// `std::invalid_argument` for a null layer or `units < 1` before anything is taken, and what the
/// limiters and `check_layers` throw (permits taken so far are released first). `options` go to the rate
/// check (e.g. `shadow`); concurrency layers always enforce. Permits given back because the request was
/// refused are released unused (`Permit::release_unused`: no latency sample for an adaptive limit); the
/// admitted request reports its outcome with `permit.release(PermitOutcome)`.
/// Example:
///   ratelimit::MemoryLimiter<ratelimit::Gcra> rate(
///       ratelimit::Gcra{.limit = 100, .period = std::chrono::minutes(1), .burst = 20});
///   ratelimit::ConcurrencyLimiter<> running(ratelimit::ConcurrencyOptions{.permits = 5});
///   ratelimit::LimiterLayer rate_layer(rate, "rate");
///   ratelimit::ConcurrencyLayer running_layer("running", running);
///   const auto r = ratelimit::check_layers({{&rate_layer, "user:42"}}, {{&running_layer, "user:42"}});
///   if (!r) { /* 429: over the rate, or 5 requests of user:42 run already; nothing was consumed */ }
///   /* serve the request; r.permits give the units back when r is destroyed */
inline AdmittedRequest check_layers(std::span<const LayerRequest> rate, std::span<const ConcurrencyRequest> concurrency,
                                    const CheckOptions& options = {}) {
  for (const ConcurrencyRequest& c : concurrency) {
    if (c.layer == nullptr) detail::invalid("layer", "must not be null");
    detail::require_positive(c.units, "units");
  }
  AdmittedRequest out;
  std::vector<Permit> held;
  held.reserve(concurrency.size());
  for (std::size_t i = 0; i < concurrency.size(); ++i) {
    PermitResult r = concurrency[i].layer->try_acquire(concurrency[i].key, concurrency[i].units);
    if (!r) {
      detail::release_unused(held);
      out.rate.layers.resize(rate.size());
      for (std::size_t k = 0; k < rate.size(); ++k) out.rate.layers[k].layer = rate[k].layer;
      out.denied_by = i;
      out.concurrency = std::move(r);
      return out;
    }
    held.push_back(std::move(r.permit));
    out.concurrency.in_flight = r.in_flight;
  }
  try {
    out.rate = check_layers(rate, options);
  } catch (...) {
    detail::release_unused(held);
    throw;
  }
  if (out.rate.decision.allowed) {
    out.permits = std::move(held);
  } else {
    detail::release_unused(held);
  }
  return out;
}

/// `check_layers(rate, concurrency)` over lists written in place.
inline AdmittedRequest check_layers(std::initializer_list<LayerRequest> rate,
                                    std::initializer_list<ConcurrencyRequest> concurrency,
                                    const CheckOptions& options = {}) {
  return check_layers(std::span<const LayerRequest>(rate.begin(), rate.size()),
                      std::span<const ConcurrencyRequest>(concurrency.begin(), concurrency.size()), options);
}

}  // namespace ratelimit
