// The half of the TLS ABI test built without RATELIMIT_TLS (tests/redis/CMakeLists.txt), as a consumer's unit
// compiled without the ratelimit::redis target's definitions would be.
#include <chrono>
#include <future>

#include <ratelimit/redis.hpp>

#include "tls_abi_mix.hpp"

#if defined(RATELIMIT_TLS)
#error "this unit must be built without RATELIMIT_TLS"
#endif
static_assert(!ratelimit::redis::kTlsAvailable);

namespace ratelimit_test {

std::string plain_unit_ping(int port) {
  ratelimit::redis::ConnectionOptions o;
  o.port = port;
  o.connect_timeout = std::chrono::milliseconds(5000);
  o.command_timeout = std::chrono::milliseconds(5000);
  auto c = ratelimit::redis::engine::Connection::open(o);
  return std::string(ratelimit::redis::engine::text(*c.command({"PING"})));
}

bool plain_unit_limits(int port, const std::string& key_prefix) {
  ratelimit::redis::RedisOptions o;
  o.port = port;
  o.key_prefix = key_prefix;
  o.on_error = ratelimit::FailurePolicy::raise;
  ratelimit::redis::RedisLimiter limiter(ratelimit::FixedWindow{.limit = 1, .window = std::chrono::hours(1)}, o);
  const bool first = limiter.allow("k").allowed;
  std::promise<bool> second;
  limiter.allow_async("k", 1, [&second](std::exception_ptr e, ratelimit::Decision d) {
    if (e) {
      second.set_exception(e);
    } else {
      second.set_value(d.allowed);
    }
  });
  return first && !second.get_future().get();
}

}  // namespace ratelimit_test
