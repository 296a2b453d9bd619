// Header fields and problem bodies: expected values worked by hand from include/ratelimit/http/README.md "Header
// fields" and the draft.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <ratelimit/http.hpp>
#include <ratelimit/http/problem.hpp>
#include <ratelimit/ratelimit.hpp>

#include <stdexcept>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using ratelimit::Decision;
namespace http = ratelimit::http;

namespace {

std::string field(const std::vector<http::Field>& fields, const std::string& name) {
  for (const auto& [n, v] : fields) {
    if (n == name) return v;
  }
  return "<absent>";
}

Decision denial(std::int64_t limit, std::chrono::nanoseconds retry, std::chrono::nanoseconds reset) {
  return Decision{.allowed = false, .limit = limit, .remaining = 0, .retry_after = retry, .reset_after = reset};
}

}  // namespace

TEST(HttpHeaders, CeilSecondsRoundsUp) {
  EXPECT_EQ(http::ceil_seconds(0ns), 0);
  EXPECT_EQ(http::ceil_seconds(-5ns), 0);
  EXPECT_EQ(http::ceil_seconds(1ns), 1);
  EXPECT_EQ(http::ceil_seconds(1s), 1);
  EXPECT_EQ(http::ceil_seconds(1s + 1ns), 2);
  EXPECT_EQ(http::ceil_seconds(59999ms), 60);
}

TEST(HttpHeaders, RetryAfterIsWholeSecondsAtLeastOneAndAbsentForNever) {
  EXPECT_EQ(http::retry_after_value(Decision{.allowed = true, .limit = 1, .remaining = 0}), "");
  EXPECT_EQ(http::retry_after_value(denial(5, 1ns, 1ns)), "1");
  EXPECT_EQ(http::retry_after_value(denial(5, 200ms, 1s)), "1");
  EXPECT_EQ(http::retry_after_value(denial(5, 1s, 1s)), "1");
  EXPECT_EQ(http::retry_after_value(denial(5, 1s + 1ns, 2s)), "2");
  EXPECT_EQ(http::retry_after_value(denial(5, 0ns, 0ns)), "1");  // never "retry at once"
  EXPECT_EQ(http::retry_after_value(denial(5, Decision::never, 3s)), "");
}

TEST(HttpHeaders, SfStringEscapesQuoteAndBackslashAndRefusesNonAscii) {
  EXPECT_EQ(http::sf_string("default"), "\"default\"");
  EXPECT_EQ(http::sf_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(http::sf_string(""), "\"\"");
  try {
    (void)http::sf_string("caf\xc3\xa9");
    FAIL() << "non-ASCII accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("name:", 0), 0u) << e.what();
  }
  EXPECT_THROW((void)http::sf_string(std::string("a\nb")), std::invalid_argument);
  EXPECT_THROW((void)http::quota_policy("t\x7f", ratelimit::FixedWindow{1, 1s}), std::invalid_argument);
}

TEST(HttpHeaders, QuotaPolicyPerPolicy) {
  const auto fw = http::quota_policy("fw", ratelimit::FixedWindow{.limit = 100, .window = 60s});
  EXPECT_EQ(fw.quota, 100);
  EXPECT_EQ(fw.window, 60s);
  EXPECT_EQ(http::quota_policy("x", ratelimit::SlidingWindowLog{10, 1500ms}).window, 2s);
  EXPECT_EQ(http::quota_policy("x", ratelimit::SlidingWindowCounter{10, 500ms}).window, 1s);
  EXPECT_EQ(http::quota_policy("x", ratelimit::SlidingWindowCounter{10, 500ms}).quota, 10);
  // GCRA 30/min burst 10: T = 2 s, q = burst = 10, w = 10 * 2 s = 20 s.
  const auto g = http::quota_policy("g", ratelimit::Gcra{.limit = 30, .period = 1min, .burst = 10});
  EXPECT_EQ(g.quota, 10);
  EXPECT_EQ(g.window, 20s);
  // Token bucket capacity 5, 3 tokens per 10 s: T = ceil(10e9 / 3) = 3'333'333'334 ns,
  // w = ceil(5 * T) = ceil(16.66666667 s) = 17 s.
  const auto tb = http::quota_policy("tb", ratelimit::TokenBucket{.capacity = 5, .refill_tokens = 3, .refill_period = 10s});
  EXPECT_EQ(tb.quota, 5);
  EXPECT_EQ(tb.window, 17s);
  // Invalid policies are refused with the policy's field name.
  try {
    (void)http::quota_policy("bad", ratelimit::Gcra{.limit = 0, .period = 1s, .burst = 1});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("Gcra.limit:", 0), 0u) << e.what();
  }
}

TEST(HttpHeaders, SinglePolicyAllFieldsFromALimiter) {
  ratelimit::ManualClock clock;
  const ratelimit::FixedWindow policy{.limit = 2, .window = 60s};
  ratelimit::MemoryLimiter limiter(policy, {}, clock);
  const auto quota = http::quota_policy("api", policy);
  clock.advance(10s);
  const Decision first = limiter.allow("k");
  // Allowed: remaining 1, reset at the window edge, 50 s away; no Retry-After.
  auto f = http::rate_limit_fields(quota, first);
  EXPECT_EQ(field(f, "RateLimit-Policy"), "\"api\";q=2;w=60");
  EXPECT_EQ(field(f, "RateLimit"), "\"api\";r=1;t=50");
  EXPECT_EQ(field(f, "X-RateLimit-Limit"), "2");
  EXPECT_EQ(field(f, "X-RateLimit-Remaining"), "1");
  EXPECT_EQ(field(f, "X-RateLimit-Reset"), "50");
  EXPECT_EQ(field(f, "Retry-After"), "<absent>");
  EXPECT_EQ(f.size(), 5u);
  clock.advance(500ms);
  (void)limiter.allow("k");
  const Decision third = limiter.allow("k");
  ASSERT_FALSE(third);
  // Denied at 10.5 s: wait 49.5 s -> 50 s; t equals Retry-After.
  f = http::rate_limit_fields(quota, third);
  EXPECT_EQ(field(f, "RateLimit"), "\"api\";r=0;t=50");
  EXPECT_EQ(field(f, "X-RateLimit-Remaining"), "0");
  EXPECT_EQ(field(f, "X-RateLimit-Reset"), "50");
  EXPECT_EQ(field(f, "Retry-After"), "50");
}

TEST(HttpHeaders, GcraDenialEffectiveWindowIsTheRetryNotTheReset) {
  ratelimit::ManualClock clock;
  const ratelimit::Gcra policy{.limit = 30, .period = 1min, .burst = 3};  // T = 2 s, tau = 6 s
  ratelimit::MemoryLimiter limiter(policy, {}, clock);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(limiter.allow("k"));
  clock.advance(500ms);
  const Decision d = limiter.allow("k");
  ASSERT_FALSE(d);  // backlog 5.5 s; new 7.5 s > 6 s: retry 1.5 s, reset 5.5 s
  EXPECT_EQ(d.retry_after, 1500ms);
  EXPECT_EQ(d.reset_after, 5500ms);
  const auto f = http::rate_limit_fields(http::quota_policy("g", policy), d);
  EXPECT_EQ(field(f, "RateLimit-Policy"), "\"g\";q=3;w=6");
  EXPECT_EQ(field(f, "RateLimit"), "\"g\";r=0;t=2");
  EXPECT_EQ(field(f, "X-RateLimit-Reset"), "6");
  EXPECT_EQ(field(f, "Retry-After"), "2");
}

TEST(HttpHeaders, NeverHasNoRetryAfterAndResetAsWindow) {
  const auto q = http::quota_policy("p", ratelimit::FixedWindow{5, 10s});
  const auto f = http::rate_limit_fields(q, denial(5, Decision::never, 3500ms));
  EXPECT_EQ(field(f, "Retry-After"), "<absent>");
  EXPECT_EQ(field(f, "RateLimit"), "\"p\";r=0;t=4");
  EXPECT_EQ(field(f, "X-RateLimit-Reset"), "4");
}

TEST(HttpHeaders, SeveralPoliciesListAllAndClassicShowsTheMostRestrictive) {
  const auto a = http::quota_policy("minute", ratelimit::FixedWindow{30, 60s});
  const auto b = http::quota_policy("day", ratelimit::FixedWindow{1000, 24h});
  const auto c = http::quota_policy("burst", ratelimit::TokenBucket{10, 30, 60s});
  const std::vector<ratelimit::PolicyDecision> allowed{
      {&a, Decision{.allowed = true, .limit = 30, .remaining = 7, .reset_after = 20s}},
      {&b, Decision{.allowed = true, .limit = 1000, .remaining = 7, .reset_after = 3600s}},
      {&c, Decision{.allowed = true, .limit = 10, .remaining = 9, .reset_after = 2s}}};
  auto f = http::rate_limit_fields(allowed);
  EXPECT_EQ(field(f, "RateLimit-Policy"), "\"minute\";q=30;w=60, \"day\";q=1000;w=86400, \"burst\";q=10;w=20");
  EXPECT_EQ(field(f, "RateLimit"), "\"minute\";r=7;t=20, \"day\";r=7;t=3600, \"burst\";r=9;t=2");
  // Smallest remaining (7), tie broken by the longer reset: the day policy.
  EXPECT_EQ(field(f, "X-RateLimit-Limit"), "1000");
  EXPECT_EQ(field(f, "X-RateLimit-Remaining"), "7");
  EXPECT_EQ(field(f, "X-RateLimit-Reset"), "3600");

  const std::vector<ratelimit::PolicyDecision> denied{
      {&a, denial(30, 20s, 20s)},
      {&b, Decision{.allowed = true, .limit = 1000, .remaining = 0, .reset_after = 3600s}},
      {&c, denial(10, 1500ms, 2s)}};
  f = http::rate_limit_fields(denied);
  // Both a and c deny: the longest wait (20 s) binds.
  EXPECT_EQ(field(f, "X-RateLimit-Limit"), "30");
  EXPECT_EQ(field(f, "Retry-After"), "20");
  EXPECT_EQ(field(f, "RateLimit"), "\"minute\";r=0;t=20, \"day\";r=0;t=3600, \"burst\";r=0;t=2");

  http::FieldOptions only_ietf{.classic = false};
  f = http::rate_limit_fields(denied, only_ietf);
  EXPECT_EQ(f.size(), 3u);  // RateLimit-Policy, RateLimit, Retry-After
  EXPECT_EQ(field(f, "Retry-After"), "20");
  EXPECT_TRUE(http::rate_limit_fields(std::span<const ratelimit::PolicyDecision>{}).empty());
}

TEST(HttpHeaders, EpochResetRoundsUpTheAbsoluteTime) {
  const auto q = http::quota_policy("p", ratelimit::FixedWindow{5, 10s});
  http::FieldOptions o{.reset = http::ResetFormat::epoch_seconds,
                       .now = std::chrono::system_clock::time_point(1'700'000'000s + 500ms)};
  const auto f = http::rate_limit_fields(q, Decision{.allowed = true, .limit = 5, .remaining = 4, .reset_after = 2200ms}, o);
  EXPECT_EQ(field(f, "X-RateLimit-Reset"), "1700000003");  // ceil(1'700'000'002.7)
  const auto full = http::rate_limit_fields(q, Decision{.allowed = true, .limit = 5, .remaining = 5}, o);
  EXPECT_EQ(field(full, "X-RateLimit-Reset"), "1700000001");  // ceil(now) when full
}

// now + reset_after past the end of int64 nanoseconds (a penalty of nanoseconds::max()) saturates at
// INT64_MAX ns, ceil(9'223'372'036.85...) s, instead of overflowing (to "0").
TEST(HttpHeaders, EpochResetSaturatesInsteadOfOverflowing) {
  const auto q = http::quota_policy("p", ratelimit::FixedWindow{1, 1min});
  const http::FieldOptions o{.reset = http::ResetFormat::epoch_seconds,
                             .now = std::chrono::system_clock::time_point(1'700'000'000s)};
  const Decision far{.allowed = false, .limit = 1, .remaining = 0, .retry_after = 1s,
                     .reset_after = std::chrono::nanoseconds::max() - 1s};
  EXPECT_EQ(field(http::rate_limit_fields(q, far, o), "X-RateLimit-Reset"), "9223372037");

  ratelimit::ManualClock clock;
  clock.advance(1'700'000'000s);
  ratelimit::MemoryLimiter<ratelimit::FixedWindow, ratelimit::ManualClock> l(ratelimit::FixedWindow{1, 1min}, {},
                                                                            clock);
  ratelimit::LimiterLayer<decltype(l)> layer(l, "login", {.penalty = std::chrono::nanoseconds::max()});
  ASSERT_TRUE(ratelimit::check_layers({{&layer, "k"}}));
  ASSERT_FALSE(ratelimit::check_layers({{&layer, "k"}}));  // starts the penalty
  const auto d = ratelimit::check_layers({{&layer, "k"}});
  ASSERT_EQ(d.layers[0].verdict, ratelimit::Verdict::penalized);
  const auto f = http::rate_limit_fields(d.policy_decisions(), o);
  EXPECT_EQ(field(f, "X-RateLimit-Reset"), "9223372037");
  EXPECT_EQ(field(f, "Retry-After"), "7523372037");  // ceil((INT64_MAX ns - now) / 1 s)
}

TEST(HttpHeaders, MostRestrictiveTable) {
  using ratelimit::most_restrictive;
  const Decision ok5{.allowed = true, .limit = 9, .remaining = 5, .reset_after = 1s};
  const Decision ok2{.allowed = true, .limit = 9, .remaining = 2, .reset_after = 1s};
  const Decision ok2long{.allowed = true, .limit = 9, .remaining = 2, .reset_after = 5s};
  const Decision no1 = denial(9, 1s, 1s);
  const Decision no3 = denial(9, 3s, 3s);
  const Decision never = denial(9, Decision::never, 0s);
  EXPECT_EQ(most_restrictive(std::vector<Decision>{}), 0u);
  EXPECT_EQ(most_restrictive(std::vector<Decision>{ok5, ok2}), 1u);
  EXPECT_EQ(most_restrictive(std::vector<Decision>{ok2, ok2long}), 1u);
  EXPECT_EQ(most_restrictive(std::vector<Decision>{ok2long, ok2}), 0u);
  EXPECT_EQ(most_restrictive(std::vector<Decision>{ok2, no1, ok5}), 1u);
  EXPECT_EQ(most_restrictive(std::vector<Decision>{no1, no3, ok2}), 1u);
  EXPECT_EQ(most_restrictive(std::vector<Decision>{never, no3}), 0u);
  EXPECT_EQ(most_restrictive(std::vector<Decision>{no3, never}), 1u);
}

TEST(HttpProblem, QuotaExceededBodyHasTheDraftTypeAndViolatedPolicies) {
  const std::vector<std::string> violated{"minute", "day \"x\""};
  const std::string body = http::quota_exceeded_json(violated, denial(30, 1500ms, 2s), "/search");
  const auto j = nlohmann::json::parse(body);
  EXPECT_EQ(j.at("type"), "https://iana.org/assignments/http-problem-types#quota-exceeded");
  EXPECT_EQ(j.at("title"), "Request cannot be satisfied as assigned quota has been exceeded");
  EXPECT_EQ(j.at("status"), 429);
  EXPECT_EQ(j.at("instance"), "/search");
  EXPECT_EQ(j.at("violated-policies"), nlohmann::json::array({"minute", "day \"x\""}));
  EXPECT_EQ(j.at("retry-after"), 2);
  EXPECT_EQ(j.at("detail"), "Retry after 2 s.");
  EXPECT_EQ(http::kProblemContentType, "application/problem+json");

  const auto never = nlohmann::json::parse(http::quota_exceeded_json(violated, denial(30, Decision::never, 0s)));
  EXPECT_FALSE(never.contains("retry-after"));
  // include/ratelimit/http/README.md "Header fields": left out for never (no wait helps, cause unknown).
  EXPECT_FALSE(never.contains("detail"));
  EXPECT_FALSE(never.contains("instance"));
  EXPECT_EQ(never.at("violated-policies").size(), 2u);

  const auto bare = nlohmann::json::parse(http::problem_json(http::Problem{.status = 0}));
  EXPECT_FALSE(bare.contains("status"));
  EXPECT_TRUE(bare.at("violated-policies").is_array());
  EXPECT_TRUE(bare.at("violated-policies").empty());
}

TEST(HttpProblem, InvalidUtf8NeverThrowsAndIsPercentEncoded) {
  // A denied request for "/x%FF" (decoded path "/x\xFF") made the JSON library throw: a 500 without
  // Retry-After instead of the 429. Invalid bytes are percent-encoded; valid UTF-8 is kept as it is.
  const std::vector<std::string> violated{"ip"};
  std::string body;
  ASSERT_NO_THROW(body = http::quota_exceeded_json(violated, denial(30, 1500ms, 2s), "/x\xFF"));
  auto j = nlohmann::json::parse(body);
  EXPECT_EQ(j.at("instance"), "/x%FF");
  EXPECT_EQ(j.at("retry-after"), 2);
  const std::pair<std::string, std::string> cases[] = {
      {"/caf\xC3\xA9", "/caf\xC3\xA9"},           // valid two-byte sequence: kept
      {"/\xE2\x82\xAC/\xF0\x9F\x98\x80", "/\xE2\x82\xAC/\xF0\x9F\x98\x80"},  // three and four bytes: kept
      {"/\xC3", "/%C3"},                           // truncated at the end
      {"/\xC3x", "/%C3x"},                         // lead byte without its continuation
      {"/\x80\xBF", "/%80%BF"},                    // lone continuation bytes
      {"/\xC0\xAF", "/%C0%AF"},                    // overlong '/'
      {"/\xED\xA0\x80", "/%ED%A0%80"},             // a UTF-16 surrogate
      {"/\xF4\x90\x80\x80", "/%F4%90%80%80"},      // above U+10FFFF
      {"/\xFE\xFF", "/%FE%FF"},
      {std::string("/a\0b", 4), std::string("/a\0b", 4)},  // NUL is valid UTF-8 (JSON escapes it)
  };
  for (const auto& [in, out] : cases) {
    ASSERT_NO_THROW(body = http::problem_json(http::Problem{.violated_policies = violated, .instance = in})) << in;
    EXPECT_EQ(nlohmann::json::parse(body).at("instance"), out) << in;
  }
  // Caller-supplied detail and policy names never throw either (replaced, U+FFFD).
  const std::vector<std::string> odd{"p\xFF"};
  ASSERT_NO_THROW(body = http::problem_json(http::Problem{.violated_policies = odd, .detail = "d\xFF"}));
  j = nlohmann::json::parse(body);
  EXPECT_EQ(j.at("detail"), "d\xEF\xBF\xBD");
  EXPECT_EQ(j.at("violated-policies"), nlohmann::json::array({"p\xEF\xBF\xBD"}));
}

TEST(HttpProblem, DenyListedKeyGetsNoDetailClaimingACostAboveTheLimit) {
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter<ratelimit::FixedWindow, ratelimit::ManualClock> limiter(ratelimit::FixedWindow{10, 60s}, {},
                                                                                 clock);
  ratelimit::LimiterLayer<decltype(limiter)> layer(limiter, "ip");
  layer.lists().deny("1.2.3.4");
  const ratelimit::LayeredDecision d = ratelimit::check_layers({{&layer, "1.2.3.4"}});  // cost 1 of 10
  ASSERT_FALSE(d);
  ASSERT_EQ(d.decision.retry_after, Decision::never);
  const auto j = nlohmann::json::parse(http::quota_exceeded_json(d.violated_policies(), d.decision, "/x"));
  EXPECT_FALSE(j.contains("detail"));
  EXPECT_FALSE(j.contains("retry-after"));
  EXPECT_EQ(j.at("violated-policies"), nlohmann::json::array({"ip"}));
  EXPECT_EQ(j.at("instance"), "/x");
}

// A layer's name is any string (layers know nothing of HTTP); the header fields refuse a name they cannot
// write, when they write it.
TEST(HttpHeaders, LayerNamesNeedNotBeStructuredFieldStringsUntilWritten) {
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter limiter(ratelimit::FixedWindow{.limit = 1, .window = 1s}, {}, clock);
  ratelimit::LimiterLayer layer(limiter, "caf\xc3\xa9\n");
  EXPECT_EQ(layer.name(), "caf\xc3\xa9\n");
  const auto d = ratelimit::check_layers({{&layer, "k"}});
  EXPECT_TRUE(d);
  try {
    (void)http::rate_limit_fields(d.policy_decisions());
    FAIL() << "non-ASCII name written";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("name:", 0), 0u) << e.what();
  }
}
