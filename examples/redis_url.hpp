#pragma once

// Where the examples' Redis is, from their command lines: a Redis URL (ConnectionOptions::from_url,
// include/ratelimit/redis/README.md "Connection options"), or HOST[:PORT] as short for redis://HOST[:PORT] (IPv6 as
// [::1]:6379, or bare ::1).

#include <stdexcept>
#include <string>
#include <string_view>

#include <ratelimit/redis/options.hpp>

namespace example {

/// The connection options `text` names. Throws `std::invalid_argument` starting with `what` (the option,
/// e.g. "--redis"; nothing when empty) and saying what is wrong; it never shows a password.
inline ratelimit::redis::ConnectionOptions redis_connection(std::string_view text, std::string_view what) {
  std::string url(text);
  if (url.find("://") == std::string::npos) {
    const std::size_t colon = url.find(':');
    const bool bare_ipv6 = colon != std::string::npos && url.find(':', colon + 1) != std::string::npos &&
                           url.find('[') == std::string::npos;
    url = bare_ipv6 ? "redis://[" + url + "]" : "redis://" + url;
  }
  try {
    return ratelimit::redis::ConnectionOptions::from_url(url);
  } catch (const std::invalid_argument& e) {
    const std::string prefix = what.empty() ? std::string() : std::string(what) + ": ";
    throw std::invalid_argument(prefix + e.what() + "; or HOST, HOST:PORT or [IPv6]:PORT");
  }
}

}  // namespace example
