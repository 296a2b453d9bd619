// bench_compare_traffic: an access log (Common or Combined Log Format) through the five policies with the
// same parameters, side by side (bench/README.md "Compare"): admitted and denied per policy, the clients
// denied under each and by how much, and where the policies disagree; Markdown, CSV and gnuplot data.
// The log is read and replayed by examples/replay.hpp, with the flags of examples/replay.
//
//   bench_compare_traffic --out DIR [--limit 60] [--period 60] [--burst 20] [--key client] [--top 10] LOG
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <iostream>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <ratelimit/ratelimit.hpp>

#include "../../examples/replay.hpp"
#include "format.hpp"
#include "metrics.hpp"
#include "options.hpp"
#include "output.hpp"

namespace {

using namespace bench::compare;

const std::vector<std::string> kNames{"fixed window", "sliding window log", "sliding window counter", "token bucket",
                                      "GCRA"};

struct Settings {
  std::int64_t limit = 60;
  std::int64_t period_ns = 60'000'000'000;
  std::int64_t burst = 20;
  std::string key = "client";
  std::size_t top = 10;
  std::string out = ".";
  std::string file;
};

template <ratelimit::Policy P>
replay::PolicyRun run(const P& policy, const replay::Traffic& t, std::int64_t period_ns) {
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter limiter(policy, {}, clock);
  return replay::run(t, limiter, clock, period_ns);
}

std::vector<replay::PolicyRun> run_all(const Settings& s, const replay::Traffic& t) {
  const std::chrono::nanoseconds w(s.period_ns);
  return {run(ratelimit::FixedWindow{s.limit, w}, t, s.period_ns),
          run(ratelimit::SlidingWindowLog{s.limit, w}, t, s.period_ns),
          run(ratelimit::SlidingWindowCounter{s.limit, w}, t, s.period_ns),
          run(ratelimit::TokenBucket{s.burst, s.limit, w}, t, s.period_ns),
          run(ratelimit::Gcra{s.limit, w, s.burst}, t, s.period_ns)};
}

/// Requests per client.
std::vector<std::int64_t> requests_per_client(const replay::Traffic& t) {
  std::vector<std::int64_t> out(t.clients.size(), 0);
  for (const std::uint32_t c : t.client) ++out[c];
  return out;
}

/// Clients ordered by the most requests any policy denied them (ties: by key), those with a denial only.
std::vector<std::size_t> most_denied(const std::vector<replay::PolicyRun>& runs, const replay::Traffic& t) {
  std::vector<std::int64_t> worst(t.clients.size(), 0);
  for (const replay::PolicyRun& r : runs) {
    for (std::size_t c = 0; c < worst.size(); ++c) worst[c] = std::max(worst[c], r.denied_by_client[c]);
  }
  std::vector<std::size_t> order;
  for (std::size_t c = 0; c < worst.size(); ++c) {
    if (worst[c] > 0) order.push_back(c);
  }
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return worst[a] != worst[b] ? worst[a] > worst[b] : t.clients[a] < t.clients[b];
  });
  return order;
}

std::string policy_table(const std::vector<replay::PolicyRun>& runs, const replay::Traffic& t) {
  std::string out =
      "| policy | admitted | denied | denied % | clients denied | most denied one client | "
      "most admitted to one client in one window |\n|---|---:|---:|---:|---:|---:|---:|\n";
  for (std::size_t p = 0; p < runs.size(); ++p) {
    const replay::PolicyRun& r = runs[p];
    const auto worst = std::max_element(r.denied_by_client.begin(), r.denied_by_client.end());
    const bool any = worst != r.denied_by_client.end() && *worst > 0;
    out += "| " + kNames[p] + " | " + std::to_string(r.admitted) + " | " + std::to_string(r.denied) + " | " +
           percent(fraction(r.denied, r.admitted + r.denied)) + " | " + std::to_string(r.limited_clients()) + " | " +
           (any ? std::to_string(*worst) + " (" +
                      markdown_cell(t.clients[static_cast<std::size_t>(worst - r.denied_by_client.begin())]) + ")"
                : std::string("0")) +
           " | " + std::to_string(r.worst_burst()) + " |\n";
  }
  return out;
}

std::string clients_table(const std::vector<replay::PolicyRun>& runs, const replay::Traffic& t,
                          const std::vector<std::size_t>& clients) {
  const std::vector<std::int64_t> sent = requests_per_client(t);
  std::string out = "| client | requests |";
  for (const std::string& n : kNames) out += " denied: " + n + " |";
  out += "\n|---|---:|---:|---:|---:|---:|---:|\n";
  for (const std::size_t c : clients) {
    out += "| " + markdown_cell(t.clients[c]) + " | " + std::to_string(sent[c]) + " |";
    for (const replay::PolicyRun& r : runs) out.append(" ").append(std::to_string(r.denied_by_client[c])).append(" |");
    out += "\n";
  }
  return out;
}

/// Requests the policies decided differently: how many not all five agreed on, and per pair of policies.
std::string disagreement(const std::vector<replay::PolicyRun>& runs, const replay::Traffic& t) {
  std::int64_t split = 0;
  std::vector<std::vector<std::int64_t>> pair(runs.size(), std::vector<std::int64_t>(runs.size(), 0));
  std::vector<bool> client_split(t.clients.size(), false);
  for (std::size_t i = 0; i < t.time_ns.size(); ++i) {
    bool differ = false;
    for (std::size_t a = 0; a < runs.size(); ++a) {
      for (std::size_t b = a + 1; b < runs.size(); ++b) {
        if (runs[a].allowed[i] != runs[b].allowed[i]) ++pair[a][b], differ = true;
      }
    }
    if (differ) ++split, client_split[t.client[i]] = true;
  }
  std::string out = "The five policies decided " + std::to_string(split) + " of " + std::to_string(t.time_ns.size()) +
                    " requests (" + percent(fraction(split, static_cast<std::int64_t>(t.time_ns.size()))) + "), of " +
                    std::to_string(std::count(client_split.begin(), client_split.end(), true)) +
                    " clients, not all alike. Requests decided differently, per pair:\n\n|  |";
  for (std::size_t b = 1; b < runs.size(); ++b) out += " " + kNames[b] + " |";
  out += "\n|---|---:|---:|---:|---:|\n";
  for (std::size_t a = 0; a + 1 < runs.size(); ++a) {
    out += "| " + kNames[a] + " |";
    for (std::size_t b = 1; b < runs.size(); ++b)
      out.append(" ").append(b > a ? std::to_string(pair[a][b]) : "").append(" |");
    out += "\n";
  }
  return out;
}

void write_csv(const Settings& s, const std::vector<replay::PolicyRun>& runs, const replay::Traffic& t) {
  std::ostringstream out;
  out << "policy,admitted,denied,clients_denied,most_admitted_in_window,limit,period_s,burst\n";
  for (std::size_t p = 0; p < runs.size(); ++p) {
    out << kNames[p] << ',' << runs[p].admitted << ',' << runs[p].denied << ',' << runs[p].limited_clients() << ','
        << runs[p].worst_burst() << ',' << s.limit << ',' << decimal(static_cast<double>(s.period_ns) / 1e9) << ','
        << s.burst << '\n';
  }
  write_text(s.out + "/traffic.csv", out.str());
  std::ostringstream clients;
  clients << "client,requests";
  for (const std::string& n : kNames) clients << ",denied " << n;
  clients << '\n';
  const std::vector<std::int64_t> sent = requests_per_client(t);
  for (const std::size_t c : most_denied(runs, t)) {
    clients << csv_field(t.clients[c]) << ',' << sent[c];
    for (const replay::PolicyRun& r : runs) clients << ',' << r.denied_by_client[c];
    clients << '\n';
  }
  write_text(s.out + "/traffic_clients.csv", clients.str());
}

/// Gnuplot data (bench/compare/traffic.gp): per policy, and the top clients' denials under each policy.
void write_chart_data(const Settings& s, const std::vector<replay::PolicyRun>& runs, const replay::Traffic& t,
                      const std::vector<std::size_t>& top) {
  std::ostringstream policies;
  policies << "# policy denied clients_denied\n";
  for (std::size_t p = 0; p < runs.size(); ++p) {
    policies << '"' << kNames[p] << "\" " << runs[p].denied << ' ' << runs[p].limited_clients() << '\n';
  }
  write_text(s.out + "/traffic_policies.dat", policies.str());
  std::ostringstream clients;
  clients << "client";
  for (const std::string& n : kNames) clients << " \"" << n << '"';
  clients << '\n';
  for (const std::size_t c : top) {
    std::string name = t.clients[c].substr(0, 24);
    std::replace(name.begin(), name.end(), '"', '\'');
    clients << '"' << name << '"';
    for (const replay::PolicyRun& r : runs) clients << ' ' << r.denied_by_client[c];
    clients << '\n';
  }
  write_text(s.out + "/traffic_clients.dat", clients.str());
}

std::string report(const Settings& s, const std::vector<replay::PolicyRun>& runs, const replay::Traffic& t,
                   const std::vector<std::size_t>& top) {
  const std::string name = s.file.substr(s.file.find_last_of('/') + 1);
  return "# " + name + " through the five policies\n\n" + "Parameters: limit " + std::to_string(s.limit) + " per " +
         duration(s.period_ns) + ", burst " + std::to_string(s.burst) +
         " (token bucket capacity, GCRA burst); clients keyed by " + s.key + ". Log: " + std::to_string(t.lines) +
         " lines, " + std::to_string(t.malformed) + " malformed, " + std::to_string(t.long_keys) + " keys too long; " +
         std::to_string(t.time_ns.size()) + " requests of " + std::to_string(t.clients.size()) +
         " clients, timestamps every " + duration(t.resolution_ns) + " at the finest.\n\n" + policy_table(runs, t) +
         "\nThe " + std::to_string(top.size()) +
         " clients denied most (under any policy), and how much each policy denied them:\n\n" +
         clients_table(runs, t, top) + "\n" + disagreement(runs, t) + "\n![" + name +
         " through the five policies](traffic.png)\n";
}

Settings parse(int argc, char** argv) {
  const Options o(argc, argv, {"--out", "--limit", "--period", "--burst", "--key", "--top"});
  Settings s;
  s.limit = o.integer("--limit", 60, 1, 1'000'000'000);
  s.period_ns = o.period_ns("--period", 60.0);
  s.burst = o.integer("--burst", 20, 1, 1'000'000'000);
  if (s.period_ns < s.limit) {
    throw std::invalid_argument("--period: must hold --limit nanoseconds at least (one request per ns at most)");
  }
  s.key = o.text("--key", "client");
  if (s.key != "client" && s.key != "user_agent" && s.key != "path") {
    throw std::invalid_argument("--key: must be client, user_agent or path, got '" + s.key + "'");
  }
  s.top = static_cast<std::size_t>(o.integer("--top", 10, 1, 1000));
  s.out = o.text("--out", ".");
  if (o.positional().size() != 1) throw std::invalid_argument("LOG: give one access log file");
  s.file = o.positional().front();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  return guarded_main("bench_compare_traffic", [&] {
    const Settings s = parse(argc, argv);
    require_directory(s.out);
    if (std::filesystem::is_directory(s.file)) throw std::invalid_argument("LOG: " + s.file + " is a directory");
    std::ifstream log(s.file);
    if (!log) throw std::invalid_argument("LOG: cannot open " + s.file);
    const std::map<std::string, replay::KeyField> fields{{"client", replay::KeyField::client},
                                                         {"user_agent", replay::KeyField::user_agent},
                                                         {"path", replay::KeyField::target}};
    const replay::Traffic t = replay::read_traffic(log, fields.at(s.key));
    if (t.time_ns.empty()) {
      throw std::invalid_argument("LOG: no line in Common or Combined Log Format in " + s.file + " (" +
                                  std::to_string(t.lines) + " lines read)");
    }
    const std::vector<replay::PolicyRun> runs = run_all(s, t);
    std::vector<std::size_t> top = most_denied(runs, t);
    if (top.size() > s.top) top.resize(s.top);
    const std::string text = report(s, runs, t, top);
    write_text(s.out + "/traffic.md", text);
    write_csv(s, runs, t);
    write_chart_data(s, runs, t, top);
    std::cout << text;
    return 0;
  });
}
