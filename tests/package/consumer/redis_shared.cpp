// A shared library of the consumer's that makes a RedisLimiter<Gcra>, linked with ratelimit::redis_compiled.
#include <chrono>

#include <ratelimit/redis.hpp>

bool consumer_shared_denies_unreachable() {
  ratelimit::redis::RedisOptions o;
  o.port = 1;
  o.on_error = ratelimit::FailurePolicy::fail_closed;
  o.on_backend_failure = ratelimit::redis::ignore_backend_failure;
  ratelimit::redis::RedisLimiter<ratelimit::Gcra> limiter(
      ratelimit::Gcra{.limit = 1, .period = std::chrono::hours(1), .burst = 1}, o);
  return !limiter.check("client").decision.allowed;
}
