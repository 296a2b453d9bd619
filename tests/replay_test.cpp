// The access-log replay (examples/replay) against straightforward recounts of the same real traffic.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <ratelimit/ratelimit.hpp>

#include "../examples/access_log.hpp"
#include "../examples/replay.hpp"

using namespace std::chrono_literals;

namespace {

std::string traffic() {
  std::ifstream in(RATELIMIT_TRAFFIC_LOG, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

using Request = std::pair<std::string, std::int64_t>;  // client, epoch seconds

// An independent reading of the log: a regular expression for the combined format, and the date by
// std::get_time, in time order.
std::vector<Request> requests_by_regex(const std::string& log, std::int64_t& malformed) {
  static const std::regex kCombined(
      R"re(^(\S+) \S+ \S+ \[(\d\d/\w\w\w/\d{4}:\d\d:\d\d:\d\d) \+0000\] "[^"]*" \d{3} \S+ "[^"]*" "[^"]*"$)re");
  std::vector<Request> out;
  std::istringstream lines(log);
  std::string line;
  malformed = 0;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, kCombined)) {
      ++malformed;
      continue;
    }
    std::tm tm{};
    std::istringstream(m[2].str()) >> std::get_time(&tm, "%d/%b/%Y:%H:%M:%S");
    out.emplace_back(m[1].str(), static_cast<std::int64_t>(timegm(&tm)));
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  return out;
}

TEST(AccessLog, ParsesCombinedAndCommonFormat) {
  const auto combined = access_log::parse_line(
      R"(198.18.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /a.gif?x=1 HTTP/1.0" 200 2326 "http://r/" "Agent \"quoted\"")");
  ASSERT_TRUE(combined);
  EXPECT_EQ(combined->client, "198.18.0.1");
  EXPECT_EQ(combined->method, "GET");
  EXPECT_EQ(combined->target, "/a.gif?x=1");
  EXPECT_EQ(combined->status, 200);
  EXPECT_EQ(combined->user_agent, "Agent \"quoted\"");
  // 13:55:36 at -0700 is 20:55:36 UTC.
  EXPECT_EQ(combined->time, std::chrono::sys_days{std::chrono::year{2000} / 10 / 10} + 20h + 55min + 36s);

  const auto common = access_log::parse_line(R"(::1 - - [01/Jan/2024:00:00:00 +0100] "POST / HTTP/1.1" 404 -)");
  ASSERT_TRUE(common);
  EXPECT_EQ(common->client, "::1");
  EXPECT_EQ(common->user_agent, "");
  EXPECT_EQ(common->time, std::chrono::sys_days{std::chrono::year{2023} / 12 / 31} + 23h);
}

TEST(AccessLog, RejectsMalformedLines) {
  for (const char* line : {
           "",
           "garbage",
           R"(1.2.3.4 - - [32/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 1 "-" "ua")",   // day 32
           R"(1.2.3.4 - - [17/Mai/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 1 "-" "ua")",   // month
           R"(1.2.3.4 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 2000 1 "-" "ua")",  // status
           R"(1.2.3.4 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 1 "-" "truncated)",
           R"(1.2.3.4 - - [17/May/2015:10:05:03 +0000 "GET / HTTP/1.1" 200 1)",
       }) {
    EXPECT_FALSE(access_log::parse_line(line)) << line;
  }
}

TEST(Replay, FixedWindowMatchesPerMinuteRecount) {
  const std::string log = traffic();
  constexpr std::int64_t kLimit = 30;
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter limiter(ratelimit::FixedWindow{.limit = kLimit, .window = 1min}, {}, clock);
  std::istringstream in(log);
  const replay::Report report = replay::run(in, limiter, clock);

  std::int64_t malformed = 0;
  const std::vector<Request> requests = requests_by_regex(log, malformed);
  std::map<std::pair<std::string, std::int64_t>, std::int64_t> per_minute;
  std::map<std::string, std::int64_t> denied_by_client;
  std::int64_t denied = 0;
  for (const auto& [client, at] : requests) {
    if (++per_minute[{client, at / 60}] > kLimit) {
      ++denied;
      ++denied_by_client[client];
    }
  }
  EXPECT_EQ(report.malformed, malformed);
  EXPECT_EQ(report.admitted + report.denied, static_cast<std::int64_t>(requests.size()));
  EXPECT_EQ(report.denied, denied);
  EXPECT_GT(denied, 0) << "the sample must exercise denials";
  for (const auto& [client, counts] : report.clients) {
    EXPECT_EQ(counts.denied, denied_by_client[client]) << client;
  }
}

TEST(Replay, SlidingWindowLogMatchesBruteForceRecount) {
  const std::string log = traffic();
  constexpr std::int64_t kLimit = 20;
  constexpr std::int64_t kWindow = 60;
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter limiter(ratelimit::SlidingWindowLog{.limit = kLimit, .window = 60s}, {}, clock);
  std::istringstream in(log);
  const replay::Report report = replay::run(in, limiter, clock);

  std::int64_t malformed = 0;
  std::map<std::string, std::vector<std::int64_t>> admitted;  // per client, admitted times
  std::map<std::string, std::int64_t> denied_by_client;
  for (const auto& [client, time] : requests_by_regex(log, malformed)) {
    const std::int64_t at = time;  // clang 14 cannot capture a structured binding
    std::vector<std::int64_t>& times = admitted[client];
    const auto in_window = std::count_if(times.begin(), times.end(), [&](std::int64_t s) { return s > at - kWindow; });
    if (in_window < kLimit) {
      times.push_back(at);
    } else {
      ++denied_by_client[client];
    }
  }
  std::int64_t denied = 0;
  for (const auto& [client, counts] : report.clients) {
    EXPECT_EQ(counts.denied, denied_by_client[client]) << client;
    denied += denied_by_client[client];
  }
  EXPECT_EQ(report.denied, denied);
  EXPECT_GT(denied, 0);
}

}  // namespace
