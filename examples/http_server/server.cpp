// examples/http_server: the HTTP server. What each request gets is listed in main.cpp.
#include "server.hpp"

#include "backend.hpp"
#include "shaped_route.hpp"

#include <httplib.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <ratelimit/concurrency.hpp>
#include <ratelimit/http.hpp>
#include <ratelimit/http/problem.hpp>
#include <ratelimit/layers.hpp>

namespace example {
namespace {

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

void set_fields(httplib::Response& res, const ratelimit::LayeredDecision& d) {
  const auto entries = d.policy_decisions();
  for (const auto& [name, value] : ratelimit::http::rate_limit_fields(entries)) res.set_header(name, value);
}

void json_reply(httplib::Response& res, const nlohmann::json& body) {
  res.set_content(body.dump(), "application/json");
}

/// Longest X-API-Key accepted; every issued key is far shorter.
constexpr std::size_t kMaxApiKeyBytes = 256;

/// An RFC 9457 body with only the status and its reason: nothing of the request or of any exception.
void problem_reply(httplib::Response& res, int status, const char* title) {
  res.status = status;
  res.set_content(nlohmann::json{{"type", "about:blank"}, {"title", title}, {"status", status}}.dump(),
                  std::string(ratelimit::http::kProblemContentType));
}

/// The permits of the request this thread is serving (a concurrency limit counts a request from the
/// check before routing to the end of its handler): released after routing, or by the next request.
std::vector<ratelimit::Permit>& running_permits() {
  thread_local std::vector<ratelimit::Permit> permits;
  return permits;
}

/// When the request this thread serves reached the pre-routing handler (its latency on /backend).
std::chrono::steady_clock::time_point& request_start() {
  thread_local std::chrono::steady_clock::time_point start;
  return start;
}

/// 429 for a concurrency limit without room: which limit, how many are running, retry in a second.
void concurrency_reply(httplib::Response& res, const std::string& limit, std::int64_t in_flight) {
  res.status = 429;
  res.set_header("Retry-After", "1");
  res.set_content(nlohmann::json{{"type", "about:blank"},
                                 {"title", "Too Many Requests"},
                                 {"status", 429},
                                 {"violated-policies", nlohmann::json::array({limit})},
                                 {"in-flight", in_flight}}
                      .dump(),
                  std::string(ratelimit::http::kProblemContentType));
}

/// The rate-limit check before routing: headers on every limited response, 429/403/431/400 answered here.
void add_limits(httplib::Server& server, const Config& config, Limits& limits,
                const std::set<std::string, std::less<>>& trusted) {
  server.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    using Handled = httplib::Server::HandlerResponse;
    request_start() = std::chrono::steady_clock::now();
    if (config.no_limits || req.path == "/health" || req.path == "/metrics" || req.path.rfind("/__test/", 0) == 0 ||
        req.path.rfind("/__backend/", 0) == 0) {
      return Handled::Unhandled;
    }
    const std::string api_key = req.get_header_value("X-API-Key");
    if (api_key.size() > kMaxApiKeyBytes) {
      problem_reply(res, 431, "Request Header Fields Too Large");
      return Handled::Handled;
    }
    std::vector<std::string> keys;
    std::vector<ratelimit::LayerRequest> layers;
    std::vector<ratelimit::ConcurrencyRequest> concurrency;
    std::optional<ratelimit::AdmittedRequest> checked;
    running_permits().clear();
    try {
      limits.layers_for(req.path, client_ip(req, trusted), api_key, keys, layers);
      limits.concurrency_for(req.path, keys, concurrency);
      // Rate and concurrency, all or nothing; --shadow puts the rate layers in shadow mode.
      checked = ratelimit::check_layers(layers, concurrency, ratelimit::CheckOptions{.shadow = config.shadow});
    } catch (const std::invalid_argument&) {  // a key no limiter takes (too long); nothing was consumed
      problem_reply(res, 400, "Bad Request");
      return Handled::Handled;
    }
    if (checked->denied_by) {  // no rate was consumed
      concurrency_reply(res, concurrency[*checked->denied_by].layer->name(), checked->concurrency.in_flight);
      return Handled::Handled;
    }
    const ratelimit::LayeredDecision& d = checked->rate;
    set_fields(res, d);
    if (d) {
      running_permits() = std::move(checked->permits);  // held until the handler is done
      return Handled::Unhandled;                        // on to the route, with the headers set
    }
    bool listed = false;
    for (const auto& o : d.layers) listed = listed || (o.denied() && o.verdict == ratelimit::Verdict::deny_listed);
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
}

/// With --backend-capacity: /backend (the simulated backend behind its in-flight limit; the permit is
/// released with the outcome as soon as the backend answered) and its latency record for
/// bench/adaptive_wrk.sh: GET /__backend/stats?slo_us=N (served, within the SLO, p50, p99), POST /__backend/reset.
void add_backend_routes(httplib::Server& server, SimulatedBackend& backend, LatencyRecord& record) {
  server.Get("/backend", [&](const httplib::Request&, httplib::Response& res) {
    backend.serve();
    for (ratelimit::Permit& p : running_permits()) p.release(ratelimit::PermitOutcome::succeeded);
    record.add(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - request_start()));
    json_reply(res, {{"served", true}});
  });
  server.Get("/__backend/stats", [&](const httplib::Request& req, httplib::Response& res) {
    const long long slo_us = req.has_param("slo_us") ? std::stoll(req.get_param_value("slo_us")) : 0;
    json_reply(res, {{"served", record.count()},
                     {"within_slo", record.within(std::chrono::microseconds(slo_us))},
                     {"p50_ms", record.quantile_ms(0.5)},
                     {"p99_ms", record.quantile_ms(0.99)}});
  });
  server.Post("/__backend/reset", [&](const httplib::Request&, httplib::Response& res) {
    record.reset();
    res.set_content("ok\n", "text/plain");
  });
}

/// With --quota-burst: /quota, limited by its own layer alone (limits.cpp).
void add_quota_route(httplib::Server& server) {
  server.Get("/quota", [](const httplib::Request&, httplib::Response& res) { json_reply(res, {{"quota", "ok"}}); });
}

/// The routes: the API, /health, /metrics, and with --manual-clock the test clock.
void add_routes(httplib::Server& server, Limits& limits, const ServerClock& clock) {
  server.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(limits.metrics(), "text/plain; version=0.0.4");
  });
  server.Get("/search", [](const httplib::Request& req, httplib::Response& res) {
    json_reply(res, {{"query", req.get_param_value("q")}, {"results", nlohmann::json::array()}});
  });
  // With --manual-clock (tests), ?hold_ms=N (at most 5000) keeps the export running that long, to show
  // its concurrency limit.
  server.Get("/export", [&](const httplib::Request& req, httplib::Response& res) {
    if (clock.manual() && req.has_param("hold_ms")) {
      const long long ms = std::min(5000LL, std::max(0LL, std::stoll(req.get_param_value("hold_ms"))));
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
    json_reply(res, {{"export", "queued"}});
  });
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
}

}  // namespace

sigset_t block_stop_signals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);  // not a stop: reloads the plan file (serve)
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

int serve(const Config& config, Limits& limits, const ServerClock& clock, const sigset_t& stop_signals) {
  const std::set<std::string, std::less<>> trusted(config.trusted_proxies.begin(), config.trusted_proxies.end());
  httplib::Server server;
  // httplib writes headers and body separately: without TCP_NODELAY, Nagle plus delayed ACKs stall each
  // keep-alive response ~40 ms. And let a connection serve more than httplib's default of 5 requests.
  server.set_tcp_nodelay(true);
  server.set_keep_alive_max_count(10'000);

  add_limits(server, config, limits, trusted);
  server.set_post_routing_handler([](const httplib::Request&, httplib::Response&) { running_permits().clear(); });
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
    running_permits().clear();
    res.headers.clear();
    problem_reply(res, 500, "Internal Server Error");
  });
  const std::shared_ptr<void> shaped =
      config.shape.empty() ? nullptr : add_shaped_route(server, parse_shape(config.shape), clock);
  add_routes(server, limits, clock);
  if (config.quota_burst > 0) add_quota_route(server);
  std::optional<SimulatedBackend> backend;
  LatencyRecord record;
  if (config.backend_capacity > 0) {
    backend.emplace(config.backend_capacity, std::chrono::milliseconds(config.backend_ms));
    add_backend_routes(server, *backend, record);
  }
  if (config.threads > 0) {
    const auto threads = static_cast<std::size_t>(config.threads);
    server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
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
    while (sigwait(&stop_signals, &signal) == 0 && signal == SIGHUP) {
      if (config.plans_file.empty()) continue;
      const std::string error = limits.reload_plans(config.plans_file);
      std::cerr << "http_server: " << (error.empty() ? "reloaded " + config.plans_file : error) << "\n";
    }
    server.stop();
  });
  const bool ok = server.listen_after_bind();
  if (stopper.joinable()) {
    pthread_kill(stopper.native_handle(), SIGTERM);  // wakes sigwait if the server stopped on its own
    stopper.join();
  }
  return ok ? 0 : 1;
}

}  // namespace example
