// One program whose units use the Redis backend built with and without RATELIMIT_TLS (include/ratelimit/redis/README.md
// "TLS"): a consumer that compiles one file against the ratelimit::redis target and another without its definitions.
// Each unit must get its own variant whichever unit the linker sees first (tests/redis/CMakeLists.txt builds both
// orders, at -O0 so that no call is inlined away from the linker's choice).
#include <gtest/gtest.h>

#include <chrono>
#include <future>

#include <ratelimit/redis.hpp>

#include "test_support.hpp"
#include "tls_abi_mix.hpp"
#include "tls_support.hpp"

static_assert(ratelimit::redis::kTlsAvailable);

namespace {

TEST(TlsAbiMix, EachUnitKeepsItsOwnVariantOfTheRedisBackend) {
  RATELIMIT_REQUIRE_REDIS();
  if (!ratelimit_test::have_openssl_command()) GTEST_SKIP() << "no openssl command to make certificates";
  const ratelimit_test::TlsFiles files;
  ratelimit_test::TlsRedisServer server(ratelimit_test::redis_server_binary(), files);
  const int plain_port = server.server().port();

  EXPECT_EQ(ratelimit_test::plain_unit_ping(plain_port), "PONG");
  EXPECT_TRUE(ratelimit_test::plain_unit_limits(plain_port, ratelimit_test::unique_prefix()));

  const auto o = ratelimit_test::tls_options(ratelimit_test::client_options(server.server()), server, files);
  auto c = ratelimit::redis::engine::Connection::open(o);
  EXPECT_EQ(ratelimit::redis::engine::text(*c.command({"PING"})), "PONG");
  ratelimit::redis::RedisLimiter limiter(ratelimit::FixedWindow{.limit = 1, .window = std::chrono::hours(1)}, o);
  EXPECT_TRUE(limiter.allow("k").allowed);
  std::promise<bool> second;
  limiter.allow_async("k", 1, [&second](std::exception_ptr, ratelimit::Decision d) { second.set_value(d.allowed); });
  EXPECT_FALSE(second.get_future().get());
}

}  // namespace
