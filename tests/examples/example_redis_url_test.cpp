// Host and port parsing of the examples' command lines (redis_quickstart, http_server --redis).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "../../examples/address.hpp"

namespace {

TEST(ExampleAddress, ParsesNamesIpv4AndBracketedIpv6) {
  auto a = example::parse_address("127.0.0.1:6420", 6379, "--redis");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 6420);
  a = example::parse_address("redis.internal", 6379, "--redis");
  EXPECT_EQ(a.host, "redis.internal");
  EXPECT_EQ(a.port, 6379);
  // "[::1]:6420" was split at the last colon into host "[::1]" (brackets kept).
  a = example::parse_address("[::1]:6420", 6379, "--redis");
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.port, 6420);
  a = example::parse_address("[::1]", 6379, "--redis");
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.port, 6379);
  a = example::parse_address("::1", 6379, "--redis");  // bare IPv6: no port
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.port, 6379);
  a = example::parse_address("h:65535", 1, "x");
  EXPECT_EQ(a.port, 65535);
}

TEST(ExampleAddress, RefusesBadPortsByName) {
  // "127.0.0.1:abc" died of an uncaught std::stoi (abort, rc 134).
  for (const char* bad : {"127.0.0.1:abc", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:-1",
                          "127.0.0.1:99999999999999999999", "127.0.0.1:80x", ":6379", "", "[::1", "[::1]x",
                          "[::1]:", "[]:6379", "[::1]:abc"}) {
    try {
      (void)example::parse_address(bad, 6379, "--redis");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--redis: ", 0), 0u) << e.what();
    }
  }
}

}  // namespace
