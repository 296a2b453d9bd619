// Accuracy of the five policies on the same traffic, deterministic (ManualClock): how many requests each
// admits against the exact sliding-log answer, and the most it admits in any window of length W.
//
// Writes bench results as CSV (one summary file, and per-bucket time series for the charts) into the
// directory given as the first argument (default: current directory).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <ratelimit/ratelimit.hpp>

using namespace std::chrono_literals;
using ns = std::chrono::nanoseconds;

namespace {

constexpr std::int64_t kLimit = 100;
constexpr std::chrono::nanoseconds kWindow = 1s;
constexpr std::chrono::nanoseconds kBucket = 5ms;  // resolution of the time series

struct Request {
  std::chrono::nanoseconds at;
  int key;
};

struct Pattern {
  std::string name;
  std::vector<Request> requests;  // in time order
};

std::vector<Request> steady(double times_limit, std::chrono::seconds length) {
  std::vector<Request> out;
  const auto rate = static_cast<double>(kLimit) * times_limit;  // per window
  const auto count = static_cast<std::int64_t>(rate * static_cast<double>(length / kWindow));
  for (std::int64_t i = 0; i < count; ++i) {
    out.push_back({std::chrono::nanoseconds(static_cast<std::int64_t>(static_cast<double>(i) * 1e9 / rate)), 0});
  }
  return out;
}

/// A full limit in the last 10 ms before a window edge and another in the first 10 ms after it.
std::vector<Request> boundary_burst() {
  std::vector<Request> out;
  for (std::int64_t i = 0; i < kLimit; ++i) out.push_back({990ms + i * ns(10ms) / kLimit, 0});
  for (std::int64_t i = 0; i < kLimit; ++i) out.push_back({1000ms + i * ns(10ms) / kLimit, 0});
  for (std::int64_t i = 0; i < kLimit; ++i) out.push_back({2500ms + i * ns(10ms) / kLimit, 0});
  return out;
}

std::vector<Request> poisson(double times_limit, std::chrono::seconds length, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::exponential_distribution<double> gap(static_cast<double>(kLimit) * times_limit / 1e9);  // per ns
  std::vector<Request> out;
  for (double t = gap(random); t < static_cast<double>(std::chrono::nanoseconds(length).count()); t += gap(random)) {
    out.push_back({std::chrono::nanoseconds(static_cast<std::int64_t>(t)), 0});
  }
  return out;
}

/// 3x the limit for 1 s, silence for 2 s, repeated.
std::vector<Request> on_off(std::chrono::seconds length) {
  std::vector<Request> out;
  for (auto start = 0s; start < length; start += 3s) {
    for (std::int64_t i = 0; i < 3 * kLimit; ++i) out.push_back({start + i * ns(1s) / (3 * kLimit), 0});
  }
  return out;
}

/// 1,000 clients, each Poisson at 1.5x the limit, interleaved.
std::vector<Request> many_keys() {
  std::vector<Request> out;
  for (int key = 0; key < 1000; ++key) {
    for (const Request& r : poisson(1.5, 10s, 1000 + static_cast<std::uint64_t>(key))) out.push_back({r.at, key});
  }
  std::stable_sort(out.begin(), out.end(), [](const Request& a, const Request& b) { return a.at < b.at; });
  return out;
}

struct Result {
  std::int64_t admitted = 0;
  std::int64_t max_in_window = 0;                 // most admitted for one key in any window (t - W, t]
  std::vector<std::int64_t> admitted_per_bucket;  // key 0 only, for the charts
};

template <ratelimit::Policy P>
Result run(const P& policy, const Pattern& pattern) {
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter limiter(policy, {}, clock);
  Result result;
  std::map<int, std::vector<std::chrono::nanoseconds>> admitted_at;
  for (const Request& r : pattern.requests) {
    clock.set(ratelimit::ManualClock::time_point(r.at));
    if (!limiter.allow(std::to_string(r.key))) continue;
    ++result.admitted;
    admitted_at[r.key].push_back(r.at);
    if (r.key == 0) {
      const auto bucket = static_cast<std::size_t>(r.at / kBucket);
      if (result.admitted_per_bucket.size() <= bucket) result.admitted_per_bucket.resize(bucket + 1);
      ++result.admitted_per_bucket[bucket];
    }
  }
  for (const auto& [key, times] : admitted_at) {
    std::size_t first = 0;  // two pointers over (t - W, t]
    for (std::size_t i = 0; i < times.size(); ++i) {
      while (times[first] <= times[i] - kWindow) ++first;
      result.max_in_window = std::max(result.max_in_window, static_cast<std::int64_t>(i - first + 1));
    }
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  const std::vector<Pattern> patterns{
      {"steady_0.5x", steady(0.5, 10s)}, {"steady_1x", steady(1.0, 10s)},   {"steady_2x", steady(2.0, 10s)},
      {"boundary_burst", boundary_burst()}, {"poisson_1.2x", poisson(1.2, 60s, 7)}, {"on_off_3x", on_off(12s)},
      {"many_keys_1.5x", many_keys()},
  };
  using Runner = std::function<Result(const Pattern&)>;
  const std::vector<std::pair<std::string, Runner>> policies{
      {"fixed_window", [](const Pattern& p) { return run(ratelimit::FixedWindow{kLimit, kWindow}, p); }},
      {"sliding_window_log", [](const Pattern& p) { return run(ratelimit::SlidingWindowLog{kLimit, kWindow}, p); }},
      {"sliding_window_counter",
       [](const Pattern& p) { return run(ratelimit::SlidingWindowCounter{kLimit, kWindow}, p); }},
      {"token_bucket", [](const Pattern& p) { return run(ratelimit::TokenBucket{kLimit, kLimit, kWindow}, p); }},
      {"gcra", [](const Pattern& p) { return run(ratelimit::Gcra{kLimit, kWindow, kLimit}, p); }},
  };

  std::ofstream summary(dir + "/accuracy.csv");
  summary << "pattern,policy,requests,admitted,reference_admitted,error_percent,max_in_window,limit\n";
  std::printf("%-16s %-24s %9s %9s %9s %8s %13s\n", "pattern", "policy", "requests", "admitted", "reference",
              "error%", "max_in_window");
  for (const Pattern& pattern : patterns) {
    const Result reference = policies[1].second(pattern);  // the sliding log is exact
    std::map<std::string, Result> results;
    for (const auto& [name, runner] : policies) {
      const Result r = runner(pattern);
      const double error = reference.admitted == 0 ? 0.0
                                                   : 100.0 * static_cast<double>(r.admitted - reference.admitted) /
                                                         static_cast<double>(reference.admitted);
      summary << pattern.name << ',' << name << ',' << pattern.requests.size() << ',' << r.admitted << ','
              << reference.admitted << ',' << error << ',' << r.max_in_window << ',' << kLimit << '\n';
      std::printf("%-16s %-24s %9zu %9lld %9lld %8.2f %13lld\n", pattern.name.c_str(), name.c_str(),
                  pattern.requests.size(), static_cast<long long>(r.admitted), static_cast<long long>(reference.admitted),
                  error, static_cast<long long>(r.max_in_window));
      results[name] = r;
    }
    // Time series of key 0 for the charts: admitted so far, one row per bucket, one column per policy.
    std::ofstream series(dir + "/series_" + pattern.name + ".dat");
    series << "time_s";
    for (const auto& [name, runner] : policies) series << ' ' << name;
    series << '\n';
    std::size_t buckets = 0;
    for (const auto& [name, r] : results) buckets = std::max(buckets, r.admitted_per_bucket.size());
    for (std::size_t b = 0; b < buckets; ++b) {
      series << std::chrono::duration<double>(kBucket * static_cast<std::int64_t>(b)).count();
      for (const auto& [name, runner] : policies) {
        const auto& v = results[name].admitted_per_bucket;
        std::int64_t so_far = 0;
        for (std::size_t i = 0; i <= b && i < v.size(); ++i) so_far += v[i];
        series << ' ' << so_far;
      }
      series << '\n';
    }
  }
}
