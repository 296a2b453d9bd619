// The access-log replay (examples/replay) against straightforward recounts of the same real traffic.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ratelimit/ratelimit.hpp>

#include "../../examples/access_log.hpp"
#include "../../examples/replay.hpp"

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

TEST(AccessLog, TimesANanosecondClockCannotHoldAreMalformed) {
  // 2263 wrapped around in the conversion to nanoseconds (signed overflow) and looked like 1678.
  auto at = [](const char* when) {
    return access_log::parse_line(std::string("1.2.3.4 - - [") + when + R"(] "GET / HTTP/1.1" 200 1 "-" "ua")");
  };
  ASSERT_TRUE(at("01/Jan/2262:00:00:00 +0000"));
  EXPECT_EQ(at("01/Jan/2262:00:00:00 +0000")->time, std::chrono::sys_days{std::chrono::year{2262} / 1 / 1});
  EXPECT_TRUE(at("11/Apr/2262:23:47:16 +0000"));  // the last second INT64_MAX ns holds
  EXPECT_FALSE(at("11/Apr/2262:23:47:17 +0000"));
  EXPECT_FALSE(at("01/Jan/2263:00:00:00 +0000"));
  EXPECT_FALSE(at("01/Jan/9999:00:00:00 +0000"));
  EXPECT_FALSE(at("01/Jan/1600:00:00:00 +0000"));
  EXPECT_TRUE(at("01/Jan/1700:00:00:00 +0000"));
}

TEST(AccessLog, TimeZoneHoursAndMinutesAreRangeChecked) {
  auto at = [](const char* zone) {
    return access_log::parse_line(std::string("1.2.3.4 - - [17/May/2015:10:05:03 ") + zone +
                                  R"(] "GET / HTTP/1.1" 200 1 "-" "ua")");
  };
  for (const char* bad : {"+9999", "+2400", "-2400", "+0060", "+0099", "-9900"}) EXPECT_FALSE(at(bad)) << bad;
  const auto sys = std::chrono::sys_days{std::chrono::year{2015} / 5 / 17};
  ASSERT_TRUE(at("+1400"));
  EXPECT_EQ(at("+1400")->time, sys + 10h + 5min + 3s - 14h);
  ASSERT_TRUE(at("-0930"));
  EXPECT_EQ(at("-0930")->time, sys + 10h + 5min + 3s + 9h + 30min);
  EXPECT_TRUE(at("+2359"));
}

TEST(Replay, TimestampsAfter2262DoNotWrapAround) {
  // Two requests of one client a year apart at limit 1 per minute: both are admitted, or the later one
  // is malformed; before, 2263 wrapped to 1678 and the client was denied.
  std::istringstream in(R"(1.2.3.4 - - [01/Jan/2262:00:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "ua"
1.2.3.4 - - [01/Jan/2263:00:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "ua"
)");
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter limiter(ratelimit::FixedWindow{.limit = 1, .window = 60s}, {}, clock);
  const replay::Report report = replay::run(in, limiter, clock);
  EXPECT_EQ(report.malformed, 1);
  EXPECT_EQ(report.admitted, 1);
  EXPECT_EQ(report.denied, 0);
}

// A log line at the earliest and the latest second the parser accepts.
std::string edge_line(const char* when, const char* client = "1.2.3.4") {
  return std::string(client) + " - - [" + when + R"(] "GET / HTTP/1.1" 200 1 "-" "ua")" + "\n";
}
constexpr const char* kFirstSecond = "21/Sep/1677:00:12:44 +0000";
constexpr const char* kLastSecond = "11/Apr/2262:23:47:16 +0000";

TEST(Replay, TimesAtBothEndsOfTheParsersRangeReplay) {
  // 2262 minus 1677 is more than int64 nanoseconds hold: the step between them overflowed, and so did
  // t - window at 1677 (then front() of an empty deque).
  std::istringstream in(edge_line(kFirstSecond) + edge_line(kLastSecond));
  const replay::Traffic t = replay::read_traffic(in, replay::KeyField::client);
  ASSERT_EQ(t.time_ns.size(), 2u);
  EXPECT_EQ(t.malformed, 0);
  EXPECT_EQ(t.resolution_ns, std::numeric_limits<std::int64_t>::max());  // a step beyond int64: capped
  const std::int64_t window = std::chrono::nanoseconds(60s).count();
  EXPECT_EQ(replay::offered_peaks(t, window), std::vector<std::int64_t>{1});
  const replay::Coverage c = replay::coverage(t, window);
  EXPECT_EQ(c.active, 2);
  EXPECT_EQ(c.adjacent, 0);
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter limiter(ratelimit::FixedWindow{.limit = 1, .window = 60s}, {}, clock);
  const replay::PolicyRun r = replay::run(t, limiter, clock, window);
  EXPECT_EQ(r.admitted, 2);
  EXPECT_EQ(r.peak_admitted, std::vector<std::int64_t>{1});

  std::istringstream steps(edge_line(kFirstSecond) + edge_line("21/Sep/1677:00:12:45 +0000") + edge_line(kLastSecond));
  EXPECT_EQ(replay::read_traffic(steps, replay::KeyField::client).resolution_ns, 1'000'000'000);
}

TEST(Replay, TheEdgesOfTheRangeLimitAsAnywhereElse) {
  // At either end: a second request in the same minute is denied, one in the next minute admitted (16 s
  // after the first at 1677, 76 s at 2262: the admitted burst within 60 s is 2, then 1).
  for (const auto& [first, same, next, peak] :
       {std::tuple{kFirstSecond, "21/Sep/1677:00:12:50 +0000", "21/Sep/1677:00:13:00 +0000", 2},
        std::tuple{"11/Apr/2262:23:46:00 +0000", "11/Apr/2262:23:46:59 +0000", kLastSecond, 1}}) {
    std::istringstream in(edge_line(first) + edge_line(same) + edge_line(next));
    const replay::Traffic t = replay::read_traffic(in, replay::KeyField::client);
    ratelimit::ManualClock clock;
    ratelimit::MemoryLimiter limiter(ratelimit::FixedWindow{.limit = 1, .window = 60s}, {}, clock);
    const replay::PolicyRun r = replay::run(t, limiter, clock, std::chrono::nanoseconds(60s).count());
    EXPECT_EQ(r.allowed, (std::vector<bool>{true, false, true})) << first;
    EXPECT_EQ(r.peak_admitted, std::vector<std::int64_t>{peak}) << first;
  }
}

TEST(Replay, LongKeysAreCountedApartAndTheReplayGoesOn) {
  // Keyed by path, one 595-byte path stopped the whole run with "invalid policy: key: 595 bytes ...".
  const std::string line = R"(1.2.3.4 - - [17/May/2015:10:05:03 +0000] "GET )";
  const std::string rest = R"( HTTP/1.1" 200 1 "-" "ua")";
  std::istringstream in(line + "/a" + rest + "\n" + line + "/" + std::string(594, 'x') + rest + "\n" + line + "/a" +
                        rest + "\n" + line + "/b" + rest + "\n");
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter limiter(ratelimit::FixedWindow{.limit = 1, .window = 60s}, {}, clock);
  replay::Report report;
  ASSERT_NO_THROW(report = replay::run(in, limiter, clock, replay::KeyField::target));
  EXPECT_EQ(report.lines, 4);
  EXPECT_EQ(report.long_keys, 1);
  EXPECT_EQ(report.malformed, 0);
  EXPECT_EQ(report.admitted, 2);  // /a and /b
  EXPECT_EQ(report.denied, 1);    // the second /a
  EXPECT_EQ(report.clients.size(), 2u);
  // The limiter's own bound decides.
  std::istringstream again(in.str());
  ratelimit::MemoryLimiter wide(ratelimit::FixedWindow{.limit = 1, .window = 60s}, {.max_key_bytes = 1024}, clock);
  EXPECT_EQ(replay::run(again, wide, clock, replay::KeyField::target).long_keys, 0);
}

TEST(Replay, PeriodsOutsideInt64NanosecondsAreRefusedClearly) {
  // 1e30 and 1e10 s overflowed the conversion (undefined behaviour) and were reported as
  // "Gcra.period: must be > 0, got -9223372036854775808 ns".
  for (const double bad :
       {1e30, 1e10, 9223372037.0, std::nan(""), std::numeric_limits<double>::infinity(), -1.0, 0.0, 1e-12}) {
    try {
      (void)replay::period_from_seconds(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--period: ", 0), 0u) << e.what();
    }
  }
  EXPECT_EQ(replay::period_from_seconds(60), 60s);
  EXPECT_EQ(replay::period_from_seconds(0.25), 250ms);
  EXPECT_EQ(replay::period_from_seconds(1e-9), 1ns);
  EXPECT_EQ(replay::period_from_seconds(9223372036.0), std::chrono::seconds(9223372036));
}

// The worst burst of a series by brute force: most times within any (t - window, t].
std::int64_t brute_peak(const std::vector<std::int64_t>& times, std::int64_t window) {
  std::int64_t best = 0;
  for (const std::int64_t t : times) {
    best = std::max<std::int64_t>(
        best, std::count_if(times.begin(), times.end(), [&](std::int64_t s) { return s <= t && s > t - window; }));
  }
  return best;
}

TEST(Replay, ComparisonRunsEveryPolicyOnTheSameRequests) {
  const std::string log = traffic();
  std::istringstream in(log);
  const replay::Traffic t = replay::read_traffic(in, replay::KeyField::client);
  // 10 s windows: the log holds one minute per hour, so only windows shorter than that minute have edges
  // inside the traffic.
  constexpr std::int64_t kLimit = 10;
  const std::int64_t window = std::chrono::nanoseconds(10s).count();
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter fixed(ratelimit::FixedWindow{.limit = kLimit, .window = 10s}, {}, clock);
  ratelimit::MemoryLimiter sliding(ratelimit::SlidingWindowLog{.limit = kLimit, .window = 10s}, {}, clock);
  const replay::PolicyRun f = replay::run(t, fixed, clock, window);
  const replay::PolicyRun l = replay::run(t, sliding, clock, window);

  // The same numbers as the single-policy replay of the same log.
  std::istringstream again(log);
  ratelimit::MemoryLimiter fixed2(ratelimit::FixedWindow{.limit = kLimit, .window = 10s}, {}, clock);
  const replay::Report report = replay::run(again, fixed2, clock);
  EXPECT_EQ(f.admitted, report.admitted);
  EXPECT_EQ(f.denied, report.denied);
  EXPECT_EQ(f.admitted + f.denied, static_cast<std::int64_t>(t.time_ns.size()));

  // Worst admitted burst, recounted by brute force from the admitted requests of each client.
  std::vector<std::vector<std::int64_t>> admitted_f(t.clients.size()), admitted_l(t.clients.size()),
      offered(t.clients.size());
  for (std::size_t i = 0; i < t.time_ns.size(); ++i) {
    offered[t.client[i]].push_back(t.time_ns[i]);
    if (f.allowed[i]) admitted_f[t.client[i]].push_back(t.time_ns[i]);
    if (l.allowed[i]) admitted_l[t.client[i]].push_back(t.time_ns[i]);
  }
  const std::vector<std::int64_t> peaks = replay::offered_peaks(t, window);
  for (std::size_t c = 0; c < t.clients.size(); ++c) {
    EXPECT_EQ(f.peak_admitted[c], brute_peak(admitted_f[c], window)) << t.clients[c];
    EXPECT_EQ(l.peak_admitted[c], brute_peak(admitted_l[c], window)) << t.clients[c];
    EXPECT_EQ(peaks[c], brute_peak(offered[c], window)) << t.clients[c];
  }
  // A sliding log never admits more than its limit in any window; a fixed window can, across an edge.
  EXPECT_LE(l.worst_burst(), kLimit);
  EXPECT_GT(f.worst_burst(), kLimit) << "the log must show the fixed window's boundary burst";
  EXPECT_GT(f.waits, 0);
  EXPECT_LE(f.waits, f.denied);
  EXPECT_EQ(static_cast<std::int64_t>(f.wait_ns.size()), f.waits);  // every wait is finite here
  EXPECT_TRUE(std::is_sorted(f.wait_ns.begin(), f.wait_ns.end()));
  EXPECT_LE(replay::quantile(f.wait_ns, 1.0), window);
  EXPECT_EQ(t.resolution_ns, 1'000'000'000);  // Common Log Format: whole seconds
  EXPECT_GT(t.most_at_one_instant, 1);
  // The sample log: one minute (:05) of every hour.
  const replay::Coverage minutes = replay::coverage(t, std::chrono::nanoseconds(60s).count());
  EXPECT_EQ(minutes.active, 84);
  EXPECT_EQ(minutes.adjacent, 0);
  EXPECT_EQ(replay::coverage(t, std::chrono::nanoseconds(1h).count()).adjacent, 83);
}

TEST(Replay, ResolutionIsTheFinestStepBetweenTimestamps) {
  std::istringstream in(R"(1.2.3.4 - - [17/May/2015:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "ua"
1.2.3.4 - - [17/May/2015:10:02:00 +0000] "GET / HTTP/1.1" 200 1 "-" "ua"
1.2.3.5 - - [17/May/2015:10:02:00 +0000] "GET / HTTP/1.1" 200 1 "-" "ua"
1.2.3.4 - - [17/May/2015:10:05:00 +0000] "GET / HTTP/1.1" 200 1 "-" "ua"
)");
  const replay::Traffic t = replay::read_traffic(in, replay::KeyField::client);
  EXPECT_EQ(t.resolution_ns, std::chrono::nanoseconds(60s).count());  // minute stamps: gcd of 120 s and 180 s
  EXPECT_EQ(t.most_at_one_instant, 1);
  EXPECT_EQ(replay::quantile({}, 0.5), 0);
  EXPECT_EQ(replay::quantile({1, 2, 3, 4}, 0.5), 2);
  EXPECT_EQ(replay::quantile({1, 2, 3, 4}, 1.0), 4);
}

}  // namespace
