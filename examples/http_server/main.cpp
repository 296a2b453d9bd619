// examples/http_server: a small HTTP API behind three rate-limit layers, with every header and RFC 9457
// 429 bodies.
//
//   layer 1  client IP            FixedWindow 1,000 / min                       policy "ip"
//   layer 2  X-API-Key plan       free 30/min, 1,000/day, burst 10 (unknown and missing keys, keyed per IP),
//                                 pro 300/min, 50,000/day, burst 50; enterprise 3,000/min, 500,000/day, burst 200
//                                 policies "<plan>-minute", "<plan>-day", "<plan>-burst"
//   layer 3  endpoint             /search 10/min and /export 5/min per client (API key, else IP),
//                                 /login 5 per 5 min per client IP, then blocked 15 min   policies "search", "export",
//                                 "login"
//   in flight                     /export at most 2 at once per client (429 with Retry-After: 1 beyond)
//                                                                                policy "export-concurrency"
//
//   /quota (with --quota-burst B)  only its own layer: GCRA 5/s with burst B per client IP  policy "quota"
//                                 (a remote API for examples/remote_quota_client.cpp and RemoteQuotaLimiter)
//
//   /backend (with --backend-capacity N) no rate layers; a simulated backend of capacity N (more requests
//                                 slow every one down) behind an in-flight limit, adaptive by default
//                                 (--backend-limit aimd|gradient|vegas|N, --backend-shadow N; backend.hpp)
//                                                                                policy "backend-concurrency"
//
// All layers and the concurrency limit are checked together, all or nothing. /health and /metrics are not limited. The
// client IP is the socket peer; X-Forwarded-For is believed only when the peer is a --trusted-proxy. An X-API-Key over
// 256 bytes gets 431, a key no limiter accepts (e.g. a 600-byte forwarded address) 400; any other
// exception 500; all with a short problem body and nothing of the exception's text.
//
//   http_server [--port N] [--host 127.0.0.1] [--redis URL|HOST[:PORT]] [--trusted-proxy IP]... [--api-key KEY=PLAN]...
//               [--deny IP]... [--no-limits] [--shadow] [--manual-clock]
//
// --plans FILE reads the plans' numbers from JSON ({"free": {"per_minute": 30, "per_day": 1000,
// "burst": 10}, ...}) at start and again on SIGHUP; a reload keeps every key's usage (set_policy, in
// memory and with --redis; not with --leases), and the header fields advertise the new quotas.
//
// --shadow runs every layer in shadow (dry-run) mode: nothing is denied, each layer keeps the state it
// would keep enforcing, and its would-be denials show in /metrics (outcome="shadow_denied").
//
// bench/adaptive_wrk.sh runs wrk against /backend with an adaptive and with static limits (--threads 256: a
// worker thread per connection) and reads /__backend/stats (latency of the 200s, measured in the server).
//
// --shape PATH=RATE/s,burst=B,delay=N serves GET PATH shaped per client address as nginx's limit_req
// (shaped_route.cpp): answered at once, held for the stated delay, or 429 with Retry-After (include/ratelimit/README.md
// "Shaping").
//
// --manual-clock is for tests: time starts at 0 and moves only by POST /__test/advance?ms=N.
//
// Files by job: command_line.* (the options, CLI11), limits.* (the layers and plans on memory or Redis),
// server.* (routes, the rate-limit handler, error bodies), main.cpp (this: wires them together).
#include <iostream>
#include <memory>

#include "command_line.hpp"
#include "limits.hpp"
#include "server.hpp"

int main(int argc, char** argv) {
  example::Config config;
  if (const auto status = example::parse_command_line(argc, argv, config)) return *status;
  const sigset_t stop_signals = example::block_stop_signals();  // before any thread starts
  const example::ServerClock clock(config.manual_clock);
  const std::unique_ptr<example::Limits> limits = example::make_limits(config, clock);
  if (!limits) {
    std::cerr << "http_server: built without the Redis backend (hiredis missing)\n";
    return 2;
  }
  if (!config.plans_file.empty()) {
    if (const std::string error = limits->reload_plans(config.plans_file); !error.empty()) {
      std::cerr << "http_server: " << error << "\n";
      return 2;
    }
  }
  return example::serve(config, *limits, clock, stop_signals);
}
