// The Redis server of `bench/run.sh --redis`: HOST:PORT or a URL, redis://[user[:password]@]host[:port][/db]
// (rediss:// for TLS). What is printed of it never holds the password.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace bench::compare {

struct Endpoint {
  std::string host;
  int port = 6379;
  std::string user;
  std::string password;
  int database = 0;
  bool tls = false;

  /// The endpoint as printed: the URL with the password replaced by "***".
  [[nodiscard]] std::string shown() const {
    std::string out = tls ? "rediss://" : "redis://";
    if (!user.empty() || !password.empty()) out += user + (password.empty() ? "" : ":***") + "@";
    out += (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
    return database != 0 ? out + "/" + std::to_string(database) : out;
  }
};

namespace detail {

/// `text` with %XX escapes decoded (URL user and password). Throws for a broken escape.
inline std::string percent_decoded(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const std::string hex(text.substr(i + 1, 2));
    if (hex.size() != 2 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      throw std::invalid_argument("--redis: broken %-escape");
    }
    out += static_cast<char>(std::stoi(hex, nullptr, 16));
    i += 2;
  }
  return out;
}

/// A whole number in [min, max] named `what`, or `std::invalid_argument`.
inline int bounded(std::string_view text, int min, int max, const char* what) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string_view::npos) {
    throw std::invalid_argument(std::string("--redis: ") + what + " must be a number in " + std::to_string(min) + ".." +
                                std::to_string(max));
  }
  const int v = std::stoi(std::string(text));
  if (v < min || v > max) {
    throw std::invalid_argument(std::string("--redis: ") + what + " must be a number in " + std::to_string(min) + ".." +
                                std::to_string(max));
  }
  return v;
}

}  // namespace detail

/// Parses `HOST:PORT`, `redis://...` or `rediss://...` (the scheme in any case). Throws
/// `std::invalid_argument` ("--redis: ...", never quoting the value: it may hold a password) for another
/// scheme, a HOST:PORT holding '@' or '/', and anything malformed. bench/run.sh's check_redis applies the
/// same rules before anything is built.
inline Endpoint parse_endpoint(std::string_view text) {
  Endpoint e;
  std::string_view rest = text;
  const auto separator = rest.find("://");
  const bool url = separator != std::string_view::npos;
  if (url) {
    std::string scheme(rest.substr(0, separator));
    for (char& c : scheme) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    if (scheme != "redis" && scheme != "rediss") {
      throw std::invalid_argument("--redis: a URL must start with redis:// or rediss://");
    }
    e.tls = scheme == "rediss";
    rest.remove_prefix(separator + 3);
    if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
      const std::string_view credentials = rest.substr(0, at);
      const auto colon = credentials.find(':');
      e.user = detail::percent_decoded(credentials.substr(0, colon));
      if (colon != std::string_view::npos) e.password = detail::percent_decoded(credentials.substr(colon + 1));
      rest.remove_prefix(at + 1);
    }
    if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
      const std::string_view db = rest.substr(slash + 1);
      if (!db.empty()) e.database = detail::bounded(db, 0, 1'000'000, "database");
      rest = rest.substr(0, slash);
    }
  }
  if (!url && rest.find_first_of("@/") != std::string_view::npos) {
    throw std::invalid_argument("--redis: HOST:PORT holds '@' or '/' (a URL starts with redis://)");
  }
  std::string_view port;
  if (rest.starts_with('[')) {  // [IPv6]:port
    const auto close = rest.find(']');
    if (close == std::string_view::npos) throw std::invalid_argument("--redis: unclosed [ in the host");
    e.host = std::string(rest.substr(1, close - 1));
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') throw std::invalid_argument("--redis: expected :PORT after ]");
      port = rest.substr(close + 2);
    } else if (!url) {
      throw std::invalid_argument("--redis: HOST:PORT needs a port");
    }
  } else {
    const auto colon = rest.rfind(':');
    if (colon == std::string_view::npos && !url) throw std::invalid_argument("--redis: HOST:PORT needs a port");
    e.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) port = rest.substr(colon + 1);
  }
  if (e.host.empty()) throw std::invalid_argument("--redis: no host");
  if (!port.empty() || !url) e.port = detail::bounded(port, 1, 65535, "port");
  return e;
}

}  // namespace bench::compare
