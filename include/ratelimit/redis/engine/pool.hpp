#pragma once

/// @file
/// `ConnectionPool`: thread-safe sharing of hiredis connections, with reconnection and backoff, and the checks of
/// its options (the TLS files too: one that cannot be read fails at construction, naming the field).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/engine/circuit_breaker.hpp"
#include "ratelimit/redis/engine/connection.hpp"
#include "ratelimit/redis/address.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/redis/options.hpp"
#include "ratelimit/redis/engine/pipeline.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace engine {

namespace detail {

/// Throws `std::invalid_argument` naming `field` unless `path` is empty or a regular file this process can
/// read (opened, and its first byte read: a directory, an empty file, a FIFO or a device is refused; opening
/// a FIFO would wait for a writer).
inline void check_readable_file(const std::string& path, std::string_view field) {
  if (path.empty()) return;
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    throw std::invalid_argument(std::string(field) + ": \"" + path + "\" is not a regular file, not a PEM file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) {
    throw std::invalid_argument(std::string(field) + ": cannot open \"" + path + "\" for reading");
  }
  if (in.peek() == std::ifstream::traits_type::eof()) {
    throw std::invalid_argument(std::string(field) + ": \"" + path + "\" is a directory or empty, not a PEM file");
  }
}

/// Throws `std::invalid_argument` naming `field` unless `path` is empty or a directory this process can list.
inline void check_readable_directory(const std::string& path, std::string_view field) {
  if (path.empty()) return;
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_directory(path, ec)) {
    throw std::invalid_argument(std::string(field) + ": \"" + path + "\" is not a directory");
  }
  const std::filesystem::directory_iterator it(path, ec);
  if (ec)
    throw std::invalid_argument(std::string(field) + ": cannot read the directory \"" + path + "\": " + ec.message());
}

}  // namespace detail

/// Connections to one Redis server, opened lazily: up to `pool_size` shared pipelined ones (`pipeline()`,
/// what the routes use: include/ratelimit/redis/README.md "Redis engine"). After a failed connect, new
/// connects wait (backoff from `reconnect_backoff_min`, doubling up to `reconnect_backoff_max`) and fail at
/// once meanwhile. Thread-safe; nothing here blocks longer than `connect_timeout` or `command_timeout`.
class ConnectionPool {
 public:
  /// Validates `options`; connects nothing yet (Redis may be down at start). `limiter_defaults`: the options
  /// of limiters made on this pool without their own. Throws `std::invalid_argument` naming the field
  /// (`ConnectionOptions.host` holding a port or a scheme, `ConnectionOptions.tls.ca_file` unreadable, ...).
  explicit ConnectionPool(ConnectionOptions options, LimiterOptions limiter_defaults = {})
      : options_(validated(std::move(options))), limiter_defaults_(std::move(limiter_defaults)) {
    make_pipelines();
  }
  struct Discovered {};
  /// A route's pool to a server it learned of (a cluster node, the master Sentinel names): `options` were
  /// validated with the route, so nothing is checked again (a TLS file rotated away fails the connect, never
  /// the route). Throws nothing but `std::bad_alloc`.
  ConnectionPool(ConnectionOptions options, LimiterOptions limiter_defaults, Discovered)
      : options_(std::move(options)), limiter_defaults_(std::move(limiter_defaults)) {
    make_pipelines();
  }

  /// Refused: a whole `RedisOptions` would drop its limiter fields. Write `ConnectionPool(o.connection(),
  /// o.limiter())`.
  explicit ConnectionPool(const RedisOptions& options) = delete;

  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  /// Commands outstanding on a connection at which calls go to the next (include/ratelimit/redis/README.md
  /// "Sizing the pool").
  static constexpr std::size_t kSpillDepth = 128;

  /// The shared connection for the next call: the first with fewer than `kSpillDepth` (and `max_in_flight`)
  /// commands outstanding, so callers join the batch forming there; the least loaded when all are that deep.
  /// Connections open when first used. Thread-safe; never blocks.
  Pipeline& pipeline() noexcept {
    const std::size_t spill = std::min(kSpillDepth, options_.max_in_flight);
    Pipeline* least = nullptr;
    std::size_t least_load = SIZE_MAX;
    for (const auto& p : pipelines_) {
      const std::size_t l = p->load();
      if (l < spill) return *p;
      if (l < least_load) {
        least_load = l;
        least = p.get();
      }
    }
    return *least;  // every load is below SIZE_MAX
  }

  /// Commands queued or awaiting a reply on the shared connections, summed (a snapshot). Thread-safe.
  [[nodiscard]] std::size_t load() const noexcept {
    std::size_t n = 0;
    for (const auto& p : pipelines_) n += p->load();
    return n;
  }

  /// Opens one connection (counted in `connects()`), or fails at once with the last connect error while
  /// backing off. Thread-safe. Throws `BackendError`.
  std::unique_ptr<Connection> open_connection() {
    {
      const std::lock_guard lock(mutex_);
      if (std::chrono::steady_clock::now() < next_connect_) {
        throw BackendError(BackendErrorCause::io, "reconnect backing off after: " + last_connect_error_);
      }
    }
    try {
      auto c = std::make_unique<Connection>(Connection::open(options_));
      connects_.fetch_add(1, std::memory_order_relaxed);
      const std::lock_guard lock(mutex_);
      backoff_ = std::chrono::milliseconds(0);
      next_connect_ = {};
      return c;
    } catch (const BackendError& e) {
      const std::lock_guard lock(mutex_);
      backoff_ = std::clamp(backoff_ * 2, options_.reconnect_backoff_min, options_.reconnect_backoff_max);
      next_connect_ = std::chrono::steady_clock::now() + backoff_;
      last_connect_error_ = e.what();
      throw;
    }
  }

  /// Submissions refused by a full pipeline (`max_in_flight`), summed. Thread-safe.
  [[nodiscard]] std::uint64_t refused() const noexcept {
    std::uint64_t n = 0;
    for (const auto& p : pipelines_) n += p->refused();
    return n;
  }

  /// Connections opened so far (first connects and reconnects). Thread-safe.
  [[nodiscard]] std::uint64_t connects() const noexcept { return connects_.load(std::memory_order_relaxed); }
  /// Broken connections dropped so far. Thread-safe.
  [[nodiscard]] std::uint64_t drops() const noexcept { return drops_.load(std::memory_order_relaxed); }
  /// The validated options. Thread-safe (immutable).
  [[nodiscard]] const ConnectionOptions& options() const noexcept { return options_; }
  /// The server's circuit breaker (`options().breaker`), consulted by the routes before each round trip.
  [[nodiscard]] CircuitBreaker<>& breaker() noexcept { return breaker_; }
  /// The options of limiters made on this pool without their own `LimiterOptions`. Thread-safe (immutable).
  [[nodiscard]] const LimiterOptions& limiter_defaults() const noexcept { return limiter_defaults_; }

 private:
  static ConnectionOptions validated(ConnectionOptions o) {
    auto bad = [](const char* field, const char* what) {
      throw std::invalid_argument(std::string("ConnectionOptions.") + field + ": " + what);
    };
    if (o.unix_socket.empty()) redis::detail::check_host(o.host, "ConnectionOptions.host");
    if (const auto problem = o.unix_socket.empty() ? std::nullopt : redis::detail::unix_socket_problem(o.unix_socket))
      bad("unix_socket", problem->c_str());
    if (o.unix_socket.empty() && (o.port < 1 || o.port > 65535)) bad("port", "must be in 1..65535");
    if (o.database < 0) bad("database", "must be >= 0");
    // Deadlines are now() plus these: a day keeps them far from overflow.
    constexpr std::chrono::milliseconds kDay = std::chrono::hours(24);
    if (o.connect_timeout.count() <= 0 || o.connect_timeout > kDay) bad("connect_timeout", "must be in (0, 24 h]");
    if (o.command_timeout.count() <= 0 || o.command_timeout > kDay) bad("command_timeout", "must be in (0, 24 h]");
    // Each connection's pipeline is made up front.
    if (o.pool_size < 1 || o.pool_size > 1024) bad("pool_size", "must be in 1..1024");
    if (o.max_in_flight < 1) bad("max_in_flight", "must be >= 1");
    if (o.reconnect_backoff_min.count() < 0) bad("reconnect_backoff_min", "must be >= 0");
    if (o.reconnect_backoff_max < o.reconnect_backoff_min)
      bad("reconnect_backoff_max", "must be >= reconnect_backoff_min");
    if (o.reconnect_backoff_max > kDay) bad("reconnect_backoff_max", "must be <= 24 h");
    if (o.tls.enabled) {
      if (!kTlsAvailable) {
        bad("tls",
            "this unit was compiled without RATELIMIT_TLS=1 (a package built with OpenSSL sets it through "
            "ratelimit::redis, or pkg-config --cflags ratelimit-redis; a package built without OpenSSL has no TLS)");
      }
      if (!o.unix_socket.empty()) bad("tls", "needs host and port (a Unix socket carries no TLS)");
      if (o.tls.cert_file.empty() != o.tls.key_file.empty()) bad("tls.key_file", "and tls.cert_file: both or neither");
      detail::check_readable_file(o.tls.ca_file, "ConnectionOptions.tls.ca_file");
      detail::check_readable_directory(o.tls.ca_dir, "ConnectionOptions.tls.ca_dir");
      detail::check_readable_file(o.tls.cert_file, "ConnectionOptions.tls.cert_file");
      detail::check_readable_file(o.tls.key_file, "ConnectionOptions.tls.key_file");
    } else if (!o.tls.ca_file.empty() || !o.tls.ca_dir.empty() || !o.tls.cert_file.empty() || !o.tls.key_file.empty() ||
               !o.tls.server_name.empty()) {
      // Certificates given for a connection that would go out in plain text: a forgotten switch, not a choice.
      bad("tls.enabled",
          "is false, but TLS files are set (ca_file, ca_dir, cert_file, key_file or server_name): set "
          "tls.enabled (or read a rediss:// URL), or clear them");
    }
    // Sentinels named without the master's name would leave the limiter on host:port in silence.
    if (!o.sentinel.nodes.empty() && o.sentinel.master_name.empty()) {
      throw std::invalid_argument(
          "SentinelOptions.master_name: must name the master the sentinels monitor (sentinel.nodes is set)");
    }
    return o;
  }

  void make_pipelines() {
    pipelines_.reserve(options_.pool_size);
    for (std::size_t i = 0; i < options_.pool_size; ++i) {
      pipelines_.push_back(std::make_unique<Pipeline>([this] { return open_connection(); },
                                                      [this] { drops_.fetch_add(1, std::memory_order_relaxed); },
                                                      options_.command_timeout, options_.max_in_flight));
    }
  }

  ConnectionOptions options_;
  LimiterOptions limiter_defaults_{};
  CircuitBreaker<> breaker_{options_.breaker};
  std::mutex mutex_;  // the backoff state below
  std::chrono::milliseconds backoff_{0};
  std::chrono::steady_clock::time_point next_connect_{};
  std::string last_connect_error_;
  std::atomic<std::uint64_t> connects_{0};
  std::atomic<std::uint64_t> drops_{0};
  // Last: destroyed first (their I/O threads finish before the rest of the pool goes).
  std::vector<std::unique_ptr<Pipeline>> pipelines_;
};

}  // namespace engine
using engine::ConnectionPool;
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
