// bench_compare: the five policies side by side on the same workload (bench/README.md "Compare"): cost
// per check and per key, and accuracy under the parameters given, as Markdown, CSV and gnuplot data.
//
//   bench_compare --out DIR [--limit 100] [--period 1] [--burst 100] [--keys 1000000]
//                 [--machine TEXT --date TEXT --commit TEXT] [--rules FILE] [--redis-csv FILE | --redis-note TEXT]
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <ratelimit/ratelimit.hpp>

#include "accuracy.hpp"
#include "cost.hpp"
#include "format.hpp"
#include "options.hpp"
#include "output.hpp"

namespace {

using namespace bench::compare;

/// The Redis columns of one policy, as bench_compare_redis wrote them.
struct RedisCost {
  double ns = 0;
  double cpu_us = 0;
  double round_trips = 0;
};

struct Row {
  std::string name;
  Cost cost;
  Accuracy accuracy;
  std::optional<RedisCost> redis;
};

constexpr std::int64_t kMaxLimit = 10'000;

struct Run {
  Parameters parameters;
  std::size_t keys = 1'000'000;
  std::int64_t hot_checks = 2'000'000;
  std::string out = ".";
  std::string machine, date, commit, rules_file, redis_note;
  std::map<std::string, RedisCost> redis;
};

template <ratelimit::Policy P>
Row row(const std::string& name, const P& policy, const Run& run, const bench::KeyStream& keys) {
  Row r{.name = name, .cost = {}, .accuracy = measure_accuracy(policy, run.parameters), .redis = std::nullopt};
  if (keys.size() > 0) r.cost = measure_cost<P>(keys, run.hot_checks);
  if (const auto it = run.redis.find(name); it != run.redis.end()) r.redis = it->second;
  std::fprintf(stderr, "compare: %s done\n", name.c_str());
  return r;
}

std::vector<Row> measure(const Run& run) {
  const Parameters& p = run.parameters;
  const std::chrono::nanoseconds w(p.window_ns);
  const bench::KeyStream keys(run.keys);
  std::vector<Row> rows;
  rows.push_back(row("fixed window", ratelimit::FixedWindow{p.limit, w}, run, keys));
  rows.push_back(row("sliding window log", ratelimit::SlidingWindowLog{p.limit, w}, run, keys));
  rows.push_back(row("sliding window counter", ratelimit::SlidingWindowCounter{p.limit, w}, run, keys));
  rows.push_back(row("token bucket", ratelimit::TokenBucket{p.burst, p.limit, w}, run, keys));
  rows.push_back(row("GCRA", ratelimit::Gcra{p.limit, w, p.burst}, run, keys));
  return rows;
}

/// "exact (412)" or "exact 300 of 412; early by up to 3 ms in 5; late by up to 10 ms".
std::string retry_summary(const RetryCheck& r) {
  if (r.denials == 0) return "no denials";
  if (r.exact == r.denials) return "exact (" + std::to_string(r.denials) + " of " + std::to_string(r.denials) + ")";
  std::string out = "exact " + std::to_string(r.exact) + " of " + std::to_string(r.denials);
  if (r.early > 0) out += "; early by up to " + duration(r.worst_early_ns) + " in " + std::to_string(r.early);
  if (r.worst_late_ns > 0) out += "; late by up to " + duration(r.worst_late_ns);
  return out;
}

/// The 100 clients share 1.5 limits per window: below one request per client per window a client's share
/// is mostly chance, so the cell says so instead of a number.
std::string fairness_cell(const Accuracy& a, const Parameters& p) {
  if (!fairness_meaningful(p)) return "n/a: fewer than 1 request per client per window";
  return percent(a.min_share) + " to " + percent(a.max_share) + " (" + number(a.jain, 4) + ")";
}

std::vector<std::string> cells(const Row& r, const Parameters& p) {
  const Accuracy& a = r.accuracy;
  const auto redis = [&](double v, int precision) { return r.redis ? number(v, precision) : std::string("-"); };
  const bool cost = r.cost.hot_key_ns > 0;  // not measured with --keys 0
  const auto measured = [&](double v) { return cost ? number(v) : std::string("-"); };
  return {r.name,
          measured(r.cost.hot_key_ns),
          measured(r.cost.many_keys_ns),
          measured(r.cost.two_threads_ns),
          measured(r.cost.bytes_per_key),
          redis(r.redis ? r.redis->ns / 1e3 : 0, 3),
          redis(r.redis ? r.redis->cpu_us : 0, 3),
          redis(r.redis ? r.redis->round_trips : 0, 3),
          grouped(a.boundary_max) + " (" + number(fraction(a.boundary_max, p.limit)) + "x)",
          percent(a.steady_fraction),
          duration(a.readmit_ns),
          duration(a.burst_told_ns),
          fairness_cell(a, p),
          retry_summary(a.retry)};
}

std::vector<std::string> header(std::size_t keys) {
  return {"policy",
          "hot key, ns",
          grouped(static_cast<long long>(keys)) + " keys, ns",
          "2 threads, one key, ns",
          "bytes per key",
          "Redis, us per check",
          "Redis CPU, us per check",
          "Redis round trips per check",
          "most in any window (x limit)",
          "steady client at the limit: admitted",
          "after a burst: passes again after",
          "Retry-After then",
          "100 clients, one key: admitted share (Jain)",
          "Retry-After vs exact wait, client at 2x"};
}

std::string markdown_row(const std::vector<std::string>& cells) {
  std::string out = "|";
  for (const std::string& c : cells) out += " " + c + " |";
  return out + "\n";
}

std::string table(const std::vector<Row>& rows, const Parameters& p, std::size_t keys) {
  const std::vector<std::string> names = header(keys);
  std::string out = markdown_row(names) + "|---|";
  for (std::size_t i = 1; i < names.size(); ++i) out += "---:|";
  out += "\n";
  for (const Row& r : rows) out += markdown_row(cells(r, p));
  return out;
}

/// Nanoseconds as seconds.
double seconds(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }

std::string parameters_line(const Parameters& p) {
  return "limit " + std::to_string(p.limit) + " per " + duration(p.window_ns) + " (windows, log, counter; GCRA's " +
         "limit per period, the bucket's refill), burst " + std::to_string(p.burst) +
         " (token bucket capacity, GCRA burst)";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Every line of `text` as a Markdown quote.
std::string quoted(const std::string& text) {
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) out += line.empty() ? ">\n" : "> " + line + "\n";
  return out;
}

void write_markdown(const std::string& path, const std::vector<Row>& rows, const Run& run) {
  const Parameters& p = run.parameters;
  std::ostringstream out;
  out << "# The five policies side by side\n\n"
      << "Machine: " << run.machine << "; date: " << run.date << "; commit: " << run.commit << ".\n\n"
      << "Parameters: " << parameters_line(p) << ". Cost columns: parameters that admit every check "
      << "(`bench/memory_cases.hpp`), wall time, median of three runs; bytes per key: heap bytes at "
      << grouped(static_cast<long long>(run.keys))
      << " keys; on a busy machine (load average above) the cost columns are for orientation only.";
  if (!run.redis_note.empty()) out << " Redis: " << run.redis_note << ".";
  out << "\n\n"
      << table(rows, p, run.keys) << "\n"
      << "- **most in any window**: the most a client sending max(limit, burst) requests just before a window "
         "edge and as many just after (then a flood at 10x the limit) got admitted in any interval of one "
         "window.\n"
      << "- **steady client at the limit**: one request every window/limit, 20 windows: the share admitted.\n"
      << "- **after a burst**: as many requests at once as pass, a quarter into a window: how long until one "
         "passes again (exact, by probing), and the Retry-After its first denial carried.\n"
      << "- **100 clients, one key**: Poisson clients at 1.5x the key's limit together, 50 windows: the "
         "smallest and largest share of its requests a client got admitted, and Jain's index (1 = all equal); "
         "n/a below one request per client per window (a limit under 67).\n"
      << "- **Retry-After vs exact wait**: a Poisson client at 2x the limit, 20 windows: at every denial (the first "
         "2,000), "
         "Retry-After against the shortest wait that passes.\n\n";
  if (!run.rules_file.empty()) {
    out << "Which policy when (include/ratelimit/README.md \"Which policy when\"):\n\n"
        << quoted(read_file(run.rules_file)) << "\n";
  }
  out << "![The five policies side by side](compare.png)\n";
  write_text(path, out.str());
}

void write_csv(const std::string& path, const std::vector<Row>& rows, const Parameters& p) {
  std::ostringstream out;
  out << "policy,hot_key_ns,many_keys_ns,two_threads_ns,bytes_per_key,redis_ns,redis_cpu_us,redis_round_trips,"
         "limit,window_s,burst,boundary_max,steady_admitted,readmit_s,burst_retry_after_s,jain,min_share,max_share,"
         "retry_denials,retry_exact,retry_early,retry_worst_early_s,retry_worst_late_s\n";
  for (const Row& r : rows) {
    const Accuracy& a = r.accuracy;
    const auto opt = [&](double v) { return r.redis ? decimal(v) : std::string(); };
    out << r.name << ',' << decimal(r.cost.hot_key_ns) << ',' << decimal(r.cost.many_keys_ns) << ','
        << decimal(r.cost.two_threads_ns) << ',' << decimal(r.cost.bytes_per_key) << ','
        << opt(r.redis ? r.redis->ns : 0) << ',' << opt(r.redis ? r.redis->cpu_us : 0) << ','
        << opt(r.redis ? r.redis->round_trips : 0) << ',' << p.limit << ',' << decimal(seconds(p.window_ns)) << ','
        << p.burst << ',' << a.boundary_max << ',' << decimal(a.steady_fraction) << ','
        << decimal(seconds(a.readmit_ns)) << ',' << decimal(seconds(a.burst_told_ns)) << ',' << decimal(a.jain) << ','
        << decimal(a.min_share) << ',' << decimal(a.max_share) << ',' << a.retry.denials << ',' << a.retry.exact << ','
        << a.retry.early << ',' << decimal(seconds(a.retry.worst_early_ns)) << ','
        << decimal(seconds(a.retry.worst_late_ns)) << '\n';
  }
  write_text(path, out.str());
}

/// Whitespace-separated columns for bench/compare/compare.gp (times in windows, counts against the limit).
void write_chart_data(const std::string& path, const std::vector<Row>& rows, const Parameters& p) {
  std::ostringstream out;
  out << "# policy hot_key_ns many_keys_ns two_threads_ns bytes_per_key most_in_window_x steady_admitted "
         "readmit_windows retry_after_windows\n";
  const double w = static_cast<double>(p.window_ns);
  for (const Row& r : rows) {
    const Accuracy& a = r.accuracy;
    out << '"' << r.name << "\" " << r.cost.hot_key_ns << ' ' << r.cost.many_keys_ns << ' ' << r.cost.two_threads_ns
        << ' ' << r.cost.bytes_per_key << ' ' << fraction(a.boundary_max, p.limit) << ' ' << a.steady_fraction << ' '
        << static_cast<double>(a.readmit_ns) / w << ' ' << static_cast<double>(a.burst_told_ns) / w << '\n';
  }
  write_text(path, out.str());
}

/// policy,ns_per_check,redis_cpu_us_per_check,round_trips_per_check (bench_compare_redis's output).
std::map<std::string, RedisCost> read_redis_csv(const std::string& path) {
  std::map<std::string, RedisCost> out;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name, ns, cpu, trips;
    if (std::getline(fields, name, ',') && std::getline(fields, ns, ',') && std::getline(fields, cpu, ',') &&
        std::getline(fields, trips, ',')) {
      out[name] = {std::stod(ns), std::stod(cpu), std::stod(trips)};
    }
  }
  return out;
}

Run parse(int argc, char** argv) {
  const Options o(argc, argv,
                  {"--out", "--limit", "--period", "--burst", "--keys", "--machine", "--date", "--commit", "--rules",
                   "--redis-csv", "--redis-note", "--hot-checks"});
  Run run;
  // The accuracy traces grow with the limit and the burst (the fairness trace: 75 requests per unit).
  run.parameters.limit = o.integer("--limit", 100, 1, kMaxLimit);
  run.parameters.window_ns = o.period_ns("--period", 1.0);
  run.parameters.burst = o.integer("--burst", run.parameters.limit, 1, kMaxLimit);
  if (run.parameters.window_ns < run.parameters.limit) {
    throw std::invalid_argument("--period: must hold --limit nanoseconds at least (one request per ns at most)");
  }
  run.keys = static_cast<std::size_t>(o.integer("--keys", 1'000'000, 0, 100'000'000));
  run.hot_checks = o.integer("--hot-checks", 2'000'000, 1000, 1'000'000'000);
  run.out = o.text("--out", ".");
  run.machine = o.text("--machine", "unknown");
  run.date = o.text("--date", "unknown");
  run.commit = o.text("--commit", "unknown");
  run.rules_file = o.text("--rules", "");
  run.redis_note = o.text("--redis-note", "");
  if (const std::string csv = o.text("--redis-csv", ""); !csv.empty()) run.redis = read_redis_csv(csv);
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  return guarded_main("bench_compare", [&] {
    const Run run = parse(argc, argv);
    const std::string& out = run.out;
    require_directory(out);
    const std::vector<Row> rows = measure(run);
    write_markdown(out + "/compare.md", rows, run);
    write_csv(out + "/compare.csv", rows, run.parameters);
    write_chart_data(out + "/compare.dat", rows, run.parameters);
    std::cout << table(rows, run.parameters, run.keys);
    return 0;
  });
}
