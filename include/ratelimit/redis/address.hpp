#pragma once

/// @file
/// Where a Redis server is, as text: host checks and the Redis URL parser (include/ratelimit/redis/README.md
/// "Connection options"). No message shows a password: URL parts are never echoed, hosts are cut (`shown_host`).

#include <arpa/inet.h>
#include <sys/un.h>

#include <charconv>
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

/// `host` quoted for an error text, cut after its last `@` and (unless IPv6) at its first `:`: a pasted password.
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

/// Why `path` is no Unix socket path connect can use (relative, too long, holding a NUL), or nullopt. Never shows it.
[[nodiscard]] inline std::optional<std::string> unix_socket_problem(std::string_view path) {
  if (path.empty() || path.front() != '/') return "must be an absolute path, e.g. \"/run/redis/redis.sock\"";
  if (path.size() > kMaxUnixSocketPath) {
    return "must be at most " + std::to_string(kMaxUnixSocketPath) + " bytes (sockaddr_un's limit)";
  }
  if (path.find('\0') != std::string_view::npos) return "must not hold a NUL byte";
  return std::nullopt;
}

/// Why `host` is no host name, IPv4 or bare IPv6 address (optional `%zone`), or nullopt. The resolver judges
/// names: only what no name holds is refused.
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
      // Appended, not `"'" + std::string(...)`: g++ 12 -O2 warns falsely (-Wrestrict) on that insert.
      const std::string what =
          u <= ' ' || u == 0x7F ? std::string("a space or control byte") : std::string("'") + c + "'";
      return "holds a character no host name has (" + what + ") in " + shown_host(host);
    }
  }
  const std::size_t colon = host.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  if (host.find(':', colon + 1) == std::string_view::npos) {
    return "holds a port (" + shown_host(host) +
           "): give it in ConnectionOptions.port, or read a URL with ConnectionOptions::from_url";
  }
  if (!is_ipv6(host)) return "is not a valid IPv6 address: " + shown_host(host);
  if (host.back() == '%') return "the IPv6 zone after '%' is empty: " + shown_host(host);
  return std::nullopt;
}

/// Throws `std::invalid_argument` "`field`: <problem>" when `host` is no host (see `host_problem`).
inline void check_host(std::string_view host, std::string_view field) {
  if (const auto problem = host_problem(host)) throw std::invalid_argument(std::string(field) + ": " + *problem);
}

/// Throws `std::invalid_argument` naming `field[i].host` or `field[i].port` for a node with no valid host or port.
template <class Nodes>
void check_nodes(const Nodes& nodes, const std::string& field) {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const std::string node = field + "[" + std::to_string(i) + "]";
    check_host(nodes[i].host, node + ".host");
    if (nodes[i].port < 1 || nodes[i].port > 65535) throw std::invalid_argument(node + ".port: must be in 1..65535");
  }
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
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    unsigned byte = 0;
    const char* hex = text.data() + i + 1;
    if (i + 2 >= text.size() || std::from_chars(hex, hex + 2, byte, 16).ptr != hex + 2)
      bad_url("bad percent-encoding in the " + std::string(part) + " (expected %XX, two hex digits)");
    out += static_cast<char>(byte);
    i += 2;
  }
  return out;
}

/// `text` percent-decoded; throws naming `part` unless it holds only what RFC 3986 allows in user info (`:` only
/// in the password).
[[nodiscard]] inline std::string userinfo_part(std::string_view text, std::string_view part, bool colon_allowed) {
  static constexpr std::string_view kAllowed = "-._~!$&'()*+,;=%";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (alnum || u >= 0x80 || kAllowed.find(c) != std::string_view::npos || (colon_allowed && c == ':')) continue;
    bad_url("the " + std::string(part) + " holds a character a URL must percent-encode (e.g. '@' as %40, '/' as %2F)");
  }
  return percent_decoded(text, part);
}

/// The URL's `what` as a decimal number in [lo, hi] (no sign, no other characters); throws naming `what` else.
[[nodiscard]] inline int url_number(std::string_view text, int lo, int hi, std::string_view what) {
  int value = -1;
  const char* end = text.data() + text.size();
  if (!text.starts_with('-') && std::from_chars(text.data(), end, value).ptr != end) value = -1;
  if (text.starts_with('-') || value < lo || value > hi) {
    bad_url("the " + std::string(what) + " is not a number in " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return static_cast<int>(value);
}

/// Reads `user[:password]` into `url`.
inline void parse_userinfo(std::string_view info, RedisUrl& url) {
  const std::size_t colon = info.find(':');
  url.user = userinfo_part(info.substr(0, colon), "user", false);
  if (colon != std::string_view::npos) url.password = userinfo_part(info.substr(colon + 1), "password", true);
}

/// The host of a URL's `[...]`: its zone after "%25" (RFC 6874) or a bare '%', percent-decoded.
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
  if (has_port) url.port = url_number(port, 1, 65535, "port");
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
  url.database = url_number(query.substr(3), 0, 2147483647, "database (db=N)");
}

/// Parses a Redis URL (`ConnectionOptions::from_url`); throws `std::invalid_argument` never showing the URL.
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
  url.database = url_number(db, 0, 2147483647, "database ('/N' after the host)");
  return url;
}

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
