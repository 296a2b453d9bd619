// A user's service code: links ratelimit::http and writes a 429 problem body (problem.hpp, which needs
// nlohmann/json through that target). Exits non-zero on any mismatch.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <ratelimit/http.hpp>
#include <ratelimit/http/problem.hpp>
#include <ratelimit/ratelimit.hpp>

using namespace std::chrono_literals;

int main() {
  int failures = 0;
  auto check = [&](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "consumer_http: FAILED %s\n", what);
      ++failures;
    }
  };
  // FixedWindow{1, 60 s}: the second request at t = 0 is denied and may retry at the window end, 60 s.
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter limiter(ratelimit::FixedWindow{.limit = 1, .window = 60s}, {}, clock);
  check(static_cast<bool>(limiter.allow("ip")), "first request allowed");
  const ratelimit::Decision denied = limiter.allow("ip");
  check(!denied.allowed, "second request denied");
  const std::vector<std::string> violated{"per-ip"};
  const auto body = nlohmann::json::parse(ratelimit::http::quota_exceeded_json(violated, denied, "/search"));
  check(body.at("status") == 429, "status 429");
  check(body.at("retry-after") == 60, "retry-after 60");
  check(body.at("violated-policies") == nlohmann::json::array({"per-ip"}), "violated-policies");
  check(ratelimit::http::retry_after_value(denied) == "60", "Retry-After 60");
  if (failures == 0) std::printf("consumer_http: problem body OK\n");
  return failures == 0 ? 0 : 1;
}
