// The global environment of ratelimit_redis_tests: starts one redis-server for the process, or skips
// every test with a clear message when there is none, except under CI where that is a failure.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "redis_server.hpp"

namespace ratelimit_test {
namespace {

std::unique_ptr<RedisServer>& server_slot() {
  static std::unique_ptr<RedisServer> server;
  return server;
}
std::string& binary_slot() {
  static std::string binary;
  return binary;
}

class RedisEnvironment : public testing::Environment {
 public:
  void SetUp() override {
    const auto binary = find_redis_server();
    if (!binary) {
      if (std::getenv("CI") != nullptr) {
        // Not FAIL() here: gtest would then mark every test SKIPPED (and CTest believe it). Each test's
        // RATELIMIT_REQUIRE_REDIS() fails instead.
        std::fprintf(stderr, "CI is set but there is no redis-server on PATH (or $RATELIMIT_REDIS_SERVER): "
                             "every Redis test fails (apt-get install redis-server)\n");
        return;
      }
      GTEST_SKIP() << "redis-server not found on PATH (or $RATELIMIT_REDIS_SERVER): skipping every Redis "
                      "test. Install redis-server to run them.";
    }
    binary_slot() = *binary;
    server_slot() = std::make_unique<RedisServer>(*binary);
  }
  void TearDown() override { server_slot().reset(); }
};

[[maybe_unused]] testing::Environment* const environment =
    testing::AddGlobalTestEnvironment(new RedisEnvironment);

}  // namespace

RedisServer* shared_redis() { return server_slot().get(); }
const std::string& redis_server_binary() { return binary_slot(); }

}  // namespace ratelimit_test
