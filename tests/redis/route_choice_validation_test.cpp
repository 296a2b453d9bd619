// Options that ask for two routes at once, or for a route by half, are refused naming the field, whichever path
// builds the route (as TLS files without `tls.enabled` are, include/ratelimit/redis/README.md "Connection options"):
// a forgotten switch must not silently give a different topology. No server needed: nothing connects.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include <ratelimit/redis.hpp>

namespace {
namespace route_choice_validation {

using ratelimit::redis::RedisOptions;
using Limiter = ratelimit::redis::RedisLimiter<ratelimit::Gcra>;
const ratelimit::Gcra kPolicy{.limit = 10, .period = std::chrono::seconds(1), .burst = 10};

/// The message of the `std::invalid_argument` that making a limiter with `o` throws, or "" when it is made.
std::string refusal(const RedisOptions& o) {
  try {
    Limiter limiter(kPolicy, o);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// SentinelRoute refuses cluster_nodes ("Redis Cluster and Sentinel exclude each other"); the same options
// reach the ClusterRouter first when cluster_nodes is set, which ignores the sentinel settings.
TEST(RouteChoiceValidation, ClusterAndSentinelTogetherAreRefused) {
  RedisOptions o;
  o.cluster_nodes = {{"127.0.0.1", 7000}};
  o.sentinel.master_name = "mymaster";
  o.sentinel.nodes = {{"127.0.0.1", 26379}};
  EXPECT_NE(refusal(o), "") << "a cluster router was made, the sentinel settings ignored";
}

// Sentinels named but no master name: the limiter goes to host:port (127.0.0.1:6379 by default) in silence.
TEST(RouteChoiceValidation, SentinelNodesWithoutMasterNameAreRefused) {
  RedisOptions o;
  o.sentinel.nodes = {{"127.0.0.1", 26379}};
  const std::string why = refusal(o);
  EXPECT_NE(why.find("master_name"), std::string::npos)
      << "sentinels set without SentinelOptions.master_name were ignored (refusal: '" << why << "')";
}

}  // namespace route_choice_validation
}  // namespace
