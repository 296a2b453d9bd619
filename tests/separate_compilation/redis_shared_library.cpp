// A shared library of the user's (a plugin, a language binding) that uses RedisLimiter<Gcra> separately compiled:
// ratelimit::redis_compiled is linked into it, so its object must be position-independent.
#include <chrono>

#include <ratelimit/redis.hpp>

#include "separate_compilation/redis_shared_library.hpp"

bool separate_shared::fail_closed_denies() {
  ratelimit::redis::RedisOptions o;
  o.port = 1;  // nothing listens
  o.connect_timeout = std::chrono::milliseconds(200);
  o.on_error = ratelimit::FailurePolicy::fail_closed;
  o.on_backend_failure = ratelimit::redis::ignore_backend_failure;
  ratelimit::redis::RedisLimiter<ratelimit::Gcra> limiter(
      ratelimit::Gcra{.limit = 1, .period = std::chrono::hours(1), .burst = 1}, o);
  const ratelimit::CheckResult r = limiter.check("client");
  return r.failed() && !r.decision.allowed;
}
