// Server-side cost of the Lua scripts at saturation: redis-benchmark -c 50 -P 16 running EVALSHA of each
// script against a redis-server started here, beside raw INCR and the design documents' reference GCRA
// script in the same run, each with the server's time and with the client's. Prints and writes CSV (name,
// requests per second, ratio to INCR, server time per call), and each script as a Redis Function (FCALL)
// beside its EVALSHA. bench/redis_scripts_ab.sh compares two
// revisions of the scripts, alternating runs on one server.
//
// Usage: bench_redis_scripts OUT.csv [requests]   (needs redis-server and redis-benchmark on PATH)
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <ratelimit/redis.hpp>

#include "../tests/redis/redis_server.hpp"

namespace {

double redis_benchmark(int port, long requests, const std::string& command) {
  const std::string cmd = "redis-benchmark -h 127.0.0.1 -p " + std::to_string(port) + " -c 50 -P 16 -r 100000 -n " +
                          std::to_string(requests) + " -q " + command + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  ::pclose(p);
  const auto at = out.rfind(" requests per second");
  if (at == std::string::npos) {
    std::fprintf(stderr, "bench_redis_scripts: unexpected output of %s:\n%s\n", cmd.c_str(), out.c_str());
    return -1;
  }
  const auto start = out.rfind(' ', at - 1);
  return std::atof(out.substr(start + 1, at - start - 1).c_str());
}

std::string file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_redis_scripts OUT.csv [requests]\n");
    return 2;
  }
  const long requests = argc > 2 ? std::atol(argv[2]) : 400'000;
  const auto binary = ratelimit_test::find_redis_server();
  if (!binary) {
    std::fprintf(stderr, "bench_redis_scripts: no redis-server on PATH, skipped\n");
    return 0;
  }
  ratelimit_test::RedisServer server(*binary);
  auto admin = server.admin();
  auto load = [&](const std::string& body) {
    const auto r = admin.command({"SCRIPT", "LOAD", body});
    return std::string(ratelimit::redis::engine::text(*r));
  };
  using ratelimit::redis::detail::script_for;
  // Key __rand_int__ spreads the checks over 100,000 keys; times come from the server (ARGV[1] = "").
  // Parameters: 100 per second, burst 100, in microseconds.
  // Each run its own keys: the scripts keep different value types.
  int run_index = 0;
  auto key = [&run_index] { return "bench" + std::to_string(run_index++) + ":{k:__rand_int__}:state"; };
  (void)admin.command({"FUNCTION", "LOAD", "REPLACE", ratelimit::redis::detail::function_library_code()});
  const std::string reference = load(file(std::string(RATELIMIT_SOURCE_DIR) + "/bench/reference_gcra.lua"));
  std::vector<std::pair<std::string, std::string>> runs{
      {"INCR", "INCR " + key()},
      {"reference GCRA (GET, SET, PEXPIRE)", "EVALSHA " + reference + " 1 " + key() + " \"\" 10000 1000000"},
      {"reference GCRA, client time", "EVALSHA " + reference + " 1 " + key() + " 1700000000000000 10000 1000000"},
  };
  for (const char* kind : {"gcra", "token_bucket", "fixed_window", "sliding_window_counter", "sliding_window_log"}) {
    const std::string sha = load(std::string(script_for(kind).body));
    const std::string params =
        std::string(kind) == "gcra" || std::string(kind) == "token_bucket" ? "100 10000" : "100 1000000";
    runs.emplace_back(std::string("ratelimit ") + kind, "EVALSHA " + sha + " 1 " + key() + " \"\" 1 0 " + params);
    // With the time passed in, as the reference script's client-time row has it.
    runs.emplace_back(std::string("ratelimit ") + kind + ", client time",
                      "EVALSHA " + sha + " 1 " + key() + " 1700000000000000 1 0 " + params);
    // The same script as a Redis Function (FCALL of the loaded library), with both time sources.
    const std::string function(script_for(kind).function);
    runs.emplace_back(std::string("ratelimit ") + kind + ", FCALL",
                      "FCALL " + function + " 1 " + key() + " \"\" 1 0 " + params);
    runs.emplace_back(std::string("ratelimit ") + kind + ", client time, FCALL",
                      "FCALL " + function + " 1 " + key() + " 1700000000000000 1 0 " + params);
  }
  // The server's own time per call (INFO commandstats) is the steadier figure on a shared machine: it
  // leaves out the client's and the network's share.
  auto server_usec_per_call = [&admin](const std::string& command) {
    const auto r = admin.command({"INFO", "commandstats"});
    const std::string info(ratelimit::redis::engine::text(*r));
    const std::string tag = "cmdstat_" + command + ":";
    const auto at = info.find(tag);
    const auto usec = info.find("usec_per_call=", at);
    return at == std::string::npos || usec == std::string::npos ? -1.0 : std::atof(info.c_str() + usec + 14);
  };
  std::ofstream out(argv[1]);
  out << "name,requests_per_second,ratio_to_incr,server_usec_per_call\n";
  double incr = 0;
  for (const auto& [name, command] : runs) {
    admin.command({"CONFIG", "RESETSTAT"});
    const double rps = redis_benchmark(server.port(), requests, command);
    const double usec = server_usec_per_call(command.substr(0, command.find(' ')) == "INCR"    ? "incr"
                                             : command.substr(0, command.find(' ')) == "FCALL" ? "fcall"
                                                                                               : "evalsha");
    if (name == "INCR") incr = rps;
    std::printf("%-40s %12.0f req/s  %.2fx INCR  %6.2f us/call in the server\n", name.c_str(), rps,
                incr > 0 ? rps / incr : 0.0, usec);
    out << '"' << name << "\"," << rps << ',' << (incr > 0 ? rps / incr : 0.0) << ',' << usec << '\n';
  }
}
