#pragma once

/// @file
/// The `Policy` concept and the tick-level decision every policy computes.
///
/// A policy is a plain value (its parameters). `policy.rules(tick_ns)` validates it for a backend's
/// tick (1 ns in memory, 1000 ns on Redis) and returns its `Rules`: the parameters in ticks plus pure
/// functions of (state, now) that never read a clock or touch shared memory. Stores own atomicity.

#include <chrono>
#include <concepts>
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "ratelimit/decision.hpp"
#include "ratelimit/detail/arithmetic.hpp"

namespace ratelimit {

/// A `Decision` in the backend's ticks; `never` is `kInt64Max`.
struct TickDecision {
  bool allowed = false;
  std::int64_t limit = 0;
  std::int64_t remaining = 0;
  std::int64_t retry_after = 0;
  std::int64_t reset_after = 0;

  static constexpr std::int64_t never = detail::kInt64Max;

  friend bool operator==(const TickDecision&, const TickDecision&) = default;
};

/// Validated rules of a policy, in ticks. `State{}` is the state of an absent (full) key.
///
/// - `evaluate(state, now, cost)`: the decision, assuming the request is committed if allowed.
/// - `commit(state, now, cost)`: applies an allowed request with `cost >= 1` (the only state write).
/// - `decide(state, now, cost)`: `evaluate`, then `commit` when admitted with cost >= 1.
/// - `is_full(state, now)`: true when the key could be forgotten without changing any decision.
/// The five policies derive all four from one view of the state (`detail::ViewedRules`).
template <class R>
concept PolicyRules = std::copy_constructible<R> && std::default_initializable<typename R::State> &&
    requires(const R& rules, typename R::State& state, const typename R::State& cstate, std::int64_t now,
             std::int64_t cost) {
  { rules.evaluate(cstate, now, cost) } -> std::same_as<TickDecision>;
  rules.commit(state, now, cost);
  { rules.decide(state, now, cost) } -> std::same_as<TickDecision>;
  { rules.is_full(cstate, now) } -> std::same_as<bool>;
  { rules.limit() } -> std::same_as<std::int64_t>;
};

/// An algorithm with its parameters: `FixedWindow`, `SlidingWindowLog`, `SlidingWindowCounter`,
/// `TokenBucket`, `Gcra`. `P::kind` is its short name (also the Redis key component).
template <class P>
concept Policy = std::copy_constructible<P> && requires(const P& policy, std::int64_t tick_ns) {
  { P::kind } -> std::convertible_to<std::string_view>;
  { policy.rules(tick_ns) } -> PolicyRules;
};

template <Policy P>
using RulesOf = decltype(std::declval<const P&>().rules(std::int64_t{1}));

template <Policy P>
using StateOf = typename RulesOf<P>::State;

namespace detail {

/// Throws `std::invalid_argument` ("<field>: must be >= 0, got C"); `field` names a batch's request.
[[noreturn, gnu::cold, gnu::noinline]] inline void throw_negative_cost(std::int64_t cost,
                                                                       std::string_view field = "cost") {
  invalid(field, "must be >= 0, got " + std::to_string(cost));
}

/// Throws `std::invalid_argument` for a negative cost (include/ratelimit/README.md "Keys, costs and validation"). The
/// throw is out of line so the check costs one compare on the hot path.
inline void require_cost(std::int64_t cost) {
  if (cost < 0) [[unlikely]]
    throw_negative_cost(cost);
}

/// The decision for a request that can never pass: nothing consumed, `retry_after = never`.
[[nodiscard]] inline TickDecision never_passes(TickDecision current) noexcept {
  current.allowed = false;
  current.retry_after = TickDecision::never;
  return current;
}

}  // namespace detail

/// Checks a request of `cost` at `now` and commits it to `state` when it is admitted with cost >= 1.
/// Throws `std::invalid_argument` for a negative cost. Not thread-safe: the store serializes calls.
template <PolicyRules R>
TickDecision decide(const R& rules, typename R::State& state, std::int64_t now, std::int64_t cost) {
  detail::require_cost(cost);
  return rules.decide(state, now, cost);
}

/// What a cost-1 request would see, consuming nothing: `allowed` and `retry_after` of cost 1,
/// `remaining` and `reset_after` as they are now (include/ratelimit/README.md "Decisions", `peek`).
template <PolicyRules R>
TickDecision peek(const R& rules, const typename R::State& state, std::int64_t now) {
  TickDecision one = rules.evaluate(state, now, 1);
  const TickDecision zero = rules.evaluate(state, now, 0);
  one.remaining = zero.remaining;
  one.reset_after = zero.reset_after;
  return one;
}

/// Rules that can give quota back (`refund`); all five policies qualify.
template <class R>
concept RefundableRules = PolicyRules<R> &&
    requires(const R& rules, typename R::State& state, std::int64_t now, std::int64_t cost) {
  { rules.refund(state, now, cost) } -> std::same_as<TickDecision>;
};

/// Gives back up to `cost` units the key consumed (a request that failed or was cancelled), never
/// past full: `remaining` stays <= `limit`. Exact formulas per policy (include/ratelimit/README.md "Refunds"):
/// fixed window `c = max(0, c - n)` in the current window; sliding window log removes `n` from the
/// newest entries; sliding window counter `cur = max(0, cur - n)`, then the rest of `n` from `prev`;
/// GCRA and token bucket `TAT = max(TAT - n*T, t)`. Returns the state afterwards as a cost-0 check sees it
/// (`allowed`, `retry_after == 0`). Throws `std::invalid_argument` for a negative cost.
/// Not thread-safe: the store serializes calls.
template <RefundableRules R>
TickDecision refund(const R& rules, typename R::State& state, std::int64_t now, std::int64_t cost) {
  detail::require_cost(cost);
  return rules.refund(state, now, cost);
}

/// Rules that can debit units owed after the fact (`debit`, the part of `settle` above the charge); all
/// five policies qualify.
template <class R>
concept SettleableRules = RefundableRules<R> &&
    requires(const R& rules, typename R::State& state, std::int64_t now, std::int64_t cost) {
  { rules.debit(state, now, cost, cost) } -> std::same_as<TickDecision>;
};

/// Rules that can book a later slot (`reserve`) and give back what is unspent of it (`cancel`): GCRA and the
/// token bucket. A window's count keeps no order of arrivals to book a later slot in, and a booking in a future
/// window would need state for every window ahead (include/ratelimit/README.md "Reservations").
template <class R>
concept ReservableRules = PolicyRules<R> && requires(const R& rules, typename R::State& state, std::int64_t now,
                                                     std::int64_t cost, const typename R::Booking& booking) {
  { rules.reserve(state, now, cost, cost) } -> std::same_as<typename R::Booking>;
  rules.cancel(state, now, booking.ticket);
};

namespace detail {

/// Throws `std::invalid_argument` naming `charged`, `actual` or `max_debt` when one is negative.
inline void require_settle(std::int64_t charged, std::int64_t actual, std::int64_t max_debt) {
  if (charged < 0) [[unlikely]]
    throw_negative_cost(charged, "charged");
  if (actual < 0) [[unlikely]]
    throw_negative_cost(actual, "actual");
  if (max_debt < 0) [[unlikely]]
    throw_negative_cost(max_debt, "max_debt");
}

}  // namespace detail

/// Makes a key's state what charging `actual` units instead of `charged` would have made it
/// (include/ratelimit/README.md "Settling after the response"): with `d = actual - charged`, `d > 0` is debited
/// even past the limit (`rules.debit`, leaving at most `max_debt` units owed beyond it), `d < 0` is refunded
/// exactly as `refund(-d)`, `d == 0` changes nothing. Returns the state afterwards as a cost-0 check sees it
/// (`remaining` in [0, limit]). `charged`, `actual`, `max_debt` >= 0, else `std::invalid_argument` naming the
/// field. Not thread-safe: the store serializes calls.
template <SettleableRules R>
TickDecision settle(const R& rules, typename R::State& state, std::int64_t now, std::int64_t charged,
                    std::int64_t actual, std::int64_t max_debt) {
  detail::require_settle(charged, actual, max_debt);
  const std::int64_t d = actual - charged;  // both >= 0: no overflow
  if (d > 0) return rules.debit(state, now, d, max_debt);
  if (d < 0) return rules.refund(state, now, -d);
  return rules.evaluate(state, now, 0);
}

/// Converts tick durations to `Decision`'s nanoseconds. Validation keeps every finite value in range.
[[nodiscard]] inline Decision to_decision(const TickDecision& d, std::int64_t tick_ns) noexcept {
  auto ns = [tick_ns](std::int64_t ticks) {
    return ticks == TickDecision::never ? Decision::never : std::chrono::nanoseconds(ticks * tick_ns);
  };
  return Decision{d.allowed, d.limit, d.remaining, ns(d.retry_after), ns(d.reset_after)};
}

}  // namespace ratelimit
