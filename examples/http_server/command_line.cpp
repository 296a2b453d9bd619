// examples/http_server: the command line, parsed with CLI11.
#include "command_line.hpp"

#include <CLI/CLI.hpp>

#include <stdexcept>

#include "../redis_url.hpp"
#include "shaped_route.hpp"

namespace example {

namespace {

/// A CLI11 check that runs `parse` on the value: its `std::invalid_argument` is the message (CLI11 names the option).
template <class Parse>
auto parsed_by(Parse parse) {
  return [parse](const std::string& value) {
    try {
      parse(value);
      return std::string();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
  };
}

/// The options of the routes beside the API: /backend, /quota and a shaped route.
void add_route_options(CLI::App& app, Config& config) {
  app.add_option("--backend-capacity", config.backend_capacity,
                 "serve /backend from a simulated backend of this capacity (requests at full speed; more slow "
                 "every one down in proportion) behind an in-flight limit; 0: no /backend")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{100'000}));
  app.add_option("--backend-ms", config.backend_ms, "the simulated backend's service time at or below capacity, ms")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{10'000}));
  app.add_option("--backend-limit", config.backend_limit,
                 "the in-flight limit of /backend: aimd, gradient or vegas (adaptive) or a number (static)")
      ->check([](const std::string& value) {
        if (value == "aimd" || value == "gradient" || value == "vegas") return std::string();
        const bool digits =
            !value.empty() && value.size() < 10 && value.find_first_not_of("0123456789") == std::string::npos;
        return digits && std::stoll(value) >= 1 ? std::string() : "expected aimd, gradient, vegas or a number >= 1";
      });
  app.add_option("--backend-shadow", config.backend_shadow,
                 "with an adaptive --backend-limit: enforce this static limit instead and only report the adaptive "
                 "one (/metrics, and a line on stderr when it moves, at most one a second)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1'000'000}));
  app.add_option("--quota-burst", config.quota_burst,
                 "serve /quota, limited to 5 requests per second with this burst per client IP (GCRA, no other "
                 "layer): a remote API for clients that steer by its header fields; 0: no /quota")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1'000'000}));
  app.add_option("--shape", config.shape,
                 "PATH=RATE/s[,burst=B][,delay=N]: serve GET PATH shaped per client as nginx's limit_req (the first "
                 "delay+1 at once, up to burst delayed to the rate, the rest 429)")
      ->check(parsed_by([](const std::string& value) { (void)parse_shape(value); }));
}

}  // namespace

std::optional<int> parse_command_line(int argc, char** argv, Config& config) {
  CLI::App app{"ratelimit example: an HTTP API behind three rate-limit layers"};
  app.option_defaults()->always_capture_default();  // --help shows each option's default
  app.add_option("--port", config.port, "TCP port; 0 picks a free one (printed on stdout)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--host", config.host, "address to listen on");
  app.add_option("--redis", config.redis,
                 "a Redis server shared by all instances: a URL (redis://[user[:password]@]host[:port][/db], "
                 "rediss://..., unix:///path?db=N) or HOST[:PORT] ([IPv6]:PORT)")
      ->check(parsed_by([](const std::string& value) { (void)redis_connection(value, ""); }));
  app.add_flag("--leases", config.leases,
               "with --redis: the ip and plan layers lease slices of budget from Redis (LeasedLimiter, "
               "include/ratelimit/redis/README.md \"Budget leases\"); the sliding-log layers stay per request");
  app.add_option("--on-redis-error", config.on_redis_error,
                 "with --redis, when Redis fails: open (admit), closed (deny) or fallback (each process its share "
                 "of every limit in memory until Redis is back)")
      ->check(CLI::IsMember({"open", "closed", "fallback"}));
  app.add_option("--fallback-instances", config.fallback_instances,
                 "with --on-redis-error fallback: the server processes sharing the limits (each gets 1/N)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000}));
  app.add_option("--trusted-proxy", config.trusted_proxies, "peer address whose X-Forwarded-For is believed");
  std::vector<std::string> api_keys;
  app.add_option("--api-key", api_keys, "KEY=PLAN (free, pro, enterprise); demo-pro and demo-enterprise exist")
      ->check([](const std::string& entry) {
        return entry.find('=') == std::string::npos ? "expected KEY=PLAN, got " + entry : std::string();
      });
  app.add_option("--deny", config.deny, "client IP on the deny list (403)");
  app.add_flag("--no-limits", config.no_limits, "serve without rate limiting (for throughput comparisons)");
  app.add_flag("--shadow", config.shadow,
               "dry run: every layer in shadow mode (nothing denied; would-be denials in /metrics, shadow_denied)");
  app.add_option("--plans", config.plans_file,
                 "JSON file of plan numbers {\"free\": {\"per_minute\": N, \"per_day\": N, \"burst\": N}, ...}; "
                 "read at start and on SIGHUP, keeping usage")
      ->check(CLI::ExistingFile);
  app.add_option("--threads", config.threads, "HTTP worker threads (one per open connection); 0: cpp-httplib's default")
      ->check(CLI::Range(0, 4096));
  add_route_options(app, config);
  app.add_flag("--manual-clock", config.manual_clock,
               "tests only: time starts at 0, moved by POST /__test/advance?ms=N");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (const std::string& entry : api_keys) {
    const auto eq = entry.find('=');
    config.api_keys[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return std::nullopt;
}

}  // namespace example
