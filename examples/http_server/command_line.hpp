// examples/http_server: the command line (CLI11 lives in command_line.cpp only).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace example {

/// What the command line asks for; every field has the default `--help` shows.
struct Config {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string redis;    // a Redis URL or HOST[:PORT]; empty: the in-process backend
  bool leases = false;  // --leases: fixed-window and token-bucket layers lease budget (LeasedLimiter)
  std::string on_redis_error =
      "open";  // open | closed | fallback (include/ratelimit/redis/README.md "Fallback during outages")
  std::int64_t fallback_instances = 1;  // with fallback: the server processes sharing the limits
  std::vector<std::string> trusted_proxies;
  std::map<std::string, std::string, std::less<>> api_keys;  // --api-key KEY=PLAN, added to the key directory
  std::vector<std::string> deny;
  bool no_limits = false;
  bool manual_clock = false;
  bool shadow = false;
  // /backend: a simulated backend of fixed capacity behind an in-flight limit (backend.hpp, limits.cpp)
  std::int64_t backend_capacity = 0;   // 0: no /backend route
  std::int64_t backend_ms = 10;        // service time at or below capacity
  std::string backend_limit = "aimd";  // aimd | gradient | vegas | N (a static limit)
  std::int64_t backend_shadow = 0;     // > 0: enforce this static limit, only report the adaptive one
  int threads = 0;                     // HTTP worker threads; 0: cpp-httplib's default
  std::int64_t quota_burst = 0;        // > 0: /quota, GCRA 5/s with this burst per client IP; 0: no /quota
  std::string shape;  // --shape PATH=RATE/s,burst=B,delay=N: one route shaped as nginx's limit_req (shaped_route.cpp)
  std::string plans_file;  // JSON plan numbers, read at start and again on SIGHUP (limits.cpp)  // every layer in
                           // shadow (dry-run) mode: nothing is denied, would-be denials counted
};

/// Parses the command line into `config`. Returns the exit status when the program should stop now
/// (`--help`, or a bad option, reported on stderr), nothing when it should go on.
std::optional<int> parse_command_line(int argc, char** argv, Config& config);

}  // namespace example
