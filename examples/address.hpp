#pragma once

// "HOST[:PORT]" for the examples' command lines: a name or IPv4 address with an optional port, or an IPv6
// address in brackets ("[::1]:6420", "[::1]") or bare ("::1", no port then).

#include <stdexcept>
#include <string>
#include <string_view>

namespace example {

struct Address {
  std::string host;
  int port = 0;
};

/// Parses `text`; `default_port` when it names none. Throws `std::invalid_argument` naming `what` (the
/// option, e.g. "--redis") and the problem: an empty host, a port that is not a number in 1..65535, an
/// unclosed bracket.
inline Address parse_address(std::string_view text, int default_port, std::string_view what) {
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument(std::string(what) + ": " + why + " in '" + std::string(text) +
                                "' (expected HOST, HOST:PORT or [IPv6]:PORT)");
  };
  Address a{.host = {}, .port = default_port};
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) fail("no closing ']'");
    a.host = std::string(text.substr(1, close - 1));
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') fail("unexpected text after ']'");
      port = rest.substr(1);
      if (port.empty()) fail("empty port");
    }
  } else if (const std::size_t colon = text.find(':');
             colon != std::string_view::npos && text.find(':', colon + 1) == std::string_view::npos) {
    a.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
    if (port.empty()) fail("empty port");
  } else {
    a.host = std::string(text);  // a name, an IPv4 address, or a bare IPv6 address (several colons)
  }
  if (a.host.empty()) fail("empty host");
  if (!port.empty()) {
    long value = 0;
    for (const char c : port) {
      if (c < '0' || c > '9' || value > 65535) fail("port '" + std::string(port) + "' is not a number in 1..65535");
      value = value * 10 + (c - '0');
    }
    if (value < 1 || value > 65535) fail("port '" + std::string(port) + "' is not a number in 1..65535");
    a.port = static_cast<int>(value);
  }
  return a;
}

}  // namespace example
