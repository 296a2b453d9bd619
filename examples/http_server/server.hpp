// examples/http_server: the HTTP server (routes, the rate-limit pre-routing handler, error bodies).
#pragma once

#include <csignal>

#include "command_line.hpp"
#include "limits.hpp"

namespace example {

/// Blocks SIGINT and SIGTERM in the calling thread and every thread it starts later (call it first in
/// `main`); `serve` then takes them in a thread of its own, so no work runs in a signal handler.
sigset_t block_stop_signals();

/// Listens on `config.host:config.port` (port 0: a free one, printed as "listening on HOST:PORT"), checks
/// every request but /health, /metrics and /__test/ against `limits` (all layers, all or nothing), and
/// serves until one of `stop_signals` arrives. Returns the exit status.
int serve(const Config& config, Limits& limits, const ServerClock& clock, const sigset_t& stop_signals);

}  // namespace example
