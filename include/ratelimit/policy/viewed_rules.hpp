#pragma once

/// @file
/// `detail::ViewedRules`: the `evaluate` / `commit` / `decide` / `is_full` functions every policy's rules
/// expose, derived once from the policy's own view of a state at a time.

#include <cstdint>

#include "ratelimit/policy/policy.hpp"

namespace ratelimit::detail {

/// Base of a policy's `Rules` (CRTP). `Derived` provides, privately (with `friend ViewedRules<Derived>`):
/// - `view(state, now)`: what the decision looks at, at the effective time (`max(now, latest write)`);
/// - `evaluate_at(state, view, cost)`: the decision, assuming the request is committed if allowed;
/// - `commit_at(state, view, cost)`: applies an admitted request with `cost >= 1`;
/// - `full_at(state, view)`: true when the key could be forgotten without changing any decision.
/// Each public function computes the view once. Not thread-safe: the store serializes calls.
template <class Derived>
class ViewedRules {
 public:
  template <class State>
  [[nodiscard]] TickDecision evaluate(const State& s, std::int64_t now, std::int64_t cost) const noexcept {
    return self().evaluate_at(s, self().view(s, now), cost);
  }

  template <class State>
  void commit(State& s, std::int64_t now, std::int64_t cost) const {
    self().commit_at(s, self().view(s, now), cost);
  }

  /// `evaluate`, then `commit` when admitted with cost >= 1, with one look at the state.
  template <class State>
  TickDecision decide(State& s, std::int64_t now, std::int64_t cost) const {
    const auto v = self().view(s, now);
    const TickDecision d = self().evaluate_at(s, v, cost);
    if (d.allowed && cost > 0) self().commit_at(s, v, cost);
    return d;
  }

  friend bool operator==(const ViewedRules&, const ViewedRules&) = default;

  template <class State>
  [[nodiscard]] bool is_full(const State& s, std::int64_t now) const noexcept {
    return self().full_at(s, self().view(s, now));
  }

 private:
  [[nodiscard]] const Derived& self() const noexcept { return static_cast<const Derived&>(*this); }
};

}  // namespace ratelimit::detail
