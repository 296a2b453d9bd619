// End to end: the example server's /backend (examples/README.md, include/ratelimit/concurrency/README.md "Adaptive
// limits in the limiter"): a simulated backend behind an in-flight limit, static or adaptive, its refusals and its
// metrics; the server in a child process on a free loopback port.
#include <gtest/gtest.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <thread>

#include "server_process.hpp"

namespace {

using namespace std::chrono_literals;

/// The value of the sample `name{limiter="backend"...}` in the server's /metrics text; "<absent>" if none.
std::string backend_metric(httplib::Client& c, const std::string& name, const std::string& more_labels = "") {
  const auto r = c.Get("/metrics");
  if (!r) return "<no answer>";
  const std::string key = name + "{limiter=\"backend\"" + more_labels + "} ";
  const auto at = r->body.find(key);
  if (at == std::string::npos) return "<absent>";
  return r->body.substr(at + key.size(), r->body.find('\n', at) - at - key.size());
}

TEST(AdaptiveBackendE2E, StaticLimitRefusesBeyondItWithTheConcurrencyProblem) {
  ServerProcess server({"--backend-capacity", "1", "--backend-ms", "1500", "--backend-limit", "1"});
  int first = 0;
  std::thread running([&] {
    httplib::Client c("127.0.0.1", server.port());
    const auto r = c.Get("/backend");
    first = r ? r->status : -1;
  });
  std::this_thread::sleep_for(500ms);  // the first request is in the backend
  httplib::Client c("127.0.0.1", server.port());
  const auto r = c.Get("/backend");
  running.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  const auto body = nlohmann::json::parse(r->body);
  EXPECT_EQ(body.at("violated-policies"), nlohmann::json::array({"backend-concurrency"}));
  EXPECT_EQ(body.at("in-flight"), 1);
  EXPECT_EQ(first, 200);
  EXPECT_EQ(backend_metric(c, "ratelimit_concurrency_limit"), "1");
  EXPECT_EQ(backend_metric(c, "ratelimit_concurrency_denied_total"), "1");
  EXPECT_EQ(backend_metric(c, "ratelimit_concurrency_adaptive_limit"), "<absent>");
  const auto stats = c.Get("/__backend/stats?slo_us=10000000");
  ASSERT_TRUE(stats);
  EXPECT_EQ(nlohmann::json::parse(stats->body).at("served"), 1);
  EXPECT_EQ(server.stop(), 0);
}

TEST(AdaptiveBackendE2E, ShadowEnforcesTheStaticLimitAndExportsTheAdaptiveOne) {
  ServerProcess server(
      {"--backend-capacity", "4", "--backend-ms", "2", "--backend-limit", "aimd", "--backend-shadow", "2"});
  httplib::Client c("127.0.0.1", server.port());
  for (int i = 0; i < 5; ++i) {
    const auto r = c.Get("/backend");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
  }
  EXPECT_EQ(backend_metric(c, "ratelimit_concurrency_limit"), "2");                        // enforced: the static limit
  const std::string would_be = backend_metric(c, "ratelimit_concurrency_adaptive_limit");  // AIMD's, reported
  ASSERT_NE(would_be.find_first_of("0123456789"), std::string::npos) << would_be;
  EXPECT_GE(std::stoll(would_be), 1);
  EXPECT_EQ(backend_metric(c, "ratelimit_concurrency_adaptive_shadow"), "1");
  EXPECT_EQ(backend_metric(c, "ratelimit_concurrency_releases_total", ",outcome=\"succeeded\""), "5");
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
