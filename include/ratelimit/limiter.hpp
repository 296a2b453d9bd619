#pragma once

/// @file
/// The `Limiter` concept that every backend satisfies.

#include <concepts>
#include <cstdint>
#include <string_view>

#include "ratelimit/decision.hpp"

namespace ratelimit {

/// A policy bound to a store of per-key state (include/ratelimit/README.md "Decisions").
///
/// - `allow(key)` / `allow(key, cost)`: check and, if admitted with cost >= 1, consume.
/// - `peek(key)`: what a cost-1 request would see; consumes nothing.
/// - `reset(key)`: forget the key's state (it is full again).
template <class L>
concept Limiter = requires(L& limiter, std::string_view key, std::int64_t cost) {
  { limiter.allow(key) } -> std::same_as<Decision>;
  { limiter.allow(key, cost) } -> std::same_as<Decision>;
  { limiter.peek(key) } -> std::same_as<Decision>;
  limiter.reset(key);
};

}  // namespace ratelimit
