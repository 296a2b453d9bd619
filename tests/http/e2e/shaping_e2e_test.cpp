// The example server's shaped route (--shape, include/ratelimit/README.md "Shaping") over real HTTP on loopback: the
// three outcomes of nginx's limit_req at their boundaries, on the server's manual clock; a delayed answer really is
// held for its delay; a bad --shape stops it at start.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "server_process.hpp"

namespace {

struct Answer {
  int status = 0;
  std::string outcome;
  long long delay_ms = -1;
  std::string retry_after;
  std::chrono::milliseconds took{0};
};

Answer get(httplib::Client& c, const char* path) {
  const auto start = std::chrono::steady_clock::now();
  const auto r = c.Get(path);
  Answer a;
  a.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  if (!r) return a;
  a.status = r->status;
  a.retry_after = header(r, "Retry-After");
  if (r->status == 200) {
    const auto body = nlohmann::json::parse(r->body);
    a.outcome = body.at("outcome").get<std::string>();
    a.delay_ms = body.at("delay_ms").get<long long>();
  }
  return a;
}

TEST(ShapingHttpServer, PassesDelaysAndRefusesAtTheBoundaries) {
  // 10/s (T = 100 ms), burst 3, delay 1: at one instant 2 pass, 2 are delayed (100, 200 ms), the rest get 429.
  ServerProcess server({"--manual-clock", "--no-limits", "--shape", "/shaped=10/s,burst=3,delay=1"});
  httplib::Client c("127.0.0.1", server.port());
  const Answer first = get(c, "/shaped");
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.outcome, "passed");
  const Answer last_passed = get(c, "/shaped");
  EXPECT_EQ(last_passed.outcome, "passed");
  EXPECT_EQ(last_passed.delay_ms, 0);
  const Answer first_delayed = get(c, "/shaped");
  EXPECT_EQ(first_delayed.outcome, "delayed");
  EXPECT_EQ(first_delayed.delay_ms, 100);
  EXPECT_GE(first_delayed.took, std::chrono::milliseconds(100)) << "the delayed answer was not held";
  const Answer last_delayed = get(c, "/shaped");
  EXPECT_EQ(last_delayed.outcome, "delayed");
  EXPECT_EQ(last_delayed.delay_ms, 200);
  const Answer first_refused = get(c, "/shaped");
  EXPECT_EQ(first_refused.status, 429);
  EXPECT_EQ(first_refused.retry_after, "1");  // 100 ms, in whole seconds rounded up
  EXPECT_LT(first_refused.took, std::chrono::milliseconds(100)) << "a refusal must be answered at once";
  // 99 ms on, the next still needs 201 ms: refused; 1 ms more and it is the last delayed, by 200 ms.
  advance(c, 99);
  EXPECT_EQ(get(c, "/shaped").status, 429);
  advance(c, 1);
  const Answer later = get(c, "/shaped");
  EXPECT_EQ(later.outcome, "delayed");
  EXPECT_EQ(later.delay_ms, 200);
  EXPECT_EQ(server.stop(), 0);
}

TEST(ShapingHttpServer, ABadShapeStopsTheServerAtStart) {
  EXPECT_THROW(ServerProcess({"--shape", "/shaped=10/s,burst=1,delay=2"}), std::runtime_error);
  EXPECT_THROW(ServerProcess({"--shape", "shaped=10/s"}), std::runtime_error);
}

}  // namespace
