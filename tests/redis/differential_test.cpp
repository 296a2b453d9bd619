// Differential traces (tests/redis/differential_trace.hpp) against the process's redis-server.
#include <gtest/gtest.h>

#include "differential_trace.hpp"
#include "test_support.hpp"

namespace {

using namespace ratelimit_test::differential;

TraceTarget single_server() {
  return {[] { return ratelimit_test::client_options(*ratelimit_test::shared_redis()); },
          [](const std::string& prefix) {
            auto admin = ratelimit_test::shared_redis()->admin();
            return ratelimit_test::expect_all_keys_expire(admin, prefix);
          }};
}

class Differential : public testing::Test {
 protected:
  void SetUp() override { RATELIMIT_REQUIRE_REDIS(); }
};

TEST_F(Differential, FixedWindow) { differential_fixed_window(single_server()); }
TEST_F(Differential, SlidingWindowLog) { differential_sliding_window_log(single_server()); }
TEST_F(Differential, SlidingWindowCounter) { differential_sliding_window_counter(single_server()); }
TEST_F(Differential, TokenBucket) { differential_token_bucket(single_server()); }
TEST_F(Differential, Gcra) { differential_gcra(single_server()); }

}  // namespace
