// A dry run of a rate-limiting policy on yesterday's traffic: replays an access log (Common or Combined Log
// Format) with its own timestamps and prints which clients would have been limited, and how often.
//
//   replay --policy gcra --limit 60 --period 60 --burst 20 tests/data/access-combined-excerpt.log
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <ratelimit/ratelimit.hpp>

#include "replay.hpp"

namespace {

struct Settings {
  std::string policy = "gcra";
  std::int64_t limit = 60;
  double period_seconds = 60;
  std::int64_t burst = 20;
  std::string key = "client";
  std::size_t top = 15;
  std::string file;
};

template <ratelimit::Policy P>
replay::Report run(const P& policy, std::istream& log, replay::KeyField field) {
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter limiter(policy, {}, clock);
  return replay::run(log, limiter, clock, field);
}

replay::Report run(const Settings& s, std::istream& log) {
  const auto period = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s.period_seconds));
  const std::map<std::string, replay::KeyField> fields{
      {"client", replay::KeyField::client}, {"user_agent", replay::KeyField::user_agent}, {"path", replay::KeyField::target}};
  const replay::KeyField field = fields.at(s.key);
  if (s.policy == "fixed_window") return run(ratelimit::FixedWindow{s.limit, period}, log, field);
  if (s.policy == "sliding_window_log") return run(ratelimit::SlidingWindowLog{s.limit, period}, log, field);
  if (s.policy == "sliding_window_counter") return run(ratelimit::SlidingWindowCounter{s.limit, period}, log, field);
  if (s.policy == "token_bucket") return run(ratelimit::TokenBucket{s.burst, s.limit, period}, log, field);
  return run(ratelimit::Gcra{s.limit, period, s.burst}, log, field);
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"Replay an access log through a rate-limiting policy (a dry run on recorded traffic)."};
  app.add_option("file", s.file, "access log in Common/Combined Log Format ('-' for standard input)")->required();
  app.add_option("--policy", s.policy, "policy")
      ->check(CLI::IsMember({"fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket", "gcra"}))
      ->capture_default_str();
  app.add_option("--limit", s.limit, "requests per period (token bucket: refill tokens per period)")->capture_default_str();
  app.add_option("--period", s.period_seconds, "window or period in seconds")->capture_default_str();
  app.add_option("--burst", s.burst, "burst (GCRA) or capacity (token bucket)")->capture_default_str();
  app.add_option("--key", s.key, "what names a client")
      ->check(CLI::IsMember({"client", "user_agent", "path"}))
      ->capture_default_str();
  app.add_option("--top", s.top, "how many limited clients to list")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  replay::Report report;
  try {
    if (s.file == "-") {
      report = run(s, std::cin);
    } else {
      std::ifstream log(s.file);
      if (!log) {
        std::fprintf(stderr, "replay: cannot open %s\n", s.file.c_str());
        return 1;
      }
      report = run(s, log);
    }
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "replay: invalid policy: %s\n", e.what());
    return 2;
  }

  std::vector<std::pair<std::string, replay::ClientCounts>> limited;
  for (const auto& [key, counts] : report.clients) {
    if (counts.denied > 0) limited.emplace_back(key, counts);
  }
  std::sort(limited.begin(), limited.end(), [](const auto& a, const auto& b) {
    return a.second.denied != b.second.denied ? a.second.denied > b.second.denied : a.first < b.first;
  });
  std::printf("%s, limit %lld per %gs, burst %lld, keyed by %s\n", s.policy.c_str(), static_cast<long long>(s.limit),
              s.period_seconds, static_cast<long long>(s.burst), s.key.c_str());
  std::printf("lines %lld, malformed %lld, out of order %lld (replayed in time order)\n",
              static_cast<long long>(report.lines), static_cast<long long>(report.malformed),
              static_cast<long long>(report.out_of_order));
  std::printf("admitted %lld, denied %lld (%.2f%%), clients %zu, limited clients %zu\n",
              static_cast<long long>(report.admitted), static_cast<long long>(report.denied),
              report.admitted + report.denied > 0
                  ? 100.0 * static_cast<double>(report.denied) / static_cast<double>(report.admitted + report.denied)
                  : 0.0,
              report.clients.size(), limited.size());
  std::printf("\n%10s %10s  %s\n", "requests", "denied", "client");
  for (std::size_t i = 0; i < limited.size() && i < s.top; ++i) {
    std::printf("%10lld %10lld  %s\n", static_cast<long long>(limited[i].second.requests),
                static_cast<long long>(limited[i].second.denied), limited[i].first.c_str());
  }
}
