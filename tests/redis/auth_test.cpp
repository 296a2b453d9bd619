// ACL users (include/ratelimit/redis/README.md "Redis backend", options): a `user` without `password` authenticates as
// that user (Redis accepts any password, the empty one too, for a `nopass` user); a user that has a password is refused
// clearly when none is given. Never silently the `default` user.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <unistd.h>

#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using ratelimit::FixedWindow;
using ratelimit::ManualClock;
using ratelimit::redis::RedisLimiter;
using ratelimit_test::client_options;
using ratelimit_test::shared_redis;
using namespace std::chrono_literals;

// The users named in CLIENT LIST (one "user=<name>" per connection).
std::string client_users(ratelimit::redis::engine::Connection& admin) {
  return std::string(ratelimit::redis::engine::text(*admin.command({"CLIENT", "LIST"})));
}

TEST(RedisAuth, UserWithoutPasswordRunsAsThatUser) {
  RATELIMIT_REQUIRE_REDIS();
  auto admin = shared_redis()->admin();
  auto o = client_options(*shared_redis());
  const std::string user = "rl_nopass_" + std::to_string(::getpid());
  ASSERT_EQ(ratelimit::redis::engine::text(
                *admin.command({"ACL", "SETUSER", user, "reset", "on", "nopass", "~" + o.key_prefix + "*", "+evalsha",
                                "+eval", "+get", "+set", "+del"})),
            "OK");
  o.user = user;
  {
    ManualClock clock;
    RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 5, .window = 1min}, o, clock);
    EXPECT_EQ(l.allow("k").remaining, 4);
    EXPECT_NE(client_users(admin).find("user=" + user), std::string::npos) << client_users(admin);
    // Its permissions hold: keys outside its pattern are refused (the default user could write them).
    auto other = o;
    other.key_prefix = "elsewhere:";
    RedisLimiter<FixedWindow, ManualClock> outside(FixedWindow{.limit = 5, .window = 1min}, other, clock);
    EXPECT_THROW((void)outside.allow("k"), ratelimit::BackendError);
  }
  (void)admin.command({"ACL", "DELUSER", user});
}

TEST(RedisAuth, UserWithPasswordButNoneGivenIsRefused) {
  RATELIMIT_REQUIRE_REDIS();
  auto admin = shared_redis()->admin();
  auto o = client_options(*shared_redis());
  const std::string user = "rl_haspw_" + std::to_string(::getpid());
  ASSERT_EQ(
      ratelimit::redis::engine::text(*admin.command({"ACL", "SETUSER", user, "reset", "on", ">secret", "~*", "+@all"})),
      "OK");
  o.user = user;
  {
    RedisLimiter<FixedWindow> l(FixedWindow{.limit = 5, .window = 1min}, o);
    try {
      (void)l.allow("k");
      ADD_FAILURE() << "ran without authenticating as " << user;
    } catch (const ratelimit::BackendError& e) {
      EXPECT_EQ(e.cause(), ratelimit::BackendErrorCause::reply);
      EXPECT_NE(std::string(e.what()).find("AUTH"), std::string::npos) << e.what();
    }
  }
  (void)admin.command({"ACL", "DELUSER", user});
}

}  // namespace
