// A dry run of rate-limiting policies on yesterday's traffic: replays an access log (Common or Combined Log
// Format) with its own timestamps. Without --policy it compares all five policies side by side (admitted,
// denied, clients limited, the worst burst admitted in any window, how often clients were sent away and
// for how long), shows the per-client peak rates, and draws a timeline chart with gnuplot; with --policy it
// reports that one policy and the clients it limited most.
//
//   replay --limit 60 --period 60 --burst 20 --chart replay.png build/data/access-combined-2015-05.log
//   replay --policy gcra --limit 60 --period 60 --burst 20 build/data/access-combined-2015-05.log
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
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

const std::vector<std::string> kPolicies{"fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket",
                                         "gcra"};

struct Settings {
  std::string policy;  // empty: compare all five
  bool compare = false;
  std::int64_t limit = 60;
  double period_seconds = 60;
  std::int64_t burst = 20;
  std::string key = "client";
  std::size_t top = 15;
  std::string chart;
  std::string file;
};

template <ratelimit::Policy P>
replay::PolicyRun run(const P& policy, const replay::Traffic& traffic, std::chrono::nanoseconds period) {
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter limiter(policy, {}, clock);
  return replay::run(traffic, limiter, clock, period.count());
}

/// Runs `name` with the settings' numbers. Throws `std::invalid_argument` for parameters the policy refuses.
replay::PolicyRun run(const std::string& name, const Settings& s, std::chrono::nanoseconds period,
                      const replay::Traffic& t) {
  if (name == "fixed_window") return run(ratelimit::FixedWindow{s.limit, period}, t, period);
  if (name == "sliding_window_log") return run(ratelimit::SlidingWindowLog{s.limit, period}, t, period);
  if (name == "sliding_window_counter") return run(ratelimit::SlidingWindowCounter{s.limit, period}, t, period);
  if (name == "token_bucket") return run(ratelimit::TokenBucket{s.burst, s.limit, period}, t, period);
  return run(ratelimit::Gcra{s.limit, period, s.burst}, t, period);
}

/// "limit 60 per 60s" plus the burst only where the policy has one.
std::string parameters(const std::string& name, const Settings& s) {
  std::string out = "limit " + std::to_string(s.limit) + " per " + CLI::detail::to_string(s.period_seconds) + "s";
  if (name == "token_bucket") out += ", capacity " + std::to_string(s.burst);
  if (name == "gcra") out += ", burst " + std::to_string(s.burst);
  return out;
}

std::string seconds(std::int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", static_cast<double>(ns) / 1e9);
  return buf;
}

/// "1 h", "5 min", "10 s": a bin size for a title.
std::string span_label(std::int64_t ns) {
  constexpr std::int64_t kSecond = 1'000'000'000;
  if (ns % (3600 * kSecond) == 0) return std::to_string(ns / (3600 * kSecond)) + " h";
  if (ns % (60 * kSecond) == 0) return std::to_string(ns / (60 * kSecond)) + " min";
  return seconds(ns) + " s";
}

double percent(std::int64_t part, std::int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

void print_traffic(const replay::Traffic& t, const Settings& s, std::chrono::nanoseconds period) {
  std::printf(
      "lines %lld, malformed %lld, long keys %lld (over 512 bytes, not replayed), out of order %lld "
      "(replayed in time order)\n",
      static_cast<long long>(t.lines), static_cast<long long>(t.malformed), static_cast<long long>(t.long_keys),
      static_cast<long long>(t.out_of_order));
  std::printf("requests %zu, clients %zu, keyed by %s\n", t.time_ns.size(), t.clients.size(), s.key.c_str());
  if (t.time_ns.size() > 1) {
    const replay::Coverage c = replay::coverage(t, period.count());
    const std::uint64_t spanned =
        replay::gap(t.time_ns.back(), t.time_ns.front()) / static_cast<std::uint64_t>(period.count()) + 1;
    std::printf(
        "traffic in %lld of the %llu windows of %s s from the first request to the last; %lld window "
        "edges have traffic on both sides",
        static_cast<long long>(c.active), static_cast<unsigned long long>(spanned), seconds(period.count()).c_str(),
        static_cast<long long>(c.adjacent));
    if (c.adjacent * 10 < c.active) {
      std::printf(" (a sampled log?): bursts rarely span an edge, so the window policies can hardly differ");
    }
    std::printf("\n");
  }
  if (t.resolution_ns > 0 && t.resolution_ns >= period.count()) {
    std::printf(
        "warning: the log's timestamps are %s s apart, not finer than the %s s window: every request of "
        "a window looks simultaneous and the policies cannot be told apart; use a longer --period\n",
        seconds(t.resolution_ns).c_str(), seconds(period.count()).c_str());
  } else if (t.resolution_ns > 0 && s.limit > 0 && t.resolution_ns > period.count() / s.limit) {
    std::printf(
        "note: timestamps have %s s resolution, coarser than the rate's interval (%s s): requests of one "
        "second arrive at one instant (up to %lld of one client), so bursts look sharper than they were\n",
        seconds(t.resolution_ns).c_str(), seconds(period.count() / s.limit).c_str(),
        static_cast<long long>(t.most_at_one_instant));
  }
}

int single(const Settings& s, std::chrono::nanoseconds period, const replay::Traffic& t) {
  const replay::PolicyRun r = run(s.policy, s, period, t);
  std::vector<std::int64_t> requests(t.clients.size(), 0);
  for (const std::uint32_t c : t.client) ++requests[c];
  std::vector<std::size_t> limited;
  for (std::size_t c = 0; c < t.clients.size(); ++c) {
    if (r.denied_by_client[c] > 0) limited.push_back(c);
  }
  std::sort(limited.begin(), limited.end(), [&](std::size_t a, std::size_t b) {
    return r.denied_by_client[a] != r.denied_by_client[b] ? r.denied_by_client[a] > r.denied_by_client[b]
                                                          : t.clients[a] < t.clients[b];
  });
  std::printf("%s, %s, keyed by %s\n", s.policy.c_str(), parameters(s.policy, s).c_str(), s.key.c_str());
  print_traffic(t, s, period);
  std::printf("admitted %lld, denied %lld (%.2f%%), clients %zu, limited clients %zu\n",
              static_cast<long long>(r.admitted), static_cast<long long>(r.denied),
              percent(r.denied, r.admitted + r.denied), t.clients.size(), limited.size());
  std::printf("\n%10s %10s  %s\n", "requests", "denied", "client");
  for (std::size_t i = 0; i < limited.size() && i < s.top; ++i) {
    const std::size_t c = limited[i];
    std::printf("%10lld %10lld  %s\n", static_cast<long long>(requests[c]),
                static_cast<long long>(r.denied_by_client[c]), t.clients[c].c_str());
  }
  return 0;
}

/// Writes `<chart>.dat`, `<chart>.client.dat` and `<chart>.gp` and runs gnuplot on them to draw `chart`
/// (PNG): on top the requests per time bin of all clients and the denials of each policy; below, the
/// client with the highest peak rate around its busiest window, admitted so far by each policy.
void write_chart(const std::string& chart, const Settings& s, std::chrono::nanoseconds period, const replay::Traffic& t,
                 const std::vector<replay::PolicyRun>& runs) {
  if (t.time_ns.empty()) return;
  constexpr std::int64_t kSecond = 1'000'000'000;
  const std::uint64_t span = replay::gap(t.time_ns.back(), t.time_ns.front());  // up to 2^64 - 1
  // About 100-200 bins of a round size, each at least one window.
  std::int64_t bin = 0;
  for (const std::int64_t b : {1, 10, 60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400, 365 * 86400}) {
    bin = b * kSecond;
    if (span / static_cast<std::uint64_t>(bin) <= 200) break;
  }
  bin = std::max(bin, period.count());
  const std::size_t bins = static_cast<std::size_t>(span / static_cast<std::uint64_t>(bin)) + 1;
  std::vector<std::int64_t> offered(bins, 0);
  std::vector<std::vector<std::int64_t>> denied(runs.size(), std::vector<std::int64_t>(bins, 0));
  for (std::size_t i = 0; i < t.time_ns.size(); ++i) {
    const auto b =
        static_cast<std::size_t>(replay::gap(t.time_ns[i], t.time_ns.front()) / static_cast<std::uint64_t>(bin));
    ++offered[b];
    for (std::size_t p = 0; p < runs.size(); ++p) denied[p][b] += runs[p].allowed[i] ? 0 : 1;
  }
  const std::string dat = chart + ".dat", client_dat = chart + ".client.dat", gp = chart + ".gp";
  const double hour = 3600.0 * kSecond;
  {
    std::ofstream out(dat);
    out << "hours requests";
    for (const std::string& name : kPolicies) out << ' ' << name;
    out << '\n';
    for (std::size_t b = 0; b < bins; ++b) {
      out << static_cast<double>(b) * static_cast<double>(bin) / hour << ' ' << offered[b];
      for (std::size_t p = 0; p < runs.size(); ++p) out << ' ' << denied[p][b];
      out << '\n';
    }
  }
  // The busiest client: the highest offered peak; its requests from 3 windows before the end of its
  // busiest window to 3 windows after.
  const std::vector<std::int64_t> peaks = replay::offered_peaks(t, period.count());
  const auto busiest = static_cast<std::uint32_t>(std::max_element(peaks.begin(), peaks.end()) - peaks.begin());
  std::int64_t peak_at = 0;
  {
    replay::WindowPeak w;
    for (std::size_t i = 0; i < t.time_ns.size(); ++i) {
      if (t.client[i] != busiest) continue;
      const std::int64_t before = w.peak();
      w.add(t.time_ns[i], period.count());
      if (w.peak() > before) peak_at = t.time_ns[i];
    }
  }
  // Clamped to the times int64 holds (a window may be ~292 years, a time near 1677 or 2262).
  using ratelimit::detail::i128;
  auto clamped = [](i128 v) {
    return static_cast<std::int64_t>(std::clamp<i128>(v, ratelimit::detail::kInt64Min, ratelimit::detail::kInt64Max));
  };
  const std::int64_t from = clamped(i128{peak_at} - 4 * i128{period.count()});
  const std::int64_t to = clamped(i128{peak_at} + 3 * i128{period.count()});
  {
    std::ofstream out(client_dat);
    out << "seconds offered";
    for (const std::string& name : kPolicies) out << ' ' << name;
    out << '\n';
    std::vector<std::int64_t> admitted(runs.size(), 0);
    std::int64_t sent = 0;
    for (std::size_t i = 0; i < t.time_ns.size(); ++i) {
      if (t.client[i] != busiest || t.time_ns[i] < from || t.time_ns[i] > to) continue;
      ++sent;
      for (std::size_t p = 0; p < runs.size(); ++p) admitted[p] += runs[p].allowed[i] ? 1 : 0;
      out << static_cast<double>(replay::gap(t.time_ns[i], from)) / kSecond << ' ' << sent;
      for (const std::int64_t a : admitted) out << ' ' << a;
      out << '\n';
    }
  }
  {
    std::ofstream out(gp);
    out << "set terminal pngcairo size 900,620 font \"sans,10\"\n"
        << "set output '" << chart << "'\n"
        << "set termoption noenhanced\nset grid ytics\nset key left top\nset style data steps\n"
        << "set multiplot layout 2,1\n"
        << "set title 'All clients: requests and denials per " << span_label(bin) << ", " << parameters("gcra", s)
        << " (token bucket: capacity " << s.burst << ")'\n"
        << "set ylabel 'requests per bin'\nset xlabel 'hours since the first request'\nset logscale y\n"
        << "set yrange [0.8:*]\n"
        << "plot '" << dat << "' using 1:2 title 'offered' lw 2 lc rgb '#555555', for [i=3:7] '" << dat
        << "' using 1:(column(i) > 0 ? column(i) : 1/0) title 'denied: '.columnhead(i) with points pt i-2\n"
        << "unset logscale y\nset yrange [*:*]\n"
        << "set title 'Busiest client (" << t.clients[busiest] << ", peak " << peaks[busiest] << " per "
        << seconds(period.count()) << " s): requests so far, and admitted so far by each policy'\n"
        << "set ylabel 'requests so far'\nset xlabel 'seconds'\n"
        << "plot '" << client_dat << "' using 1:2 title 'offered' lw 2 lc rgb '#555555', for [i=3:7] '" << client_dat
        << "' using 1:i title columnhead(i) lw 2 dt i-2\n"
        << "unset multiplot\n";
  }
  const std::string command = "gnuplot '" + gp + "'";
  if (std::system(command.c_str()) == 0) {
    std::printf("\nchart: %s (data %s, %s)\n", chart.c_str(), dat.c_str(), client_dat.c_str());
  } else {
    std::printf("\nchart: gnuplot failed or is missing (apt-get install gnuplot-nox); data in %s, script %s\n",
                dat.c_str(), gp.c_str());
  }
}

int compare(const Settings& s, std::chrono::nanoseconds period, const replay::Traffic& t) {
  std::vector<replay::PolicyRun> runs;
  for (const std::string& name : kPolicies) runs.push_back(run(name, s, period, t));
  std::printf("all five policies, limit %lld per %gs (token bucket: capacity %lld, gcra: burst %lld)\n",
              static_cast<long long>(s.limit), s.period_seconds, static_cast<long long>(s.burst),
              static_cast<long long>(s.burst));
  print_traffic(t, s, period);
  const std::string window = seconds(period.count()) + "s";
  std::printf("\n%-23s %9s %8s %7s %8s %11s %7s %9s %9s\n", "policy", "admitted", "denied", "denied%", "limited",
              ("burst/" + window).c_str(), "waits", "wait p50", "wait max");
  for (std::size_t p = 0; p < runs.size(); ++p) {
    const replay::PolicyRun& r = runs[p];
    std::printf("%-23s %9lld %8lld %6.2f%% %8zu %11lld %7lld %8ss %8ss\n", kPolicies[p].c_str(),
                static_cast<long long>(r.admitted), static_cast<long long>(r.denied),
                percent(r.denied, r.admitted + r.denied), r.limited_clients(), static_cast<long long>(r.worst_burst()),
                static_cast<long long>(r.waits), seconds(replay::quantile(r.wait_ns, 0.5)).c_str(),
                seconds(replay::quantile(r.wait_ns, 1.0)).c_str());
  }

  // Per-client peak rates: offered, and what each policy let through.
  std::vector<std::vector<std::int64_t>> columns{replay::offered_peaks(t, period.count())};
  for (const replay::PolicyRun& r : runs) columns.push_back(r.peak_admitted);
  for (auto& c : columns) std::sort(c.begin(), c.end());
  std::printf("\nper-client peak requests in any %s window (offered, then admitted by each policy)\n", window.c_str());
  std::printf("%-10s %8s", "clients", "offered");
  for (const std::string& name : kPolicies) {
    std::printf(" %*s", static_cast<int>(std::max<std::size_t>(name.size(), 8)), name.c_str());
  }
  std::printf("\n");
  for (const auto& [label, q] : std::vector<std::pair<const char*, double>>{
           {"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}, {"p99.9", 0.999}, {"max", 1.0}}) {
    std::printf("%-10s %8lld", label, static_cast<long long>(replay::quantile(columns[0], q)));
    for (std::size_t p = 0; p < runs.size(); ++p) {
      std::printf(" %*lld", static_cast<int>(std::max<std::size_t>(kPolicies[p].size(), 8)),
                  static_cast<long long>(replay::quantile(columns[p + 1], q)));
    }
    std::printf("\n");
  }
  std::printf(
      "%-10s %8lld", "> limit",
      static_cast<long long>(std::count_if(columns[0].begin(), columns[0].end(), [&](auto v) { return v > s.limit; })));
  for (std::size_t p = 0; p < runs.size(); ++p) {
    std::printf(" %*lld", static_cast<int>(std::max<std::size_t>(kPolicies[p].size(), 8)),
                static_cast<long long>(
                    std::count_if(columns[p + 1].begin(), columns[p + 1].end(), [&](auto v) { return v > s.limit; })));
  }
  std::printf("\n");
  if (!s.chart.empty()) write_chart(s.chart, s, period, t, runs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{
      "Replay an access log through rate-limiting policies (a dry run on recorded traffic). Without "
      "--policy, all five are compared side by side."};
  app.add_option("file", s.file, "access log in Common/Combined Log Format ('-' for standard input)")->required();
  app.add_option("--policy", s.policy, "replay only this policy (default: compare all five)")
      ->check(CLI::IsMember(kPolicies));
  app.add_flag("--compare", s.compare, "compare all five policies (the default without --policy)");
  app.add_option("--limit", s.limit, "requests per period (token bucket: refill tokens per period)")
      ->capture_default_str();
  app.add_option("--period", s.period_seconds, "window or period in seconds, in (0, 9223372036]")
      ->capture_default_str();
  app.add_option("--burst", s.burst, "burst (GCRA) or capacity (token bucket); window policies have none")
      ->capture_default_str();
  app.add_option("--key", s.key, "what names a client")
      ->check(CLI::IsMember({"client", "user_agent", "path"}))
      ->capture_default_str();
  app.add_option("--top", s.top, "how many limited clients to list (with --policy)")->capture_default_str();
  app.add_option("--chart", s.chart, "comparison: draw a timeline PNG here with gnuplot (and PATH.dat, PATH.gp)");
  CLI11_PARSE(app, argc, argv);
  if (s.compare && !s.policy.empty()) {
    std::fprintf(stderr, "replay: --compare runs all five policies; leave out --policy\n");
    return 2;
  }

  std::chrono::nanoseconds period{};
  try {
    period = replay::period_from_seconds(s.period_seconds);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "replay: %s\n", e.what());
    return 2;
  }
  const std::map<std::string, replay::KeyField> fields{{"client", replay::KeyField::client},
                                                       {"user_agent", replay::KeyField::user_agent},
                                                       {"path", replay::KeyField::target}};
  replay::Traffic traffic;
  if (s.file == "-") {
    traffic = replay::read_traffic(std::cin, fields.at(s.key));
  } else {
    std::ifstream log(s.file);
    if (!log) {
      std::fprintf(stderr, "replay: cannot open %s\n", s.file.c_str());
      return 1;
    }
    traffic = replay::read_traffic(log, fields.at(s.key));
  }
  try {
    return s.policy.empty() ? compare(s, period, traffic) : single(s, period, traffic);
  } catch (const std::invalid_argument& e) {  // only the policy's parameters: keys were checked when read
    std::fprintf(stderr, "replay: invalid policy: %s\n", e.what());
    return 2;
  }
}
