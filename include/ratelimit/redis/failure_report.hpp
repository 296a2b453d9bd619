#pragma once

/// @file
/// The default failure report of the Redis limiters (include/ratelimit/redis/README.md "Failure policy and hook"): one
/// line on stderr for a server's first failure, at most one more per server per 10 s.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "ratelimit/clock.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/options.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {

/// A failure hook that does nothing: `options.on_backend_failure = ratelimit::redis::ignore_backend_failure;`
/// silences the default report (failures are still counted in the limiter's stats).
inline void ignore_backend_failure(const BackendError& /*error*/) noexcept {}

namespace detail {

/// `text` with each control character written as `\n`, `\r`, `\t` or `\xHH`: printed text cannot forge another line
/// or drive the terminal.
[[nodiscard]] inline std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    constexpr std::string_view kHex = "0123456789abcdef";
    if (u >= 0x20 && u != 0x7f) {
      out += c;
    } else if (c == '\n' || c == '\r' || c == '\t') {
      out.append(1, '\\').append(1, c == '\n' ? 'n' : (c == '\r' ? 'r' : 't'));
    } else {
      out.append("\\x").append(1, kHex[u >> 4]).append(1, kHex[u & 0xf]);
    }
  }
  return out;
}

/// The server(s) `o` names, for the report and `wait_ready`'s error, escaped (`printable`); never user or password.
[[nodiscard]] inline std::string servers_of(const ConnectionOptions& o) {
  auto at = [](const std::string& host, int port) {
    return (host.find(':') != std::string::npos ? "[" + printable(host) + "]" : printable(host)) + ":" +
           std::to_string(port);
  };
  if (!o.cluster_nodes.empty()) {
    return "Cluster (seed " + at(o.cluster_nodes.front().host, o.cluster_nodes.front().port) + ")";
  }
  if (!o.sentinel.master_name.empty()) return "Sentinel master \"" + printable(o.sentinel.master_name) + "\"";
  return o.unix_socket.empty() ? at(o.host, o.port) : "unix:" + printable(o.unix_socket);
}

/// Is a line for `server` due at `now_ns`? Yes for its first failure, then for the first at least 10 s after its last
/// line (`skipped`: its failures since, unreported); otherwise counts this one. One map per process and clock type
/// `G` (servers are few: a cluster's nodes at most). Thread-safe.
template <Clock G>
bool report_due(const std::string& server, std::int64_t now_ns, std::uint64_t& skipped) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::pair<std::int64_t, std::uint64_t>> servers;  // last line, missed
  const std::lock_guard lock(mutex);
  auto [it, first] = servers.try_emplace(server, std::pair<std::int64_t, std::uint64_t>{now_ns, 0});
  auto& [last_ns, missed] = it->second;
  if (!first && now_ns - last_ns < std::chrono::nanoseconds(std::chrono::seconds(10)).count()) {
    ++missed;
    return false;
  }
  skipped = std::exchange(missed, 0);
  last_ns = now_ns;
  return true;
}

/// The one line of a report, newline-terminated; the error's text escaped onto one line (`printable`).
[[nodiscard]] inline std::string report_line(std::string_view server, const BackendError& e, FailurePolicy policy,
                                             std::uint64_t skipped) {
  constexpr std::array<std::string_view, 4> kAnswers{
      // by FailurePolicy
      "the call was admitted (fail_open)", "the call was denied (fail_closed)",
      "BackendError was thrown to the caller (raise)", "the in-memory fallback answered (fallback)"};
  std::string line = "ratelimit: Redis " + std::string(server) + " failed (" + printable(e.what()) + "); " +
                     std::string(kAnswers[static_cast<std::size_t>(policy)]) +
                     ". At most one such line per server per 10 s";
  if (skipped > 0) line += " (" + std::to_string(skipped) + " more failures since the last)";
  return line +
         "; set LimiterOptions::on_backend_failure to handle them, or to "
         "ratelimit::redis::ignore_backend_failure to silence this\n";
}

/// `options.on_backend_failure`, or when empty the default report: `report_line` on stderr when one is due.
template <Clock G>
[[nodiscard]] std::function<void(const BackendError&)> failure_hook(const RedisOptions& options, G clock) {
  if (options.on_backend_failure) return options.on_backend_failure;
  return [server = servers_of(options), policy = options.on_error,
          clock = std::move(clock)](const BackendError& e) mutable {
    std::uint64_t skipped = 0;
    if (!report_due<G>(server, ratelimit::detail::now_ns(clock), skipped)) return;
    const std::string line = report_line(server, e, policy, skipped);
    std::fwrite(line.data(), 1, line.size(), stderr);  // one write: lines of threads do not interleave
  };
}

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
