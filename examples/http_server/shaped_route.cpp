// examples/http_server: the shaped route (--shape). Its answers:
//   200 {"outcome": "passed", "delay_ms": 0}     served at once
//   200 {"outcome": "delayed", "delay_ms": N}    served after holding the request N ms (the slot was booked)
//   429 with Retry-After (whole seconds, rounded up) and a problem body: refused, nothing booked
#include "shaped_route.hpp"

#include <httplib.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <thread>

#include <nlohmann/json.hpp>
#include <ratelimit/http/problem.hpp>
#include <ratelimit/ratelimit.hpp>

namespace example {
namespace {

using ShapedLimiter = ratelimit::MemoryLimiter<ratelimit::Gcra, ServerClock>;

std::int64_t number(std::string_view text, std::string_view what) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) {
    throw std::invalid_argument(std::string(what) + " must be a number >= 0, got \"" + std::string(text) + "\"");
  }
  return value;
}

/// The limiter, the shaper over it, and the route's handler.
struct ShapedRoute {
  ShapedRoute(const ShapeSpec& spec, const ServerClock& clock)
      : limiter(spec.rule.gcra(), {}, clock), shaper(limiter, spec.rule) {}

  void serve(const httplib::Request& req, httplib::Response& res) {
    const ratelimit::Shaped s = shaper.shape(req.remote_addr);
    if (!s) {
      const auto seconds = std::chrono::ceil<std::chrono::seconds>(s.retry_after).count();
      res.status = 429;
      res.set_header("Retry-After", s.retry_after == ratelimit::Decision::never ? "86400" : std::to_string(seconds));
      res.set_content(nlohmann::json{{"type", "about:blank"}, {"title", "Too Many Requests"}, {"status", 429}}.dump(),
                      std::string(ratelimit::http::kProblemContentType));
      return;
    }
    std::this_thread::sleep_for(s.delay);  // the booked slot: serve it then
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(s.delay).count();
    res.set_content(nlohmann::json{{"outcome", ratelimit::to_string(s.outcome)}, {"delay_ms", ms}}.dump(),
                    "application/json");
  }

  ShapedLimiter limiter;
  ratelimit::Shaper<ShapedLimiter> shaper;
};

}  // namespace

ShapeSpec parse_shape(const std::string& text) {
  const auto eq = text.find('=');
  const auto slash = text.find('/', eq == std::string::npos ? 0 : eq);
  if (text.empty() || text[0] != '/' || eq == std::string::npos || slash == std::string::npos) {
    throw std::invalid_argument("expected PATH=RATE/s[,burst=B][,delay=N], got \"" + text + "\"");
  }
  ShapeSpec spec;
  spec.path = text.substr(0, eq);
  spec.rule.limit = number(std::string_view(text).substr(eq + 1, slash - eq - 1), "RATE");
  const auto comma = text.find(',', slash);
  const std::string unit = text.substr(slash + 1, comma == std::string::npos ? std::string::npos : comma - slash - 1);
  if (unit != "s" && unit != "m") throw std::invalid_argument("the rate is per s or per m, got /" + unit);
  spec.rule.period = unit == "s" ? std::chrono::nanoseconds(std::chrono::seconds(1)) : std::chrono::minutes(1);
  for (auto at = comma; at != std::string::npos;) {
    const auto next = text.find(',', at + 1);
    const std::string item = text.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    if (item.rfind("burst=", 0) == 0) {
      spec.rule.burst = number(std::string_view(item).substr(6), "burst");
    } else if (item.rfind("delay=", 0) == 0) {
      spec.rule.delay = number(std::string_view(item).substr(6), "delay");
    } else {
      throw std::invalid_argument("unknown item \"" + item + "\" (burst=B or delay=N)");
    }
    at = next;
  }
  (void)spec.rule.gcra();  // names the field out of range (ShapingRule.burst, ...)
  return spec;
}

std::shared_ptr<void> add_shaped_route(httplib::Server& server, const ShapeSpec& spec, const ServerClock& clock) {
  auto route = std::make_shared<ShapedRoute>(spec, clock);
  server.Get(spec.path, [route](const httplib::Request& req, httplib::Response& res) { route->serve(req, res); });
  return route;
}

}  // namespace example
