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
#include "ratelimit/redis/detail/answer.hpp"
#include "ratelimit/redis/detail/layered_member.hpp"
#include "ratelimit/redis/engine/slots.hpp"
#include "ratelimit/redis/detail/script_binding.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/redis/engine/reply.hpp"
#include "ratelimit/redis/engine/route.hpp"
#include "ratelimit/redis/engine/script_call.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace detail {

/// The parts of `requests` (members of `domain`), or none when they cannot run as one script: a backend of
/// another domain, two requests on one Redis key, or (on Redis Cluster) keys in different slots.
inline std::vector<LayeredPart> layered_parts(const void* domain, std::span<const JointRequest> requests) {
  for (const JointRequest& r : requests) {
    if (domain == nullptr || r.backend == nullptr || r.backend->joint_domain() != domain) return {};
  }
  // Validate before reading clocks: a bad request throws with nothing done.
  for (const JointRequest& r : requests) ratelimit::detail::require_cost(r.cost);
  std::vector<LayeredPart> parts;
  parts.reserve(requests.size());
  for (const JointRequest& r : requests) {
    // One domain (a pool or router address) is only ever RedisLimiters': the cast is exact, no RTTI.
    parts.push_back(static_cast<LayeredMember*>(r.backend)->layered_part(r.key, r.cost));
  }
  for (std::size_t i = 0; i < parts.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (parts[i].key == parts[j].key) return {};  // the script decides each key against its stored state once
    }
    if (parts[0].route->sharded() && engine::detail::key_slot(parts[i].key) != engine::detail::key_slot(parts[0].key))
      return {};
  }
  return parts;
}

/// The answers when the layered call failed (not under `raise`): each member's failure decision, the members with a
/// fallback checked jointly in memory; if any denies (not in shadow), admitting members report their state with
/// nothing consumed (include/ratelimit/redis/README.md "Fallback during outages").
inline void layered_failure(std::span<const LayeredPart> parts, std::span<const JointRequest> requests,
                            std::span<CheckResult> results) {
  bool all = true;
  std::vector<JointRequest> in_memory;
  std::vector<std::size_t> memory_index;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (FallbackBase* f = parts[i].answers->fallback_base()) {
      in_memory.push_back(JointRequest{f->joint(), requests[i].key, requests[i].cost, requests[i].shadow});
      memory_index.push_back(i);
      continue;
    }
    results[i] = {parts[i].failure, Outcome::failure_policy};
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
      parts[i].answers->fallback_base()->count_served();
      results[i] = {memory_results[k].decision, Outcome::failure_policy};
      if (!results[i].decision.allowed && !requests[i].shadow) all = false;
    }
  }
  if (all) return;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (results[i].decision.allowed && parts[i].answers->fallback_base() == nullptr) {
      results[i].decision = parts[i].failure_empty;
    }
  }
}

/// Runs `requests` (of `LayeredMember`s of `domain`) as one `EVALSHA` of lua/layered.lua into `results` (see
/// `JointBackend::check_jointly`). False, sending nothing, when `layered_parts` finds none; also false, nothing
/// applied or counted, on the cluster's `TRYAGAIN`. A failure fails the whole call: every member counts it; thrown if
/// any member's `on_error` is `raise`, else `layered_failure` answers.
inline bool run_layered(const void* domain, std::span<const JointRequest> requests, std::span<CheckResult> results) {
  if (requests.empty() || results.size() != requests.size()) return false;
  const std::vector<LayeredPart> parts = layered_parts(domain, requests);
  if (parts.empty()) return false;
  const EmbeddedScript& script = script_for("layered");
  const std::string count = std::to_string(parts.size());
  engine::RouteCall call;
  call.slot = engine::detail::key_slot(parts[0].key);
  call.args.reserve(4 + parts.size() * 6);
  call.args.push_back("EVALSHA");
  call.args.push_back(script.sha1);
  call.args.push_back(count);
  for (const LayeredPart& p : parts) call.args.push_back(p.key);
  for (const LayeredPart& p : parts) call.args.insert(call.args.end(), p.argv.begin(), p.argv.end());
  std::string shadow_mask;  // sent only when some layer is in shadow mode (lua/layered.lua ARGV[5n+1])
  for (const JointRequest& r : requests) shadow_mask.push_back(r.shadow ? '1' : '0');
  if (shadow_mask.find('1') != std::string::npos) call.args.push_back(shadow_mask);
  Route& route = *parts[0].route;
  parts[0].answers->reloaded(engine::run_script(route, script, std::span<engine::RouteCall>(&call, 1)));
  // A migrating slot runs no multi-key script until the move ends: the caller checks layer by layer (nothing ran).
  if (route.sharded() && !call.error && engine::is_error(*call.reply, "TRYAGAIN")) return false;
  for (const LayeredPart& p : parts) p.answers->calls.fetch_add(1, std::memory_order_relaxed);
  try {
    const redisReply& reply = reply_of(call);
    if (reply.type != REDIS_REPLY_ARRAY || reply.elements != parts.size() || reply.element == nullptr) {
      throw BackendError(BackendErrorCause::protocol,
                         "malformed layered script reply: expected " + count + " decisions");
    }
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (reply.element[i] == nullptr)
        throw BackendError(BackendErrorCause::protocol, "malformed layered script reply");
      results[i] = {decision_of(*reply.element[i], parts[i].limit), Outcome::decided};
    }
  } catch (const BackendError& e) {
    bool raise = false;
    for (const LayeredPart& p : parts) {
      p.answers->failed(e);
      if (FallbackBase* f = p.answers->fallback_base()) f->observe(&e);
      if (p.answers->on_error == FailurePolicy::raise) raise = true;
    }
    if (raise) throw;
    layered_failure(parts, requests, results);
  }
  return true;
}

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
