// Reading a remote's rate-limit fields: expected values worked by hand from include/ratelimit/http/README.md
// "Calling someone else's API", RFC 9110 (Retry-After, HTTP-date) and RFC 9651 (lists, parameters).
#include <gtest/gtest.h>

#include <ratelimit/http/headers.hpp>
#include <ratelimit/http/remote_headers.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
namespace http = ratelimit::http;

namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

/// 1994-11-06T08:49:37Z, the RFC's example date.
constexpr std::int64_t kRfcDate = 784111777;

http::RemoteReport read(const Fields& fields, std::int64_t now = kRfcDate, const http::RemoteMaxima& maxima = {}) {
  return http::read_remote_report(http::remote_fields(fields), maxima, now);
}

}  // namespace

TEST(RemoteQuotaHeaders, ParsesCounts) {
  EXPECT_EQ(http::parse_count("0"), 0);
  EXPECT_EQ(http::parse_count(" 42\t"), 42);
  EXPECT_EQ(http::parse_count("999999999999999999"), 999999999999999999);  // 18 digits
  EXPECT_FALSE(http::parse_count("1000000000000000000"));                  // 10^18: 19 digits
  EXPECT_FALSE(http::parse_count("99999999999999999999999"));
  EXPECT_FALSE(http::parse_count("-1"));
  EXPECT_FALSE(http::parse_count("+1"));
  EXPECT_FALSE(http::parse_count("1e3"));
  EXPECT_FALSE(http::parse_count("1.5"));
  EXPECT_FALSE(http::parse_count(""));
  EXPECT_FALSE(http::parse_count(" "));
}

TEST(RemoteQuotaHeaders, ParsesImfFixdate) {
  EXPECT_EQ(http::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), kRfcDate);
  EXPECT_EQ(http::parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), 0);
  EXPECT_EQ(http::parse_http_date("Tue, 29 Feb 2000 23:59:59 GMT"), 951868799);
  EXPECT_EQ(http::parse_http_date("Fri, 31 Dec 9999 23:59:59 GMT"), 253402300799);
  EXPECT_FALSE(http::parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"));  // RFC 850: not read
  EXPECT_FALSE(http::parse_http_date("Sun Nov  6 08:49:37 1994"));        // asctime: not read
  EXPECT_FALSE(http::parse_http_date("Sun, 06 Nov 1994 24:00:00 GMT"));
  EXPECT_FALSE(http::parse_http_date("Sun, 06 Nov 1969 08:49:37 GMT"));
  EXPECT_FALSE(http::parse_http_date("Sun, 06 Foo 1994 08:49:37 GMT"));
  EXPECT_FALSE(http::parse_http_date("Sun, 06 Nov 1994 08:49:37 UTC"));
  EXPECT_FALSE(http::parse_http_date("Sun, 06 Nov 1994 08:49:-7 GMT"));
}

TEST(RemoteQuotaHeaders, ParsesRetryAfterSeconds) {
  const http::RemoteReport r = read({{"Retry-After", "120"}});
  EXPECT_EQ(r.retry_after, 120s);
  EXPECT_EQ(r.malformed, 0);
}

TEST(RemoteQuotaHeaders, ParsesRetryAfterDateAgainstDateField) {
  const http::RemoteReport r =
      read({{"Date", "Sun, 06 Nov 1994 08:49:37 GMT"}, {"retry-after", "Sun, 06 Nov 1994 08:51:37 GMT"}}, 0);
  EXPECT_EQ(r.retry_after, 120s);  // against Date, not the local clock (0)
  EXPECT_EQ(r.malformed, 0);
}

TEST(RemoteQuotaHeaders, ParsesRetryAfterDateAgainstLocalClock) {
  EXPECT_EQ(read({{"Retry-After", "Sun, 06 Nov 1994 08:50:07 GMT"}}).retry_after, 30s);
  EXPECT_EQ(read({{"Retry-After", "Sun, 06 Nov 1994 08:49:07 GMT"}}).retry_after, 0s);  // past: now
}

TEST(RemoteQuotaHeaders, ClampsHugeRetryAfter) {
  const http::RemoteMaxima maxima{.retry_after = 10s};
  const http::RemoteReport a = read({{"Retry-After", "999999999999999999"}}, kRfcDate, maxima);
  EXPECT_EQ(a.retry_after, 10s);
  EXPECT_EQ(a.clamped, 1);
  const http::RemoteReport b = read({{"Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"}}, kRfcDate, maxima);
  EXPECT_EQ(b.retry_after, 10s);
  EXPECT_EQ(b.clamped, 1);
}

TEST(RemoteQuotaHeaders, CountsMalformedRetryAfter) {
  for (const char* bad : {"-5", "soon", "1.5", "99999999999999999999", "", "Sun, 06 Nov 1994"}) {
    const http::RemoteReport r = read({{"Retry-After", bad}});
    EXPECT_FALSE(r.retry_after) << bad;
    EXPECT_EQ(r.malformed, std::string(bad).empty() ? 0 : 1) << bad;  // an empty field says nothing
  }
}

TEST(RemoteQuotaHeaders, ReadsIetfFieldsThisLibraryWrites) {
  // What headers.hpp writes for a GCRA of 5/s with burst 10 after 3 requests at once.
  const ratelimit::QuotaPolicy quota =
      http::quota_policy("per-client", ratelimit::Gcra{.limit = 5, .period = std::chrono::seconds(1), .burst = 10});
  const ratelimit::Decision d{.allowed = true, .limit = 10, .remaining = 7, .retry_after = 0s, .reset_after = 600ms};
  Fields fields;
  for (auto& [n, v] : http::rate_limit_fields(quota, d)) fields.emplace_back(n, v);
  const http::RemoteReport r = read(fields);
  EXPECT_EQ(r.limit, 10);
  EXPECT_EQ(r.window, 2s);
  EXPECT_EQ(r.remaining, 7);
  EXPECT_EQ(r.reset, 1s);
  EXPECT_FALSE(r.retry_after);
  EXPECT_EQ(r.malformed, 0);
}

TEST(RemoteQuotaHeaders, TakesMostRestrictiveIetfMember) {
  const http::RemoteReport r = read({{"RateLimit-Policy", "\"burst\";q=100;w=60, \"day\";q=1000;w=86400"},
                                     {"RateLimit", "\"burst\";r=40;t=20, \"day\";r=3;t=7200"}});
  EXPECT_EQ(r.remaining, 3);
  EXPECT_EQ(r.reset, 7200s);
  EXPECT_EQ(r.limit, 1000);
  EXPECT_EQ(r.window, 86400s);
  // Equal r: the longer t; tokens and extra parameters are read too.
  const http::RemoteReport t = read({{"RateLimit", "a;r=2;t=5;pk=:abc=:, b;r=2;t=9;x=\"y\""}});
  EXPECT_EQ(t.remaining, 2);
  EXPECT_EQ(t.reset, 9s);
  EXPECT_FALSE(t.limit);  // no policy field
  EXPECT_EQ(t.malformed, 0);
}

TEST(RemoteQuotaHeaders, JoinsRepeatedListFields) {
  const std::multimap<std::string, std::string> fields{{"RateLimit", "\"a\";r=9;t=1"}, {"RateLimit", "\"b\";r=4;t=2"}};
  const http::RemoteReport r = http::read_remote_report(http::remote_fields(fields), {}, 0);
  EXPECT_EQ(r.remaining, 4);
  EXPECT_EQ(r.reset, 2s);
}

TEST(RemoteQuotaHeaders, CountsMalformedIetfFields) {
  for (const char* bad : {"\"a\";r=-1;t=1", "\"a\";r=5;t=-3", "\"a\";r=1000000000000000000;t=1", "\"a\";r=x;t=1",
                          "\"a;r=1;t=1", "\"a\";r=1;t=1,", "\"a\";r=1;t=1 junk", ",", "\"\x01\";r=1;t=1"}) {
    const http::RemoteReport r = read({{"RateLimit", bad}});
    EXPECT_FALSE(r.remaining) << bad;
    EXPECT_GE(r.malformed, 1) << bad;
  }
  // A malformed RateLimit falls back to the older fields.
  const http::RemoteReport r = read({{"RateLimit", "garbage;;"}, {"X-RateLimit-Remaining", "3"}});
  EXPECT_EQ(r.remaining, 3);
  EXPECT_EQ(r.malformed, 1);
}

TEST(RemoteQuotaHeaders, IetfMemberWithoutTIsUsable) {
  // t is optional in the draft: the member still gives r; without t it is the longest wait of equal r.
  const http::RemoteReport r = read({{"RateLimit", "\"a\";r=5, \"b\";r=5;t=9, \"c\";r=7;t=1"}});
  EXPECT_EQ(r.remaining, 5);
  EXPECT_FALSE(r.reset);
  EXPECT_EQ(r.malformed, 0);
}

TEST(RemoteQuotaHeaders, ClampsIetfValues) {
  const http::RemoteMaxima maxima{.quota = 50, .window = 60s, .reset = 30s, .retry_after = 10s};
  const http::RemoteReport r =
      read({{"RateLimit-Policy", "\"a\";q=900;w=3600"}, {"RateLimit", "\"a\";r=800;t=999999999999999"}}, 0, maxima);
  EXPECT_EQ(r.remaining, 50);
  EXPECT_EQ(r.reset, 30s);
  EXPECT_EQ(r.limit, 50);
  EXPECT_EQ(r.window, 60s);
  EXPECT_EQ(r.clamped, 4);
}

TEST(RemoteQuotaHeaders, ReadsClassicFieldsCaseInsensitively) {
  const http::RemoteReport r =
      read({{"x-ratelimit-limit", "60"}, {"X-RATELIMIT-REMAINING", "59"}, {"X-RateLimit-Reset", "42"}});
  EXPECT_EQ(r.limit, 60);
  EXPECT_EQ(r.remaining, 59);
  EXPECT_EQ(r.reset, 42s);
  EXPECT_FALSE(r.window);
}

TEST(RemoteQuotaHeaders, PrefersRateLimitDashFieldsOverXFields) {
  const http::RemoteReport r = read({{"RateLimit-Limit", "10"},
                                     {"RateLimit-Remaining", "2"},
                                     {"RateLimit-Reset", "5"},
                                     {"X-RateLimit-Remaining", "9"}});
  EXPECT_EQ(r.remaining, 2);
  EXPECT_EQ(r.limit, 10);
  EXPECT_EQ(r.reset, 5s);
}

TEST(RemoteQuotaHeaders, ReadsEpochResetAboveThreshold) {
  // 10^9 and above: a Unix time, relative to Date (else the local clock); below, seconds.
  constexpr std::int64_t now = 1'700'000'000;  // 2023-11-14
  EXPECT_EQ(read({{"X-RateLimit-Remaining", "1"}, {"X-RateLimit-Reset", "1700000090"}}, now).reset, 90s);
  EXPECT_EQ(read({{"X-RateLimit-Remaining", "1"}, {"X-RateLimit-Reset", "999999999"}}, 0, {.reset = 2000000000s}).reset,
            999999999s);
  EXPECT_EQ(read({{"X-RateLimit-Remaining", "1"}, {"X-RateLimit-Reset", "1000000000"}}, now).reset, 0s);  // past
  EXPECT_EQ(read({{"Date", "Thu, 01 Jan 1970 00:00:00 GMT"},
                  {"X-RateLimit-Remaining", "1"},
                  {"X-RateLimit-Reset", "1000000060"}},
                 0, {.reset = 2000000000s})
                .reset,
            1000000060s);
}

TEST(RemoteQuotaHeaders, CountsMalformedClassicFields) {
  const http::RemoteReport negative = read({{"X-RateLimit-Remaining", "5"}, {"X-RateLimit-Reset", "-10"}});
  EXPECT_EQ(negative.remaining, 5);
  EXPECT_FALSE(negative.reset);
  EXPECT_EQ(negative.malformed, 1);
  const http::RemoteReport huge = read({{"X-RateLimit-Remaining", "1000000000000000000"}, {"X-RateLimit-Limit", "10"}});
  EXPECT_FALSE(huge.remaining);
  EXPECT_FALSE(huge.limit);  // without a valid remaining the family is not used
  EXPECT_EQ(huge.malformed, 1);
  const http::RemoteReport garbage = read({{"X-RateLimit-Remaining", "lots"}, {"Date", "yesterday"}});
  EXPECT_FALSE(garbage.remaining);
  EXPECT_EQ(garbage.malformed, 2);
  const http::RemoteReport clamped = read({{"X-RateLimit-Remaining", "100000000000000000"}}, 0, {.quota = 7});
  EXPECT_EQ(clamped.remaining, 7);
  EXPECT_EQ(clamped.clamped, 1);
}

TEST(RemoteQuotaHeaders, RepeatedScalarTakesMostRestrictive) {
  const http::RemoteReport r = read(
      {{"X-RateLimit-Remaining", "5"}, {"X-RateLimit-Remaining", "3"}, {"Retry-After", "2"}, {"Retry-After", "7"}});
  EXPECT_EQ(r.remaining, 3);
  EXPECT_EQ(r.retry_after, 7s);
  EXPECT_FALSE(read({{"X-RateLimit-Remaining", "5, x"}}).remaining);
}

TEST(RemoteQuotaHeaders, NoFieldsNoReport) {
  const http::RemoteReport r = read({{"Content-Type", "text/plain"}});
  EXPECT_FALSE(r.remaining || r.limit || r.reset || r.window || r.retry_after);
  EXPECT_EQ(r.malformed + r.clamped, 0);
}

TEST(RemoteQuotaHeaders, SurvivesArbitraryBytes) {
  // Fuzz-style: every prefix of hostile values parses without throwing or reading out of bounds.
  const std::string hostile = "\"a\\\";r=99999999999999999;t=-0,;;==\"\"\\\x7f\xff, b;r=1;t=1;q=\"x\\";
  for (std::size_t n = 0; n <= hostile.size(); ++n) {
    const std::string v = hostile.substr(0, n);
    EXPECT_NO_THROW((void)read({{"RateLimit", v},
                                {"RateLimit-Policy", v},
                                {"Retry-After", v},
                                {"X-RateLimit-Reset", v},
                                {"X-RateLimit-Remaining", v},
                                {"Date", v}}));
  }
}
