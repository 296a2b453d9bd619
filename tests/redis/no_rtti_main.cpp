// Built with -fno-rtti (tests/redis/CMakeLists.txt): the Redis backend and layered checks over it need no
// RTTI. Two Redis layers on one pool whose server refuses connections: the joint check runs (one script
// call, which fails) and answers fail_open for both layers. Exits non-zero on any mismatch.
#include <chrono>
#include <cstdio>
#include <memory>

#include <ratelimit/layers.hpp>
#include <ratelimit/redis.hpp>

using namespace std::chrono_literals;

int main() {
  ratelimit::redis::RedisOptions o;
  o.port = 1;  // nothing listens there: connection refused
  o.connect_timeout = 100ms;
  o.on_error = ratelimit::FailurePolicy::fail_open;
  auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(o.connection(), o.limiter());
  ratelimit::redis::RedisLimiter a(ratelimit::FixedWindow{.limit = 5, .window = 1s}, pool, "a:");
  ratelimit::redis::RedisLimiter b(ratelimit::Gcra{.limit = 5, .period = 1s, .burst = 2}, pool, "b:");
  ratelimit::LimiterLayer la(a, "a");
  ratelimit::LimiterLayer lb(b, "b");
  const ratelimit::LayeredDecision d = ratelimit::check_layers({{&la, "k"}, {&lb, "k"}});
  int failures = 0;
  auto check = [&](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "no_rtti: FAILED %s\n", what);
      ++failures;
    }
  };
  check(static_cast<bool>(d), "fail_open admits");
  check(d.layers[0].backend_failed && d.layers[1].backend_failed, "both layers report the backend failure");
  check(a.stats().failures == 1 && b.stats().failures == 1, "one failure counted per limiter");
  if (failures == 0) std::printf("no_rtti: OK\n");
  return failures == 0 ? 0 : 1;
}
