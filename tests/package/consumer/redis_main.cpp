// A user's Redis program built with a plain compiler line from pkg-config (ratelimit-redis.pc): it compiles
// and links (hiredis, and OpenSSL when the package has TLS), has TLS exactly when the package was built with
// it (EXPECTED_TLS), reads a URL, and answers with the failure policy when nothing listens. Needs no server. Built
// header-only, and with RATELIMIT_SEPARATE_COMPILATION beside a unit that includes <ratelimit/redis/src.hpp>.
#include <chrono>
#include <cstdio>

#include <ratelimit/redis.hpp>

using namespace std::chrono_literals;

int main() {
  int failures = 0;
  auto check = [&](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "consumer_redis: FAILED %s\n", what);
      ++failures;
    }
  };
  check(ratelimit::redis::kTlsAvailable == (EXPECTED_TLS != 0), "kTlsAvailable as the package was built");

  ratelimit::redis::RedisOptions o;
  o.connection() = ratelimit::redis::ConnectionOptions::from_url("redis://127.0.0.1:1/0");  // nothing listens
  o.on_error = ratelimit::FailurePolicy::fail_closed;
  o.on_backend_failure = ratelimit::redis::ignore_backend_failure;
  ratelimit::redis::RedisLimiter limiter(ratelimit::Gcra{.limit = 5, .period = 1s, .burst = 5}, o);
  const ratelimit::CheckResult r = limiter.check("user", 1);
  check(!r.decision.allowed && r.outcome == ratelimit::Outcome::failure_policy, "fail_closed denies");

  if (failures == 0) std::printf("consumer_redis: ratelimit %s OK\n", ratelimit::version_string);
  return failures == 0 ? 0 : 1;
}
