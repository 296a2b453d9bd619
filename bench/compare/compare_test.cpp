// The comparison table's arithmetic (bench/compare/metrics.hpp, accuracy.hpp) against brute force on
// small traces: every interval counted one by one, and every policy's decisions recomputed from
// include/ratelimit/README.md "Policy formulas" by a plain reference model.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include <ratelimit/ratelimit.hpp>

#include "accuracy.hpp"
#include "endpoint.hpp"
#include "format.hpp"
#include "metrics.hpp"
#include "options.hpp"

namespace {

using namespace bench::compare;
using std::chrono::nanoseconds;

/// Most of `times` in any `(t - w, t]`, trying every integer `t` that can end such an interval.
std::int64_t brute_max_in_interval(const std::vector<std::int64_t>& times, std::int64_t w) {
  std::int64_t best = 0;
  if (times.empty()) return 0;
  for (std::int64_t t = times.front(); t <= times.back() + w; ++t) {
    const auto n = std::count_if(times.begin(), times.end(), [&](std::int64_t x) { return x > t - w && x <= t; });
    best = std::max<std::int64_t>(best, n);
  }
  return best;
}

std::vector<std::int64_t> random_trace(std::uint64_t seed, std::size_t n, std::int64_t span) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::int64_t> at(0, span);
  std::vector<std::int64_t> out(n);
  for (auto& t : out) t = at(random);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CompareArithmetic, SlidingIntervalMaximumMatchesBruteForce) {
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    const auto times = random_trace(seed, 1 + seed % 40, 300);  // duplicates included
    for (const std::int64_t w : {1, 7, 50, 100, 301}) {
      ASSERT_EQ(max_in_interval(times, w), brute_max_in_interval(times, w)) << "seed " << seed << " window " << w;
    }
  }
}

TEST(CompareArithmetic, SteadyTraceIsExactlyAtTheLimit) {
  for (const std::int64_t limit : {1, 3, 7, 10}) {
    for (const std::int64_t w : {10, 100, 97}) {
      const auto times = steady_trace(limit, w, 5, 6);
      ASSERT_EQ(static_cast<std::int64_t>(times.size()), 6 * limit);
      ASSERT_TRUE(std::is_sorted(times.begin(), times.end()));
      EXPECT_EQ(brute_max_in_interval(times, w), limit) << "limit " << limit << " window " << w;
      for (std::size_t i = 0; i + static_cast<std::size_t>(limit) < times.size(); ++i) {
        ASSERT_EQ(times[i + static_cast<std::size_t>(limit)] - times[i], w);
      }
    }
  }
}

// Plain models of include/ratelimit/README.md "Policy formulas" (cost 1), one state per trace.
struct FixedWindowModel {
  std::int64_t limit, w, k = INT64_MIN, c = 0;
  bool allow(std::int64_t t) {
    const std::int64_t now_k = t / w;
    if (now_k > k) k = now_k, c = 0;
    return c + 1 <= limit ? (++c, true) : false;
  }
};
struct SlidingLogModel {
  std::int64_t limit, w;
  std::deque<std::int64_t> entries;
  bool allow(std::int64_t t) {
    while (!entries.empty() && entries.front() <= t - w) entries.pop_front();
    if (static_cast<std::int64_t>(entries.size()) + 1 > limit) return false;
    entries.push_back(t);
    return true;
  }
};
struct SlidingCounterModel {
  std::int64_t limit, w, k = INT64_MIN / 2, cur = 0, prev = 0;
  bool allow(std::int64_t t) {
    const std::int64_t now_k = t / w;
    if (now_k == k + 1) prev = cur, cur = 0;
    if (now_k > k + 1) prev = cur = 0;
    k = now_k;
    const std::int64_t r = t - now_k * w;
    if (prev * (w - r) + (cur + 1) * w > limit * w) return false;
    ++cur;
    return true;
  }
};
struct GcraModel {
  std::int64_t interval, tau, tat = INT64_MIN;
  GcraModel(std::int64_t limit, std::int64_t period, std::int64_t burst)
      : interval((period + limit - 1) / limit), tau(burst * interval) {}
  bool allow(std::int64_t t) {
    const std::int64_t new_tat = std::max(tat, t) + interval;
    if (new_tat - t > tau) return false;
    tat = new_tat;
    return true;
  }
};

template <class Model>
std::vector<bool> model_decisions(Model model, const std::vector<std::int64_t>& times) {
  std::vector<bool> out;
  for (const std::int64_t t : times) out.push_back(model.allow(t));
  return out;
}

double brute_fraction(const std::vector<bool>& d) {
  double admitted = 0;
  for (const bool b : d) admitted += b ? 1 : 0;
  return admitted / static_cast<double>(d.size());
}

/// The table's decisions and admitted share equal the models', for a steady client at, under and over the
/// limit, started at several phases.
TEST(CompareArithmetic, SteadyClientFractionMatchesReferenceModels) {
  constexpr std::int64_t kLimit = 4;
  constexpr std::int64_t kW = 100;
  for (const std::int64_t rate : {2, 4, 6}) {  // requests per window: under, at, over the limit
    for (const std::int64_t start : {0, 1, 13, 99}) {
      const auto times = steady_trace(rate, kW, 10 * kW + start, 8);
      const auto check = [&](const auto& policy, const auto& model, const char* name) {
        const std::vector<bool> got = decide(policy, times);
        const std::vector<bool> want = model_decisions(model, times);
        EXPECT_EQ(got, want) << name << " rate " << rate << " start " << start;
        EXPECT_DOUBLE_EQ(admitted_fraction(got), brute_fraction(want)) << name;
        EXPECT_EQ(max_in_interval(admitted_times(times, got), kW),
                  brute_max_in_interval(admitted_times(times, want), kW))
            << name;
      };
      check(ratelimit::FixedWindow{kLimit, nanoseconds(kW)}, FixedWindowModel{kLimit, kW}, "fixed window");
      check(ratelimit::SlidingWindowLog{kLimit, nanoseconds(kW)}, SlidingLogModel{kLimit, kW, {}}, "log");
      check(ratelimit::SlidingWindowCounter{kLimit, nanoseconds(kW)}, SlidingCounterModel{kLimit, kW}, "counter");
      check(ratelimit::TokenBucket{3, kLimit, nanoseconds(kW)}, GcraModel(kLimit, kW, 3), "token bucket");
      check(ratelimit::Gcra{kLimit, nanoseconds(kW), 3}, GcraModel(kLimit, kW, 3), "gcra");
    }
  }
}

/// At the limit the exact policies admit everything: the steady client is starved by none of them.
TEST(CompareArithmetic, ExactPoliciesAdmitAllOfASteadyClientAtTheLimit) {
  const auto times = steady_trace(4, 100, 1000, 8);
  EXPECT_EQ(admitted_fraction(decide(ratelimit::SlidingWindowLog{4, nanoseconds(100)}, times)), 1.0);
  EXPECT_EQ(admitted_fraction(decide(ratelimit::FixedWindow{4, nanoseconds(100)}, times)), 1.0);
  EXPECT_EQ(admitted_fraction(decide(ratelimit::Gcra{4, nanoseconds(100), 1}, times)), 1.0);
}

TEST(CompareArithmetic, EarliestAdmissionIsTheFirstTimeTheModelAdmits) {
  constexpr std::int64_t kW = 100;
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter limiter(ratelimit::SlidingWindowLog{3, nanoseconds(kW)}, {}, clock);
  SlidingLogModel model{3, kW, {}};
  for (const std::int64_t t : {1000, 1010, 1042, 1050}) {
    clock.set(at(t));
    ASSERT_EQ(limiter.allow("client").allowed, model.allow(t)) << t;
  }
  std::int64_t first = 1051;
  while (!SlidingLogModel(model).allow(first)) ++first;  // a copy: probing must not consume
  EXPECT_EQ(earliest_admission_ns(limiter, "client", 1050, 1), first - 1050);
}

TEST(CompareArithmetic, JainIndex) {
  EXPECT_DOUBLE_EQ(jain_index({0.5, 0.5, 0.5, 0.5}), 1.0);
  EXPECT_DOUBLE_EQ(jain_index({1.0, 0.0, 0.0, 0.0}), 0.25);
  EXPECT_DOUBLE_EQ(jain_index({1.0, 0.5}), 2.25 / 2.5);
}

/// `text` is refused with a "--redis: " message that does not quote `secret`.
void expect_refused_quietly(const char* text, const char* secret) {
  try {
    parse_endpoint(text);
    ADD_FAILURE() << text << " was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_EQ(std::string(error.what()).rfind("--redis: ", 0), 0u) << error.what();
    EXPECT_EQ(std::string(error.what()).find(secret), std::string::npos) << error.what();
  }
}

TEST(CompareEndpoint, UrlsAndHostPortAndNoPasswordShown) {
  const Endpoint e = parse_endpoint("redis://app:p%40ss:word@cache.example:6380/3");
  EXPECT_EQ(e.host, "cache.example");
  EXPECT_EQ(e.port, 6380);
  EXPECT_EQ(e.user, "app");
  EXPECT_EQ(e.password, "p@ss:word");
  EXPECT_EQ(e.database, 3);
  EXPECT_FALSE(e.tls);
  EXPECT_EQ(e.shown(), "redis://app:***@cache.example:6380/3");
  const Endpoint tls = parse_endpoint("rediss://:secret@[::1]");
  EXPECT_TRUE(tls.tls);
  EXPECT_EQ(tls.host, "::1");
  EXPECT_EQ(tls.port, 6379);
  EXPECT_EQ(tls.shown(), "rediss://:***@[::1]:6379");
  const Endpoint plain = parse_endpoint("127.0.0.1:7000");
  EXPECT_EQ(plain.host, "127.0.0.1");
  EXPECT_EQ(plain.port, 7000);
  EXPECT_EQ(plain.shown(), "redis://127.0.0.1:7000");
  for (const char* bad :
       {"localhost", "redis://:pw@host:99999", "redis://u:secret@:6379", "redis://h:1/x", "redis://u:%zz@h:1"}) {
    expect_refused_quietly(bad, "secret");
  }
}

/// Plain numbers for people: no scientific notation, thousands separated, three significant digits below
/// 1,000.
TEST(CompareFormat, PlainNumbersWithThousandsSeparators) {
  EXPECT_EQ(number(1140.0), "1,140");
  EXPECT_EQ(number(75'000'000.0), "75,000,000");
  EXPECT_EQ(number(-1234567.4), "-1,234,567");
  EXPECT_EQ(number(11.62), "11.6");
  EXPECT_EQ(number(2.0), "2");
  EXPECT_EQ(number(0.01234), "0.0123");
  EXPECT_EQ(number(0.0), "0");
  EXPECT_EQ(number(0.99321, 4), "0.9932");
  EXPECT_EQ(duration(75'000'000'000'000'000), "75,000,000 s");
  EXPECT_EQ(duration(1'500'000'000), "1.5 s");
  EXPECT_EQ(duration(750'000'000), "750 ms");
  EXPECT_EQ(decimal(1140.5), "1140.5");
  EXPECT_EQ(decimal(7.5e16), "75000000000000000");
  EXPECT_EQ(decimal(0.000000001), "0.000000001");
}

TEST(CompareFormat, MarkdownCellEscapesThePipe) {
  EXPECT_EQ(markdown_cell("curl|wget"), "curl\\|wget");
  EXPECT_EQ(markdown_cell("plain"), "plain");
}

/// A URL's scheme in any case is a URL (never a HOST:PORT whose "host" holds the password); other schemes
/// and a HOST:PORT holding '@' are refused, and no message quotes the password.
TEST(CompareEndpoint, SchemeInAnyCaseOtherSchemesRefusedPasswordNeverQuoted) {
  const Endpoint upper = parse_endpoint("REDIS://u:TopSecret@127.0.0.1:6380");
  EXPECT_EQ(upper.host, "127.0.0.1");
  EXPECT_EQ(upper.password, "TopSecret");
  EXPECT_FALSE(upper.tls);
  EXPECT_EQ(upper.shown().find("TopSecret"), std::string::npos) << upper.shown();
  const Endpoint at_sign = parse_endpoint("Rediss://benchu:Wr0ng@TopSecret@127.0.0.1:6380");
  EXPECT_TRUE(at_sign.tls);
  EXPECT_EQ(at_sign.password, "Wr0ng@TopSecret");
  EXPECT_EQ(at_sign.shown(), "rediss://benchu:***@127.0.0.1:6380");
  for (const char* bad : {"http://u:TopSecret@host:1", "bogus-redis://u:TopSecret@h:1", "u:TopSecret@127.0.0.1:1",
                          "redis://benchu:Wr0ng@TopSecret@127.0.0.1:99999", "redis://", "redis://[::1"}) {
    expect_refused_quietly(bad, "TopSecret");
  }
}

Options options_of(std::vector<std::string> args) {
  std::vector<char*> argv{const_cast<char*>("bench_compare")};
  for (std::string& a : args) argv.push_back(a.data());
  return Options(static_cast<int>(argv.size()), argv.data(), {"--period"});
}

/// Periods past 1,000,000 s would overflow the traces' nanoseconds (hangs, wrong numbers, crashes): the
/// flag refuses them, naming itself; the edges of the range parse.
TEST(CompareAccuracy, PeriodRangeEndsWhereTheTracesStillFit) {
  for (const char* bad : {"5e8", "9e8", "1e9", "1000001", "0", "4e-10"}) {
    std::vector<std::string> args{"--period", bad};
    try {
      (void)options_of(args).period_ns("--period", 1.0);
      ADD_FAILURE() << "--period " << bad << " was accepted";
    } catch (const std::invalid_argument& error) {
      EXPECT_EQ(std::string(error.what()).rfind("--period: ", 0), 0u) << error.what();
    }
  }
  EXPECT_EQ(options_of({"--period", "1e6"}).period_ns("--period", 1.0), 1'000'000'000'000'000);
  EXPECT_EQ(options_of({"--period", "1e-9"}).period_ns("--period", 1.0), 1);
}

/// At both ends of the period range (1 ns holds one request at most) every figure is what the policy's
/// formula says.
TEST(CompareAccuracy, FiguresAtTheEdgesOfThePeriodRange) {
  for (const std::int64_t w : {std::int64_t{1'000'000'000'000'000}, std::int64_t{1}}) {
    const std::int64_t limit = w == 1 ? 1 : 100;
    const Parameters p{.limit = limit, .window_ns = w, .burst = limit};
    const nanoseconds window(w);
    const Accuracy log = measure_accuracy(ratelimit::SlidingWindowLog{p.limit, window}, p);
    EXPECT_EQ(log.boundary_max, p.limit) << w;
    EXPECT_EQ(log.steady_fraction, 1.0) << w;
    EXPECT_EQ(log.readmit_ns, w) << w;
    const Accuracy fixed = measure_accuracy(ratelimit::FixedWindow{p.limit, window}, p);
    EXPECT_EQ(fixed.boundary_max, w == 1 ? p.limit : 2 * p.limit) << w;
    EXPECT_EQ(fixed.readmit_ns, w - w / 4) << w;
    const Accuracy gcra = measure_accuracy(ratelimit::Gcra{p.limit, window, p.burst}, p);
    EXPECT_EQ(gcra.readmit_ns, (w + p.limit - 1) / p.limit) << w;
    EXPECT_LE(gcra.boundary_max, 2 * p.limit) << w;
    EXPECT_GE(gcra.steady_fraction, 0.99) << w;
  }
}

}  // namespace
