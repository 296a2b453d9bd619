#pragma once

/// @file
/// Where a Redis server is, as text: the check of a host name (`ConnectionOptions.host` and the node
/// addresses) and the parser of a Redis URL (`ConnectionOptions::from_url`, include/ratelimit/redis/README.md
/// "Connection options"). No message here shows a password: a URL's parts are never echoed, and a host holding `@` is
/// shown from after its last `@` only, one holding a `:` (no IPv6 address) up to that `:` only.

#include <arpa/inet.h>
#include <sys/un.h>

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "ratelimit/redis/abi.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace detail {

/// True when `host` is an IPv6 address, with an optional `%zone` (not checked here).
[[nodiscard]] inline bool is_ipv6(std::string_view host) {
  const std::string address(host.substr(0, host.find('%')));
  in6_addr parsed{};
  return ::inet_pton(AF_INET6, address.c_str(), &parsed) == 1;
}

/// `host` quoted for an error text, without what precedes its last `@` (a user and password, mistakenly), and
/// without what follows a first `:` unless it is an IPv6 address (a pasted "user:password").
[[nodiscard]] inline std::string shown_host(std::string_view host) {
  const std::size_t at = host.rfind('@');
  const std::string_view rest = at == std::string_view::npos ? host : host.substr(at + 1);
  const std::size_t colon = rest.find(':');
  const std::string shown = colon == std::string_view::npos || is_ipv6(rest)
                                ? std::string(rest)
                                : std::string(rest.substr(0, colon + 1)) + "...";
  return at == std::string_view::npos ? "\"" + shown + "\"" : "\"...@" + shown + "\"";
}

/// The longest Unix socket path `sockaddr_un` holds (its `sun_path` less the terminating NUL).
inline constexpr std::size_t kMaxUnixSocketPath = sizeof(sockaddr_un::sun_path) - 1;

/// Why `path` is no Unix socket path connect can use as given (relative, too long for `sockaddr_un`, or
/// holding a NUL that would cut it short), or nullopt when it is one. Never shows `path`.
[[nodiscard]] inline std::optional<std::string> unix_socket_problem(std::string_view path) {
  if (path.empty() || path.front() != '/') return "must be an absolute path, e.g. \"/run/redis/redis.sock\"";
  if (path.size() > kMaxUnixSocketPath) {
    return "must be at most " + std::to_string(kMaxUnixSocketPath) + " bytes (sockaddr_un's limit)";
  }
  if (path.find('\0') != std::string_view::npos) return "must not hold a NUL byte";
  return std::nullopt;
}

/// Why `host` is no host name, IPv4 or IPv6 address (bare, `::1`, with an optional `%zone`), or nullopt
/// when it is one. Names are taken as given (the resolver judges them): only what no name holds is refused.
[[nodiscard]] inline std::optional<std::string> host_problem(std::string_view host) {
  if (host.empty()) return "must not be empty: a host name or an IP address, e.g. \"127.0.0.1\"";
  if (host.find("://") != std::string_view::npos) {
    return "holds a URL scheme: give the host alone, or read the URL with ConnectionOptions::from_url";
  }
  if (host.front() == '[') return "an IPv6 address goes without brackets (\"::1\"), the port in ConnectionOptions.port";
  if (host.size() > 253) return "must be at most 253 bytes (a DNS name's limit)";
  for (const char c : host) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= ' ' || u == 0x7F || c == '/' || c == '@' || c == '?' || c == '#' || c == '\\' || c == '[' || c == ']') {
      return "holds a character no host name has (" +
             (u <= ' ' || u == 0x7F ? std::string("a space or control byte") : "'" + std::string(1, c) + "'") +
             ") in " + shown_host(host);
    }
  }
  const std::size_t colon = host.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  if (host.find(':', colon + 1) == std::string_view::npos) {
    return "holds a port (" + shown_host(host) +
           "): give it in ConnectionOptions.port, or read a URL with ConnectionOptions::from_url";
  }
  // Several colons: an IPv6 address, with an optional zone ("fe80::1%eth0").
  if (!is_ipv6(host)) return "is not a valid IPv6 address: " + shown_host(host);
  if (host.back() == '%') return "the IPv6 zone after '%' is empty: " + shown_host(host);
  return std::nullopt;
}

/// Throws `std::invalid_argument` "`field`: <problem>" when `host` is no host (see `host_problem`).
inline void check_host(std::string_view host, std::string_view field) {
  if (const auto problem = host_problem(host)) throw std::invalid_argument(std::string(field) + ": " + *problem);
}

/// A Redis URL's parts (`parse_redis_url`).
struct RedisUrl {
  bool tls = false;
  std::string host;
  int port = 6379;
  std::string unix_socket;
  std::string user;
  std::string password;
  int database = 0;
};

/// Throws the `std::invalid_argument` of a bad URL: what is wrong, never the URL.
[[noreturn]] inline void bad_url(std::string_view what) {
  throw std::invalid_argument("ConnectionOptions::from_url: " + std::string(what) +
                              " (expected redis://[user[:password]@]host[:port][/db], rediss://... for TLS, or "
                              "unix://[user[:password]@]/path[?db=N])");
}

/// `text` with its `%XX` escapes decoded; throws naming `part` (never showing it) when an escape is bad.
[[nodiscard]] inline std::string percent_decoded(std::string_view text, std::string_view part) {
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const int hi = i + 2 < text.size() ? hex(text[i + 1]) : -1;
    const int lo = i + 2 < text.size() ? hex(text[i + 2]) : -1;
    if (hi < 0 || lo < 0)
      bad_url("bad percent-encoding in the " + std::string(part) + " (expected %XX, two hex digits)");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

/// Throws naming `part` unless `text` holds only what RFC 3986 allows in a URL's user info (unreserved
/// characters, sub-delimiters, `%` escapes; `:` only in the password).
inline void check_userinfo_chars(std::string_view text, std::string_view part, bool colon_allowed) {
  static constexpr std::string_view kAllowed = "-._~!$&'()*+,;=%";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (alnum || u >= 0x80 || kAllowed.find(c) != std::string_view::npos || (colon_allowed && c == ':')) continue;
    bad_url("the " + std::string(part) + " holds a character a URL must percent-encode (e.g. '@' as %40, '/' as %2F)");
  }
}

/// A decimal number in [lo, hi] or nullopt (no sign, no other characters, no overflow).
[[nodiscard]] inline std::optional<int> decimal(std::string_view text, long long lo, long long hi) {
  if (text.empty() || text.size() > 10) return std::nullopt;
  long long value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  if (value < lo || value > hi) return std::nullopt;
  return static_cast<int>(value);
}

/// Reads `user[:password]` into `url`.
inline void parse_userinfo(std::string_view info, RedisUrl& url) {
  const std::size_t colon = info.find(':');
  const std::string_view user = info.substr(0, colon);
  check_userinfo_chars(user, "user", false);
  url.user = percent_decoded(user, "user");
  if (colon == std::string_view::npos) return;
  const std::string_view password = info.substr(colon + 1);
  check_userinfo_chars(password, "password", true);
  url.password = percent_decoded(password, "password");
}

/// The host of a URL's `[...]`: RFC 6874 writes its zone after an encoded '%' ("fe80::1%25eth0", zone "eth0",
/// itself percent-decoded); a bare '%' ("fe80::1%eth0") is read as the zone's start too.
[[nodiscard]] inline std::string ipv6_host(std::string_view text) {
  const std::size_t percent = text.find('%');
  if (percent == std::string_view::npos) return std::string(text);
  std::string_view zone = text.substr(percent + 1);
  if (zone.substr(0, 2) == "25") zone.remove_prefix(2);
  const std::string decoded = percent_decoded(zone, "host's IPv6 zone");
  if (decoded.empty()) bad_url("the host's IPv6 zone (after %25) is empty");
  return std::string(text.substr(0, percent)) + "%" + decoded;
}

/// Reads `host[:port]` or `[ipv6][:port]` into `url`.
inline void parse_host_port(std::string_view text, RedisUrl& url) {
  std::string_view port;
  bool has_port = false;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) bad_url("an IPv6 address has no closing ']'");
    url.host = ipv6_host(text.substr(1, close - 1));
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') bad_url("unexpected text after the IPv6 address's ']'");
    has_port = !rest.empty();
    if (has_port) port = rest.substr(1);
    if (!url.host.empty() && url.host.find(':') == std::string::npos)
      bad_url("the host in brackets is no IPv6 address");
  } else {
    const std::size_t colon = text.find(':');
    if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) {
      bad_url("an IPv6 host goes in brackets, e.g. redis://[::1]:6379");
    }
    url.host = std::string(text.substr(0, colon));
    has_port = colon != std::string_view::npos;
    if (has_port) port = text.substr(colon + 1);
  }
  if (url.host.empty()) bad_url("no host");
  if (host_problem(url.host)) bad_url("the host is no host name or IP address");
  if (has_port) {
    const auto p = decimal(port, 1, 65535);
    if (!p) bad_url("the port is not a number in 1..65535");
    url.port = *p;
  }
}

/// Reads a `unix://` URL's part after the scheme: `[user[:password]@]/path[?db=N]`.
inline void parse_unix(std::string_view rest, RedisUrl& url) {
  const std::size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  if (!authority.empty()) {
    const std::size_t at = authority.rfind('@');
    if (at == std::string_view::npos || at + 1 != authority.size()) {
      bad_url("the socket path must be absolute, e.g. unix:///run/redis/redis.sock");
    }
    parse_userinfo(authority.substr(0, at), url);
  }
  if (slash == std::string_view::npos) bad_url("no socket path, e.g. unix:///run/redis/redis.sock");
  const std::string_view path_and_query = rest.substr(slash);
  const std::size_t question = path_and_query.find('?');
  url.unix_socket = percent_decoded(path_and_query.substr(0, question), "socket path");
  if (url.unix_socket.size() < 2) bad_url("no socket path, e.g. unix:///run/redis/redis.sock");
  if (const auto problem = unix_socket_problem(url.unix_socket)) bad_url("the socket path " + *problem);
  if (question == std::string_view::npos) return;
  const std::string_view query = path_and_query.substr(question + 1);
  if (query.rfind("db=", 0) != 0 || query.find('&') != std::string_view::npos) {
    bad_url("the query may only be db=N (the database)");
  }
  const auto db = decimal(query.substr(3), 0, 2147483647);
  if (!db) bad_url("the database (db=N) is not a number in 0..2147483647");
  url.database = *db;
}

/// Parses a Redis URL (see `ConnectionOptions::from_url`). Throws `std::invalid_argument` saying what is
/// wrong, never showing the URL or a part of it.
[[nodiscard]] inline RedisUrl parse_redis_url(std::string_view text) {
  const std::size_t sep = text.find("://");
  if (sep == std::string_view::npos) bad_url("no scheme");
  std::string scheme(text.substr(0, sep));
  for (char& c : scheme) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  std::string_view rest = text.substr(sep + 3);
  if (rest.find('#') != std::string_view::npos)
    bad_url("a fragment ('#') has no meaning here; a '#' in a password is %23");
  RedisUrl url;
  if (scheme == "unix") {
    parse_unix(rest, url);
    return url;
  }
  if (scheme != "redis" && scheme != "rediss") bad_url("the scheme is not redis, rediss or unix");
  url.tls = scheme == "rediss";
  const std::size_t end = rest.find_first_of("/?");
  const std::string_view authority = rest.substr(0, end);
  const std::size_t at = authority.rfind('@');
  if (at != std::string_view::npos) parse_userinfo(authority.substr(0, at), url);
  parse_host_port(at == std::string_view::npos ? authority : authority.substr(at + 1), url);
  if (end == std::string_view::npos) return url;
  if (rest[end] == '?' || rest.find('?') != std::string_view::npos) bad_url("a query ('?') is not supported here");
  const std::string_view db = rest.substr(end + 1);
  if (db.empty()) return url;
  const auto n = decimal(db, 0, 2147483647);
  if (!n) bad_url("the database ('/N' after the host) is not a number in 0..2147483647");
  url.database = *n;
  return url;
}

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
