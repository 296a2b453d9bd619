#pragma once

/// @file
/// `LayeredMember`: what a joint (layered) check needs from each `RedisLimiter`, declared apart from the call
/// itself (detail/layered_call.hpp) so that the limiter's class compiles without the engine.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "ratelimit/decision.hpp"
#include "ratelimit/joint_backend.hpp"
#include "ratelimit/redis/abi.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {

class Route;

namespace detail {

class Answers;

/// One member's part of a layered script call: its Redis key, its five ARGV entries, and what answers for it.
struct LayeredPart {
  /// Where the member's commands go (its pool's server, or its cluster router).
  Route* route = nullptr;
  /// The Redis key (`RedisLimiter::redis_key`).
  std::string key;
  /// Policy kind, now ("" = server TIME), cost, and the per-policy script's two parameters (ARGV[4..5]).
  std::array<std::string, 5> argv;
  /// The limit the member's reply must carry (the policy the part was made under).
  std::int64_t limit = 0;
  /// The member's failure policy, hook, counters and fallback.
  Answers* answers = nullptr;
  /// The member's failure decisions at its time for its cost, and for cost 0.
  Decision failure{};
  Decision failure_empty{};
};

/// What `run_layered` needs from each `RedisLimiter` (a non-template base, so limiters of different policies and
/// clocks meet in one call). Internal: used through `JointBackend::check_jointly`. Every `JointBackend` whose
/// domain is a pool's or a router's address is one of these.
class LayeredMember : public JointBackend {
 public:
  /// This limiter's part for `key` at `cost`, reading its clock; counts nothing. Throws `std::invalid_argument`
  /// for a key longer than `max_key_bytes` or a negative cost.
  [[nodiscard]] virtual LayeredPart layered_part(std::string_view key, std::int64_t cost) = 0;

 protected:
  ~LayeredMember() = default;
};

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
