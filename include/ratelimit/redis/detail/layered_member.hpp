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

namespace engine {
class Route;
}
using engine::Route;

namespace detail {

class Answers;

/// One member's part of a layered script call.
struct LayeredPart {
  Route* route = nullptr;  // where the member's commands go
  std::string key;         // its Redis key
  /// Policy kind, now ("" = server TIME), cost, and the policy script's two parameters.
  std::array<std::string, 5> argv;
  std::int64_t limit = 0;      // the limit its reply must carry
  Answers* answers = nullptr;  // its failure policy, hook, counters and fallback
  /// Its failure decisions at its time for its cost, and for cost 0.
  Decision failure{};
  Decision failure_empty{};
};

/// What `run_layered` needs from each `RedisLimiter` (a non-template base: limiters of any policy and clock meet in
/// one call). Every `JointBackend` whose domain is a pool's or a router's address is one of these.
class LayeredMember : public JointBackend {
 public:
  /// This limiter's part for `key` at `cost`, reading its clock; counts nothing. Throws `std::invalid_argument`
  /// for a bad key or cost.
  [[nodiscard]] virtual LayeredPart layered_part(std::string_view key, std::int64_t cost) = 0;

 protected:
  ~LayeredMember() = default;
};

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
