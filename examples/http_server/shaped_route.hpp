// examples/http_server: --shape PATH=RATE/s,burst=B,delay=N, one route shaped as nginx's limit_req (pass, delay,
// or 429 at once; include/ratelimit/README.md "Shaping").
#pragma once

#include <memory>
#include <string>

#include <ratelimit/shaper.hpp>

#include "limits.hpp"

namespace httplib {
class Server;
}

namespace example {

/// A parsed --shape value.
struct ShapeSpec {
  std::string path;
  ratelimit::ShapingRule rule;
};

/// Parses "PATH=RATE/s,burst=B,delay=N" (burst and delay optional, 0 by default; RATE/m for per minute).
/// Throws `std::invalid_argument` saying what is wrong.
ShapeSpec parse_shape(const std::string& text);

/// Serves GET `spec.path`, shaped per client address: passed at once, held for the stated delay, or 429 with
/// Retry-After. The returned object owns the limiter; keep it alive while the server runs.
std::shared_ptr<void> add_shaped_route(httplib::Server& server, const ShapeSpec& spec, const ServerClock& clock);

}  // namespace example
