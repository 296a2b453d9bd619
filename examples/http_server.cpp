// examples/http_server: a small HTTP API behind three rate-limit layers, with every header and RFC 9457
// 429 bodies.
//
//   layer 1  client IP            FixedWindow 1,000 / min                       policy "ip"
//   layer 2  X-API-Key plan       free 30/min, 1,000/day, burst 10 (unknown and missing keys, keyed per IP),
//                                 pro 300/min, 50,000/day, burst 50; enterprise 3,000/min, 500,000/day, burst 200
//                                 policies "<plan>-minute", "<plan>-day", "<plan>-burst"
//   layer 3  endpoint             /search 10/min and /export 5/min per client (API key, else IP),
//                                 /login 5 per 5 min per client IP, then blocked 15 min   policies "search", "export", "login"
//
// All layers are checked together, all or nothing. /health and /metrics are not limited. The client IP is
// the socket peer; X-Forwarded-For is believed only when the peer is a --trusted-proxy. An X-API-Key over
// 256 bytes gets 431, a key no limiter accepts (e.g. a 600-byte forwarded address) 400; any other
// exception 500; all with a short problem body and nothing of the exception's text.
//
//   http_server [--port N] [--host 127.0.0.1] [--redis HOST[:PORT]] [--trusted-proxy IP]... [--api-key KEY=PLAN]...
//               [--deny IP]... [--no-limits] [--manual-clock]
//
// --manual-clock is for tests: time starts at 0 and moves only by POST /__test/advance?ms=N.
#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <ratelimit/http.hpp>
#include <ratelimit/layers.hpp>
#include <ratelimit/http/problem.hpp>
#include <ratelimit/ratelimit.hpp>
#if RATELIMIT_EXAMPLE_REDIS
#include <ratelimit/redis.hpp>
#endif

#include "address.hpp"

#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

using namespace std::chrono_literals;

namespace {

/// Wall-clock time (minutes and days aligned to UTC), or, with --manual-clock, a time that starts at 0
/// and moves only when a test says so. Copies share the manual time.
class ServerClock {
 public:
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<ServerClock, duration>;

  explicit ServerClock(bool manual = false)
      : manual_ns_(manual ? std::make_shared<std::atomic<std::int64_t>>(0) : nullptr) {}

  [[nodiscard]] time_point now() const {
    if (manual_ns_) return time_point(duration(manual_ns_->load()));
    return time_point(std::chrono::duration_cast<duration>(std::chrono::system_clock::now().time_since_epoch()));
  }
  [[nodiscard]] bool manual() const { return manual_ns_ != nullptr; }
  void advance(duration d) const {
    if (manual_ns_) manual_ns_->fetch_add(d.count());
  }

 private:
  std::shared_ptr<std::atomic<std::int64_t>> manual_ns_;
};

/// Makes the in-process limiters: layered checks over them are atomic (one global lock order).
struct MemoryBackend {
  ServerClock clock;
  template <class P>
  std::unique_ptr<ratelimit::MemoryLimiter<P, ServerClock>> operator()(P policy, std::string_view /*name*/) const {
    return std::make_unique<ratelimit::MemoryLimiter<P, ServerClock>>(policy, ratelimit::MemoryOptions{}, clock);
  }
};

#if RATELIMIT_EXAMPLE_REDIS
/// Makes Redis limiters sharing one connection pool, so several server processes share every limit.
/// Each limiter gets its own key prefix from its layer name ("ratelimit:example:search:"): limiters of
/// one policy kind over the same keys would otherwise share Redis keys. Layered checks over them
/// consume in order and refund on a denial.
struct RedisBackend {
  std::shared_ptr<ratelimit::redis::ConnectionPool> pool;
  ServerClock clock;
  template <class P>
  std::unique_ptr<ratelimit::redis::RedisLimiter<P, ServerClock>> operator()(P policy, std::string_view name) const {
    return std::make_unique<ratelimit::redis::RedisLimiter<P, ServerClock>>(
        policy, pool, pool->options().key_prefix + std::string(name) + ":", clock);
  }
};
#endif

struct Config {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string redis;
  std::vector<std::string> trusted_proxies;
  std::vector<std::string> api_keys;  // KEY=PLAN
  std::vector<std::string> deny;
  bool no_limits = false;
  bool manual_clock = false;
};

/// The client address: the socket peer, or, when the peer is a trusted proxy, the right-most
/// X-Forwarded-For entry that is not itself a trusted proxy (entries left of it are client-supplied).
/// Several X-Forwarded-For lines are one list, joined in order (RFC 9110 section 5.3): reading only the
/// first line would let a client pick its address by sending a line of its own before the proxy's.
std::string client_ip(const httplib::Request& req, const std::set<std::string, std::less<>>& trusted) {
  const char* const field = "X-Forwarded-For";
  if (!trusted.contains(req.remote_addr) || !req.has_header(field)) return req.remote_addr;
  std::vector<std::string> hops;
  const std::size_t lines = req.get_header_value_count(field);
  for (std::size_t line = 0; line < lines; ++line) {
    std::stringstream list(req.get_header_value(field, line));
    for (std::string hop; std::getline(list, hop, ',');) {
      const auto b = hop.find_first_not_of(" \t");
      const auto e = hop.find_last_not_of(" \t");
      if (b != std::string::npos) hops.push_back(hop.substr(b, e - b + 1));
    }
  }
  for (auto it = hops.rbegin(); it != hops.rend(); ++it) {
    if (!trusted.contains(*it)) return *it;
  }
  return hops.empty() ? req.remote_addr : hops.front();
}

/// The service's layers, the interface `main` uses whatever the backend.
class Limits {
 public:
  virtual ~Limits() = default;
  /// The layers of one request; `keys` holds the strings the requests point into.
  virtual void layers_for(const std::string& path, const std::string& ip, const std::string& api_key,
                          std::vector<std::string>& keys, std::vector<ratelimit::LayerRequest>& out) = 0;
  /// Prometheus-style text of every layer's counters.
  virtual std::string metrics() = 0;
};

/// The limiters and layers of the service on one backend.
template <class Backend>
class BackendLimits final : public Limits {
 public:
  using IpLimiter = typename std::invoke_result_t<const Backend&, ratelimit::FixedWindow, std::string_view>::element_type;
  using EndpointLimiter =
      typename std::invoke_result_t<const Backend&, ratelimit::SlidingWindowLog, std::string_view>::element_type;

  BackendLimits(const Config& config, const Backend& make, ServerClock clock)
      : ip_(make(ratelimit::FixedWindow{.limit = 1000, .window = 1min}, "ip")),
        search_(make(ratelimit::SlidingWindowLog{.limit = 10, .window = 1min}, "search")),
        export_(make(ratelimit::SlidingWindowLog{.limit = 5, .window = 1min}, "export")),
        login_(make(ratelimit::SlidingWindowLog{.limit = 5, .window = 5min}, "login")),
        ip_layer_(*ip_, "ip"),
        search_layer_(*search_, "search"),
        export_layer_(*export_, "export"),
        login_layer_(*login_, "login", {.penalty = 15min}),
        tiers_(tier_options(), [this](std::string_view key) { return plan_of(key); }, make, clock) {
    for (const std::string& entry : config.api_keys) {
      const auto eq = entry.find('=');
      if (eq == std::string::npos) throw CLI::ValidationError("--api-key", "expected KEY=PLAN, got " + entry);
      directory_[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
    for (const std::string& ip : config.deny) ip_layer_.lists().deny(ip);
  }

  void layers_for(const std::string& path, const std::string& ip, const std::string& api_key,
                  std::vector<std::string>& keys, std::vector<ratelimit::LayerRequest>& out) override {
    keys.reserve(3);
    keys.push_back(ip);
    // Only a key in the directory is a client of its own; missing and unknown keys are the free plan per
    // IP, so inventing a new key per request gains nothing (not the free plan, not /search or /export).
    keys.push_back(!api_key.empty() && directory_.contains(api_key) ? "key:" + api_key : "ip:" + ip);
    out.push_back({&ip_layer_, keys[0], 1});
    tiers_.append_layers(keys[1], 1, out);
    if (path == "/search") out.push_back({&search_layer_, keys[1], 1});
    if (path == "/export") out.push_back({&export_layer_, keys[1], 1});
    if (path == "/login") out.push_back({&login_layer_, keys[0], 1});
  }

  std::string metrics() override {
    std::string out;
    auto add = [&](ratelimit::Layer& layer) {
      const auto c = layer.stats().snapshot();
      const std::string l = "{layer=\"" + std::string(layer.name()) + "\"} ";
      out += "ratelimit_allowed_total" + l + std::to_string(c.allowed) + "\n";
      out += "ratelimit_denied_total" + l + std::to_string(c.denied) + "\n";
      out += "ratelimit_rolled_back_total" + l + std::to_string(c.rolled_back) + "\n";
      out += "ratelimit_refunded_total" + l + std::to_string(c.refunded) + "\n";
      out += "ratelimit_backend_errors_total" + l + std::to_string(c.backend_errors) + "\n";
    };
    add(ip_layer_);
    for (std::size_t i = 0; i < tiers_.plan_count(); ++i) {
      auto& p = tiers_.plan_at(i);
      add(p.minute_layer);
      add(p.day_layer);
      add(p.burst_layer);
    }
    add(search_layer_);
    add(export_layer_);
    add(login_layer_);
    return out;
  }

 private:
  static ratelimit::TierOptions tier_options() {
    ratelimit::TierOptions o;
    o.plans = {{"free", 30, 1'000, 10}, {"pro", 300, 50'000, 50}, {"enterprise", 3'000, 500'000, 200}};
    o.default_plan = "free";
    return o;
  }
  std::optional<std::string> plan_of(std::string_view key) const {
    if (key.rfind("key:", 0) != 0) return std::nullopt;
    const auto it = directory_.find(key.substr(4));
    return it == directory_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }

  std::map<std::string, std::string, std::less<>> directory_{{"demo-pro", "pro"}, {"demo-enterprise", "enterprise"}};
  std::unique_ptr<IpLimiter> ip_;
  std::unique_ptr<EndpointLimiter> search_, export_, login_;
  ratelimit::LimiterLayer<IpLimiter> ip_layer_;
  ratelimit::LimiterLayer<EndpointLimiter> search_layer_, export_layer_, login_layer_;
  ratelimit::BasicTieredLimiter<Backend, ServerClock> tiers_;
};

void set_fields(httplib::Response& res, const ratelimit::LayeredDecision& d) {
  const auto entries = d.policy_decisions();
  for (const auto& [name, value] : ratelimit::http::rate_limit_fields(entries)) res.set_header(name, value);
}

void json_reply(httplib::Response& res, const nlohmann::json& body) { res.set_content(body.dump(), "application/json"); }

/// Longest X-API-Key accepted; every issued key is far shorter.
constexpr std::size_t kMaxApiKeyBytes = 256;

/// An RFC 9457 body with only the status and its reason: nothing of the request or of any exception.
void problem_reply(httplib::Response& res, int status, const char* title) {
  res.status = status;
  res.set_content(nlohmann::json{{"type", "about:blank"}, {"title", title}, {"status", status}}.dump(),
                  std::string(ratelimit::http::kProblemContentType));
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  CLI::App app{"ratelimit example: an HTTP API behind three rate-limit layers"};
  app.option_defaults()->always_capture_default();  // --help shows each option's default
  app.add_option("--port", config.port, "TCP port; 0 picks a free one (printed on stdout)")->check(CLI::Range(0, 65535));
  app.add_option("--host", config.host, "address to listen on");
  app.add_option("--redis", config.redis, "HOST[:PORT] ([IPv6]:PORT) of a Redis server shared by all instances")
      ->check([](const std::string& value) {
        try {
          (void)example::parse_address(value, 6379, "--redis");
          return std::string();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      });
  app.add_option("--trusted-proxy", config.trusted_proxies, "peer address whose X-Forwarded-For is believed");
  app.add_option("--api-key", config.api_keys, "KEY=PLAN (free, pro, enterprise); demo-pro and demo-enterprise exist");
  app.add_option("--deny", config.deny, "client IP on the deny list (403)");
  app.add_flag("--no-limits", config.no_limits, "serve without rate limiting (for throughput comparisons)");
  app.add_flag("--manual-clock", config.manual_clock, "tests only: time starts at 0, moved by POST /__test/advance?ms=N");
  CLI11_PARSE(app, argc, argv);

  // SIGINT/SIGTERM are taken by a thread that stops the server (no work in a signal handler).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const ServerClock clock(config.manual_clock);
  std::unique_ptr<Limits> limits_owner;
  if (config.redis.empty()) {
    limits_owner = std::make_unique<BackendLimits<MemoryBackend>>(config, MemoryBackend{clock}, clock);
  } else {
#if RATELIMIT_EXAMPLE_REDIS
    ratelimit::redis::RedisOptions options;
    const example::Address redis = example::parse_address(config.redis, 6379, "--redis");  // checked above
    options.host = redis.host;
    options.port = redis.port;
    options.pool_size = 16;
    options.key_prefix = "ratelimit:example:";
    // With --manual-clock every process runs on the test's time; otherwise Redis's TIME is the clock.
    options.time_source = clock.manual() ? ratelimit::redis::TimeSource::client : ratelimit::redis::TimeSource::server;
    auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(options);
    limits_owner = std::make_unique<BackendLimits<RedisBackend>>(config, RedisBackend{pool, clock}, clock);
#else
    std::cerr << "http_server: built without the Redis backend (hiredis missing)\n";
    return 2;
#endif
  }
  Limits& limits = *limits_owner;
  const std::set<std::string, std::less<>> trusted(config.trusted_proxies.begin(), config.trusted_proxies.end());
  httplib::Server server;
  // httplib writes headers and body separately: without TCP_NODELAY, Nagle plus delayed ACKs stall each
  // keep-alive response ~40 ms. And let a connection serve more than httplib's default of 5 requests.
  server.set_tcp_nodelay(true);
  server.set_keep_alive_max_count(10'000);

  server.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    using Handled = httplib::Server::HandlerResponse;
    if (config.no_limits || req.path == "/health" || req.path == "/metrics" || req.path.rfind("/__test/", 0) == 0) {
      return Handled::Unhandled;
    }
    const std::string api_key = req.get_header_value("X-API-Key");
    if (api_key.size() > kMaxApiKeyBytes) {
      problem_reply(res, 431, "Request Header Fields Too Large");
      return Handled::Handled;
    }
    std::vector<std::string> keys;
    std::vector<ratelimit::LayerRequest> layers;
    std::optional<ratelimit::LayeredDecision> checked;
    try {
      limits.layers_for(req.path, client_ip(req, trusted), api_key, keys, layers);
      checked = ratelimit::check_layers(layers);
    } catch (const std::invalid_argument&) {  // a key no limiter takes (too long); nothing was consumed
      problem_reply(res, 400, "Bad Request");
      return Handled::Handled;
    }
    const ratelimit::LayeredDecision& d = *checked;
    set_fields(res, d);
    if (d) return Handled::Unhandled;  // on to the route, with the headers set
    bool listed = false;
    for (const auto& o : d.layers) listed = listed || o.verdict == ratelimit::Verdict::deny_listed;
    if (listed) {
      problem_reply(res, 403, "Forbidden");
      return Handled::Handled;
    }
    const auto violated = d.violated_policies();
    res.status = 429;
    res.set_content(ratelimit::http::quota_exceeded_json(violated, d.decision, req.path),
                    std::string(ratelimit::http::kProblemContentType));
    return Handled::Handled;
  });

  // cpp-httplib's default answers an exception with its what() in an EXCEPTION_WHAT header: internals to
  // the client. Log it here and answer a bare 500 (backend down, a bug).
  server.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      std::cerr << "http_server: " << req.method << " " << req.path << ": " << e.what() << "\n";
    } catch (...) {
      std::cerr << "http_server: " << req.method << " " << req.path << ": unknown exception\n";
    }
    res.headers.clear();
    problem_reply(res, 500, "Internal Server Error");
  });

  server.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(limits.metrics(), "text/plain; version=0.0.4");
  });
  server.Get("/search", [](const httplib::Request& req, httplib::Response& res) {
    json_reply(res, {{"query", req.get_param_value("q")}, {"results", nlohmann::json::array()}});
  });
  server.Get("/export", [](const httplib::Request&, httplib::Response& res) { json_reply(res, {{"export", "queued"}}); });
  server.Post("/login", [](const httplib::Request& req, httplib::Response& res) {
    const bool ok = req.get_param_value("user") == "demo" && req.get_param_value("password") == "demo";
    res.status = ok ? 200 : 401;
    json_reply(res, {{"login", ok ? "ok" : "denied"}});
  });
  if (clock.manual()) {
    server.Post("/__test/advance", [&](const httplib::Request& req, httplib::Response& res) {
      clock.advance(std::chrono::milliseconds(std::stoll(req.get_param_value("ms"))));
      res.set_content(std::to_string(clock.now().time_since_epoch().count()) + "\n", "text/plain");
    });
  }

  const int port = config.port == 0 ? server.bind_to_any_port(config.host)
                                    : (server.bind_to_port(config.host, config.port) ? config.port : -1);
  if (port < 0) {
    std::cerr << "http_server: cannot listen on " << config.host << ":" << config.port << "\n";
    return 1;
  }
  std::printf("listening on %s:%d\n", config.host.c_str(), port);
  std::fflush(stdout);

  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    server.stop();
  });
  const bool ok = server.listen_after_bind();
  if (stopper.joinable()) {
    pthread_kill(stopper.native_handle(), SIGTERM);  // wakes sigwait if the server stopped on its own
    stopper.join();
  }
  return ok ? 0 : 1;
}
