#pragma once

/// @file
/// `JointBackend`: the hook by which a backend checks the keys of several limiters in one atomic step
/// (on Redis, one script over all keys), so that a layered check (`check_layers`) is all or nothing
/// without consume-then-refund.

#include <cstdint>
#include <span>
#include <string_view>

#include "ratelimit/decision.hpp"

namespace ratelimit {

class JointBackend;

/// One limiter's part of a joint check: which limiter, for which key, at what cost.
struct JointRequest {
  /// The limiter; all requests of one joint check share its `joint_domain()`. Must outlive the check.
  JointBackend* backend = nullptr;
  /// The user key; must outlive the check.
  std::string_view key{};
  /// Cost units; >= 0.
  std::int64_t cost = 1;
  /// A shadow (dry-run) request: it is decided and consumes like the others, but its denial does not
  /// deny the joint step (include/ratelimit/layers/README.md "Shadow mode").
  bool shadow = false;
};

/// A limiter whose backend can check several (limiter, key, cost) requests as one atomic step, all or
/// nothing: the one protocol of layered checks (`check_layers`). Implemented by `MemoryLimiter` (the
/// shard locks of every key, in one global order) and `redis::RedisLimiter` (one Lua script).
/// Implementations are thread-safe.
class JointBackend {
 public:
  JointBackend() = default;
  JointBackend(const JointBackend&) = delete;
  JointBackend& operator=(const JointBackend&) = delete;

  /// Limiters returning the same non-null value can be checked together (every `MemoryLimiter` shares
  /// one; Redis limiters share their connection pool's or cluster router's); null means never jointly.
  /// Equal domains promise one implementation family, so `check_jointly` may treat every request's
  /// backend as its own kind.
  [[nodiscard]] virtual const void* joint_domain() const noexcept = 0;

  /// Checks every request (all of this limiter's domain) in one atomic step: if every request that is
  /// not `shadow` admits, every admitting request's consumption (cost >= 1) is kept, shadow ones included;
  /// otherwise none is. A shadow request's denial never stops the step. Fills `results` (as many as
  /// `requests`): each request's decision when the step passes; when it does not, the denying ones'
  /// decisions, and for the admitting ones their state with nothing consumed (`allowed`, current
  /// `remaining`, `retry_after` 0, current `reset_after`). A result whose outcome is `Outcome::failure_policy` is the
  /// backend's failure-policy answer, not a quota decision.
  ///
  /// Returns false, having sent nothing, when these requests cannot be one step (e.g. keys in different
  /// Redis Cluster slots, the same backend key twice); the caller then checks them one by one.
  /// Throws `std::invalid_argument` for a bad key or cost; backend failures follow each limiter's own
  /// failure policy (see the implementation).
  virtual bool check_jointly(std::span<const JointRequest> requests, std::span<CheckResult> results) = 0;

 protected:
  ~JointBackend() = default;
};

}  // namespace ratelimit
