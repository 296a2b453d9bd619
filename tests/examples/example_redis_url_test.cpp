// The examples' --redis values (redis_quickstart, http_server --redis): a Redis URL, or HOST[:PORT] as short
// for redis://HOST[:PORT]; the URL itself is ConnectionOptions::from_url's (tests/redis/connection_options_test).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "../../examples/redis_url.hpp"

namespace {

using example::redis_connection;

TEST(ExampleRedisUrl, UrlsAndShorthands) {
  auto o = redis_connection("127.0.0.1:6420", "--redis");
  EXPECT_EQ(o.host, "127.0.0.1");
  EXPECT_EQ(o.port, 6420);
  o = redis_connection("redis.internal", "--redis");
  EXPECT_EQ(o.host, "redis.internal");
  EXPECT_EQ(o.port, 6379);
  o = redis_connection("[::1]:6420", "--redis");
  EXPECT_EQ(o.host, "::1");
  EXPECT_EQ(o.port, 6420);
  o = redis_connection("[::1]", "--redis");
  EXPECT_EQ(o.host, "::1");
  EXPECT_EQ(o.port, 6379);
  o = redis_connection("::1", "--redis");  // bare IPv6: no port
  EXPECT_EQ(o.host, "::1");
  EXPECT_EQ(o.port, 6379);
  o = redis_connection("h:65535", "x");
  EXPECT_EQ(o.port, 65535);
  o = redis_connection("rediss://app:p%40ss@cache:6380/2", "--redis");
  EXPECT_TRUE(o.tls.enabled);
  EXPECT_EQ(o.user, "app");
  EXPECT_EQ(o.password, "p@ss");
  EXPECT_EQ(o.database, 2);
  o = redis_connection("unix:///run/redis.sock?db=1", "--redis");
  EXPECT_EQ(o.unix_socket, "/run/redis.sock");
  EXPECT_EQ(o.database, 1);
}

TEST(ExampleRedisUrl, RefusesBadValuesByName) {
  // "127.0.0.1:abc" died of an uncaught std::stoi (abort, rc 134).
  for (const char* bad : {"127.0.0.1:abc", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:-1",
                          "127.0.0.1:99999999999999999999", "127.0.0.1:80x", ":6379", "", "[::1", "[::1]x",
                          "[::1]:", "[]:6379", "[::1]:abc", "http://h", "redis://u:pw@h:abc"}) {
    try {
      (void)redis_connection(bad, "--redis");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind("--redis: ConnectionOptions::from_url: ", 0), 0u) << m;
      EXPECT_NE(m.find("HOST, HOST:PORT or [IPv6]:PORT"), std::string::npos) << m;
      EXPECT_EQ(m.find(":pw@"), std::string::npos) << m;
    }
  }
}

}  // namespace
