#pragma once

/// @file
/// The Redis side of a joint (layered) check: one `EVALSHA` of lua/layered.lua over the keys of several
/// `RedisLimiter`s on one server (or one cluster slot), all or nothing.

#include <hiredis/hiredis.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/decision.hpp"
#include "ratelimit/joint_backend.hpp"
#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/engine/cluster_router.hpp"
#include "ratelimit/redis/engine/slots.hpp"
#include "ratelimit/redis/detail/script_binding.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/redis/options.hpp"
#include "ratelimit/redis/engine/pool.hpp"
#include "ratelimit/redis/engine/reply.hpp"
#include "ratelimit/redis/engine/route.hpp"
#include "ratelimit/redis/engine/script_call.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace detail {

/// One limiter's part of a layered script call: its Redis key and its five ARGV entries.
struct LayeredPart {
  /// The Redis key (`RedisLimiter::redis_key`).
  std::string key;
  /// The limiter's time for this call, microseconds (for failure decisions).
  std::int64_t now_us = 0;
  /// Cost units, >= 0.
  std::int64_t cost = 0;
  /// Policy kind, now ("" = server TIME), cost, and the per-policy script's two parameters (ARGV[4..5]).
  std::array<std::string, 5> argv;
  /// The member's policy the part was made under (`set_policy` may replace it meanwhile), for its decision.
  const void* policy = nullptr;
};

/// What `run_layered` needs from each `RedisLimiter` (a non-template base, so limiters of different
/// policies and clocks meet in one call). Internal: used through `JointBackend::check_jointly`. Every
/// `JointBackend` whose domain is a pool's or a router's address is one of these.
class LayeredMember : public JointBackend {
 public:
  /// Where the limiter's commands go (its pool's server, or its cluster router).
  [[nodiscard]] virtual Route& layered_route() const noexcept = 0;
  /// This limiter's part for `key` at `cost`, reading its clock. Throws
  /// `std::invalid_argument` for a key longer than `max_key_bytes` or a negative cost.
  [[nodiscard]] virtual LayeredPart layered_part(std::string_view key, std::int64_t cost) = 0;
  /// The decision in the script's per-layer reply; throws `BackendError` if it breaks the contract.
  [[nodiscard]] virtual Decision layered_decision(const redisReply& r, const LayeredPart& part) const = 0;
  /// Counts a check of this limiter (once its part is sent).
  virtual void layered_called() noexcept = 0;
  /// Counts a failure of this limiter's part (and tells its failure hook and fallback gate).
  virtual void layered_failed(const BackendError& e) noexcept = 0;
  /// The in-memory fallback's limiter (`FailurePolicy::fallback`), or null: its failure decisions are then
  /// checked jointly in memory with the other members' fallbacks.
  [[nodiscard]] virtual JointBackend* layered_fallback() noexcept = 0;
  /// Counts a check answered by the fallback.
  virtual void layered_fallback_served() noexcept = 0;
  /// The limiter's failure policy.
  [[nodiscard]] virtual FailurePolicy layered_on_error() const noexcept = 0;
  /// What this limiter answers for `cost` at `now_us` when Redis failed and `on_error` is not `raise`.
  [[nodiscard]] virtual Decision layered_failure_decision(std::int64_t now_us, std::int64_t cost) const = 0;
  /// Counts `n` NOSCRIPTs answered by EVAL.
  virtual void layered_reloaded(std::size_t n) noexcept = 0;

 protected:
  ~LayeredMember() = default;
};

/// The embedded layered script.
[[nodiscard]] inline const EmbeddedScript& layered_script() { return script_for("layered"); }

/// Runs `requests` (all of `LayeredMember`s with one `joint_domain()`) as one layered script call and
/// fills `results`; see `JointBackend::check_jointly`. Returns false, sending nothing, when a request's
/// backend is not of `self`'s domain, two requests name the same Redis key, or (on Redis
/// Cluster) the keys are in different slots; also false, with nothing applied or counted, when the
/// cluster answers `TRYAGAIN` (the slot is migrating and its keys are split between the two nodes).
///
/// Failures (connection, timeout, error reply, malformed reply) fail the whole call: every member
/// counts it; if any member's `on_error` is `raise`, the error is thrown (nothing was consumed unless
/// the script ran before the failure, as for single checks); otherwise each member answers its own
/// failure decision (`fail_open`: a fresh key's decision; `fail_closed`: a denial; `fallback`: its
/// in-memory share, the fallback members checked as one joint step in memory) and, if any of those denies
/// (a shadow member's denial stops nothing), nothing is consumed: the admitting members report their state
/// (a fresh key's, or the fallback's) with nothing consumed (include/ratelimit/redis/README.md "Fallback during
/// outages").
inline bool run_layered(const LayeredMember& self, std::span<const JointRequest> requests,
                        std::span<CheckResult> results) {
  if (requests.empty() || results.size() != requests.size()) return false;
  std::vector<LayeredMember*> members(requests.size());
  const void* const domain = self.joint_domain();
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (domain == nullptr || requests[i].backend == nullptr || requests[i].backend->joint_domain() != domain) {
      return false;
    }
    // One domain (a pool or router address) is only ever RedisLimiters': the cast is exact, no RTTI.
    members[i] = static_cast<LayeredMember*>(requests[i].backend);
  }
  Route& route = members[0]->layered_route();
  std::vector<LayeredPart> parts;
  parts.reserve(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    // Validate before reading clocks or counting: a bad request throws with nothing counted.
    ratelimit::detail::require_cost(requests[i].cost);
  }
  for (std::size_t i = 0; i < requests.size(); ++i)
    parts.push_back(members[i]->layered_part(requests[i].key, requests[i].cost));
  for (std::size_t i = 0; i < parts.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (parts[i].key == parts[j].key) return false;  // the script decides each key against its stored state once
    }
    if (route.sharded() && key_slot(parts[i].key) != key_slot(parts[0].key)) return false;
  }

  const EmbeddedScript& script = layered_script();
  const std::string count = std::to_string(parts.size());
  std::vector<std::string_view> args;
  args.reserve(4 + parts.size() * 6);
  args.push_back("EVALSHA");
  args.push_back(script.sha1);
  args.push_back(count);
  for (const LayeredPart& p : parts) args.push_back(p.key);
  for (const LayeredPart& p : parts) {
    for (const std::string& a : p.argv) args.push_back(a);
  }
  std::string shadow_mask;  // sent only when some layer is in shadow mode (lua/layered.lua ARGV[5n+1])
  for (const JointRequest& r : requests) shadow_mask.push_back(r.shadow ? '1' : '0');
  if (shadow_mask.find('1') != std::string::npos) args.push_back(shadow_mask);
  try {
    RouteCall call;
    call.slot = key_slot(parts[0].key);
    call.args = args;
    if (const std::size_t reloads = run_script(route, script, std::span<RouteCall>(&call, 1)); reloads != 0) {
      members[0]->layered_reloaded(reloads);
    }
    // The slot is migrating and only some of the keys are on the node asked: the cluster runs no
    // multi-key script until the move ends, so the caller checks layer by layer (nothing ran).
    if (route.sharded() && !call.error && is_error(*call.reply, "TRYAGAIN")) return false;
    for (LayeredMember* m : members) m->layered_called();
    if (call.error) throw *call.error;
    const Reply reply = std::move(call.reply);
    if (reply->type == REDIS_REPLY_ERROR) throw BackendError(BackendErrorCause::reply, std::string(text(*reply)));
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != parts.size() || reply->element == nullptr) {
      throw BackendError(BackendErrorCause::protocol,
                         "malformed layered script reply: expected " + count + " decisions");
    }
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (reply->element[i] == nullptr)
        throw BackendError(BackendErrorCause::protocol, "malformed layered script reply");
      results[i] = {members[i]->layered_decision(*reply->element[i], parts[i]), Outcome::decided};
    }
    return true;
  } catch (const BackendError& e) {
    bool raise = false;
    for (LayeredMember* m : members) {
      m->layered_failed(e);
      if (m->layered_on_error() == FailurePolicy::raise) raise = true;
    }
    if (raise) throw;
    // The stateless failure decisions first; the fallbacks consume only if none of those denies.
    bool all = true;
    std::vector<JointRequest> in_memory;
    std::vector<std::size_t> memory_index;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (JointBackend* memory = members[i]->layered_fallback()) {
        in_memory.push_back(JointRequest{memory, requests[i].key, requests[i].cost, requests[i].shadow});
        memory_index.push_back(i);
        continue;
      }
      results[i] = {members[i]->layered_failure_decision(parts[i].now_us, parts[i].cost), Outcome::failure_policy};
      if (!results[i].decision.allowed && !requests[i].shadow) all = false;
    }
    if (!in_memory.empty()) {
      if (!all) {
        for (JointRequest& r : in_memory) r.cost = 0;  // their state, nothing consumed
      }
      std::vector<CheckResult> memory_results(in_memory.size());
      (void)in_memory.front().backend->check_jointly(in_memory, memory_results);  // memory always can
      for (std::size_t k = 0; k < in_memory.size(); ++k) {
        const std::size_t i = memory_index[k];
        members[i]->layered_fallback_served();
        results[i] = {memory_results[k].decision, Outcome::failure_policy};
        if (!results[i].decision.allowed && !requests[i].shadow) all = false;
      }
    }
    if (!all) {
      for (std::size_t i = 0; i < parts.size(); ++i) {
        if (results[i].decision.allowed && members[i]->layered_fallback() == nullptr) {
          results[i].decision = members[i]->layered_failure_decision(parts[i].now_us, 0);
        }
      }
    }
    return true;
  }
}

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
