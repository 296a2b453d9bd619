// Shared rate limiting through Redis: every process using the same server and key prefix shares each
// key's limit. Usage: redis_quickstart [URL]   (default redis://127.0.0.1:6379; also rediss://...,
// unix:///path?db=N, or HOST[:PORT]; include/ratelimit/redis/README.md "Connection options")
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <ratelimit/redis.hpp>

#include "redis_url.hpp"

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  ratelimit::redis::RedisOptions options;
  const std::string where = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
  if (argc > 2 || where == "--help" || where == "-h") {
    std::fprintf(stderr,
                 "usage: redis_quickstart [URL]   (default redis://127.0.0.1:6379; redis://user:password@host:port/db, "
                 "rediss://..., unix:///path?db=N, or HOST[:PORT])\n");
    return argc > 2 ? 2 : 0;
  }
  try {
    options.connection() = example::redis_connection(where, "address");
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "redis_quickstart: %s\n", e.what());
    return 2;
  }
  options.key_prefix = "quickstart:";
  options.on_error = ratelimit::FailurePolicy::raise;  // a demo should say when Redis is not there

  // 5 requests per second on average, bursts of up to 5; time from Redis's own clock (the default).
  ratelimit::redis::RedisLimiter limiter(ratelimit::Gcra{.limit = 5, .period = 1s, .burst = 5}, options);
  try {
    limiter.wait_ready(std::chrono::seconds(2));  // at start-up: connected, logged in, script loaded; or why not
    limiter.reset("client-42");
    for (int i = 1; i <= 7; ++i) {
      const ratelimit::Decision d = limiter.allow("client-42");
      std::printf("request %d: %-7s remaining=%lld retry_after=%.0fms reset_after=%.0fms\n", i,
                  d ? "allowed" : "DENIED", static_cast<long long>(d.remaining),
                  std::chrono::duration<double, std::milli>(d.retry_after).count(),
                  std::chrono::duration<double, std::milli>(d.reset_after).count());
    }
    // Several checks in one round trip (e.g. one per tenant of a batch request).
    const ratelimit::redis::Request batch[] = {{"tenant-a", 1}, {"tenant-b", 2}, {"tenant-a", 1}};
    for (const ratelimit::Decision& d : limiter.allow_many(batch)) {
      std::printf("batch: %s remaining=%lld\n", d ? "allowed" : "DENIED", static_cast<long long>(d.remaining));
    }
    std::printf("Redis key of client-42: %s\n", limiter.redis_key("client-42").c_str());
  } catch (const ratelimit::BackendError& e) {
    std::fprintf(stderr, "cannot use Redis: %s\n", e.what());  // names the server, never the password
    return 1;
  }
  return 0;
}
