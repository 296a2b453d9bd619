#pragma once

/// @file
/// Options of the Redis backend.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/error.hpp"
#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/address.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {

/// One Redis Cluster node, as a seed for discovering the cluster.
struct ClusterNode {
  /// Host name or address.
  std::string host = "127.0.0.1";
  /// TCP port, 1..65535.
  int port = 6379;
};

/// True when this build has TLS (`RATELIMIT_TLS` defined and not 0: the CMake target found OpenSSL).
inline constexpr bool kTlsAvailable =
#if RATELIMIT_REDIS_WITH_TLS
    true;
#else
    false;
#endif

/// TLS to the server through OpenSSL, in builds with `RATELIMIT_TLS` (include/ratelimit/redis/README.md "TLS"). A
/// plain aggregate; off by default. Unreadable files are refused naming the field (`ConnectionOptions.tls.ca_file`).
struct TlsOptions {
  /// Connect with TLS (the server's `tls-port`); in a build without TLS a pool or router throws
  /// `std::invalid_argument` (`ConnectionOptions.tls`).
  bool enabled = false;
  /// PEM file and/or hashed directory (`openssl rehash`) of the CAs trusted; both empty: OpenSSL's default store.
  std::string ca_file{};
  std::string ca_dir{};
  /// The client's certificate and key (PEM), for servers that verify clients: both or neither.
  std::string cert_file{};
  std::string key_file{};
  /// SNI and the name the certificate must carry; empty: the `host` connected to (each Cluster node's).
  std::string server_name{};
};

/// A sentinel's address (include/ratelimit/redis/README.md "Redis Sentinel").
using SentinelNode = ClusterNode;

/// Redis Sentinel (include/ratelimit/redis/README.md "Redis Sentinel"): the master of `master_name` is asked of the
/// sentinels, again when a call fails or meets `READONLY`, and every `check_interval`. A plain aggregate.
struct SentinelOptions {
  /// The sentinels, tried in order from the last that answered. With `master_name`, `host`, `port` and
  /// `unix_socket` are ignored, and the rest of `ConnectionOptions` is the master's.
  std::vector<SentinelNode> nodes{};
  /// The master's name in the sentinels' configuration; non-empty selects Sentinel mode.
  std::string master_name{};
  /// ACL user and password for `AUTH` on the sentinels (empty: none; the master's are `ConnectionOptions`').
  std::string user{};
  std::string password{};
  /// How often the master is confirmed while calls succeed; in (0, 24 h].
  std::chrono::milliseconds check_interval{1000};
};

/// Where the time `t` of a check comes from (include/ratelimit/README.md "Redis contract").
enum class TimeSource {
  /// The script reads Redis's `TIME`: every application server sees one clock (immune to their skew).
  server,
  /// The limiter's `Clock`, sent with each call: for tests, simulations and replays (`ManualClock`).
  client,
};

/// The circuit breaker of each server (each cluster node; include/ratelimit/redis/README.md "Circuit breaker"): open
/// after `failure_threshold` consecutive failed round trips, calls then get the failure policy without I/O until a
/// probe succeeds. A plain aggregate with working defaults.
struct CircuitBreakerOptions {
  /// Consecutive failed round trips that open the breaker; 0..1000, 0 turns the breaker off.
  int failure_threshold = 3;
  /// The first open period; in (0, 24 h]. Each failed probe doubles it, up to `open_max`.
  std::chrono::milliseconds open_min{100};
  /// The longest open period; in [`open_min`, 24 h].
  std::chrono::milliseconds open_max{500};
  /// Each open period is shortened by a random amount of up to this percentage of it; 0..100.
  int jitter_percent = 20;
};

/// Options of the connections to one Redis server, or to every node of a Redis Cluster
/// (include/ratelimit/redis/README.md "Connection options"). A plain aggregate, every field has a working default;
/// the pool or router validates them (`std::invalid_argument` naming the field, e.g. `ConnectionOptions.pool_size`).
struct ConnectionOptions {
  /// Host name or IP address, alone: IPv6 bare (`::1`), no port, no scheme (read a URL with `from_url`). Ignored
  /// when `unix_socket` is set.
  std::string host = "127.0.0.1";
  /// TCP port, 1..65535.
  int port = 6379;
  /// Path of a Unix domain socket, used instead of host/port when non-empty. Absolute, at most 107 bytes, no NUL.
  std::string unix_socket{};
  /// ACL user for `AUTH user password` (Redis 6+), also with an empty password (a `nopass` user). Empty: `AUTH
  /// password` when `password` is set; both empty: no `AUTH`.
  std::string user{};
  std::string password{};
  /// Logical database selected with `SELECT` on every new connection; >= 0.
  int database = 0;
  /// Bound on establishing a connection (TCP connect); in (0, 24 h].
  std::chrono::milliseconds connect_timeout{200};
  /// Each call's deadline (the default of async ones), and how long a connection may owe a reply without sending a
  /// byte before it is dropped; in (0, 24 h].
  std::chrono::milliseconds command_timeout{100};
  /// Most connections per server; in 1..1024, opened only as the load needs them (include/ratelimit/redis/README.md
  /// "Sizing the pool").
  std::size_t pool_size = 4;
  /// Most commands queued or awaiting a reply on one connection; >= 1. A call beyond it fails at once (cause
  /// `timeout`, "queue full").
  std::size_t max_in_flight = 4096;
  /// First wait before reconnecting after a failed connect (calls meanwhile fail at once); it doubles up to
  /// `reconnect_backoff_max`. >= 0.
  std::chrono::milliseconds reconnect_backoff_min{10};
  /// Longest reconnect wait; >= `reconnect_backoff_min`, <= 24 h.
  std::chrono::milliseconds reconnect_backoff_max{1000};
  /// Redis Cluster: seed nodes (the rest are discovered). Non-empty selects cluster mode: `host`, `port` and
  /// `unix_socket` ignored, `database` must be 0, `pool_size` per master node.
  std::vector<ClusterNode> cluster_nodes{};
  /// Cluster mode: most redirections and `NOSCRIPT` re-sends for one check before it fails (cause `protocol`);
  /// 1..100.
  int cluster_max_redirects = 5;
  /// Cluster mode: shortest time between two slot-map refreshes that errors or redirections trigger; >= 0.
  std::chrono::milliseconds cluster_refresh_interval{100};
  /// The circuit breaker of the server (of each node on Redis Cluster).
  CircuitBreakerOptions breaker{};
  /// `FCALL` of one Functions library instead of `EVALSHA` (Redis >= 7; include/ratelimit/redis/README.md "Redis
  /// Functions"); where the server refuses functions, `EVALSHA` from then on. Off by default.
  bool use_functions = false;
  /// Redis Sentinel: with `sentinel.master_name` set, the server is the master the sentinels name.
  SentinelOptions sentinel{};
  /// TLS (off by default); on Redis Cluster for every node, with Sentinel for the sentinels too.
  TlsOptions tls{};

  /// The options a URL names, every other field at its default (include/ratelimit/redis/README.md "Connection
  /// options"): `redis://[user[:password]@]host[:port][/db]`, `rediss://...` (TLS), `unix://[user[:password]@]/path
  /// [?db=N]`, user, password and path percent-decoded. Throws `std::invalid_argument`
  /// ("ConnectionOptions::from_url: ...") saying what is wrong, never showing the URL. Pure; thread-safe.
  /// Example: `o.connection() = ConnectionOptions::from_url("rediss://app:secret@10.0.0.5:6380/2");` (this resets
  /// the other connection fields: set them after).
  [[nodiscard]] static ConnectionOptions from_url(std::string_view url) {
    detail::RedisUrl u = detail::parse_redis_url(url);
    ConnectionOptions o;
    o.unix_socket = std::move(u.unix_socket);
    if (o.unix_socket.empty()) {
      o.host = std::move(u.host);
      o.port = u.port;
    }
    o.user = std::move(u.user);
    o.password = std::move(u.password);
    o.database = u.database;
    o.tls.enabled = u.tls;
    return o;
  }
};

/// The in-memory fallback of a Redis rate limiter (`on_error = FailurePolicy::fallback`,
/// include/ratelimit/redis/README.md "Fallback during outages"). A plain aggregate; the limiter validates it
/// (`std::invalid_argument` naming the field, e.g. `LimiterOptions.fallback.instances`).
struct FallbackOptions {
  /// The processes sharing the limit (each gets `1 / instances` of the quota); in [1, 1,000,000]. Required (0, the
  /// default, is refused) when `on_error` is `fallback`.
  std::int64_t instances = 0;
  /// The first wait after a failure before a check probes Redis again; in (0, 10 s]; each failed probe doubles it.
  std::chrono::milliseconds probe_min{50};
  /// The longest wait between two probes; in [`probe_min`, 10 s].
  std::chrono::milliseconds probe_max{250};
  /// Most keys the fallback holds (its `MemoryOptions::max_keys`, least recently used evicted); >= 1.
  std::size_t max_keys = 100'000;
};

/// The local denial cache of a `RedisLimiter` (include/ratelimit/redis/README.md "Denial cache"). A plain aggregate.
struct DenialCacheOptions {
  /// Off by default: a denial it repeats can be one Redis would no longer give (units refunded meanwhile).
  bool enabled = false;
  /// Most keys it holds (expired denials dropped first, then any); >= 1.
  std::size_t max_keys = 100'000;
};

/// Options of one `RedisLimiter` (not of its connections). A plain aggregate, every field has a working default; the
/// limiter validates them (`std::invalid_argument` naming the field, e.g. `LimiterOptions.name`).
struct LimiterOptions {
  /// Prepended to every Redis key (include/ratelimit/redis/README.md "Key layout"); without `{` or `}`.
  std::string key_prefix = "ratelimit:";
  /// The limiter's identity in its Redis keys (include/ratelimit/redis/README.md "Which limiters share state"); empty:
  /// the policy's kind and parameters. At most 256 bytes, without `{` or `}`.
  std::string name{};
  /// Where the time of a check comes from; `server` by default.
  TimeSource time_source = TimeSource::server;
  /// What a check returns when Redis fails; `fail_open` by default (a Redis outage should not take the service down).
  FailurePolicy on_error = FailurePolicy::fail_open;
  /// `retry_after` and `reset_after` of a `fail_closed` decision; in (0, 365 days].
  std::chrono::milliseconds failure_retry_after{1000};
  /// Longest key accepted, in bytes; a longer key throws `std::invalid_argument`. <= 2^20.
  std::size_t max_key_bytes = 512;
  /// `RedisLimiter`'s denial cache (off by default).
  DenialCacheOptions deny_cache{};
  /// The in-memory fallback, used when `on_error` is `FailurePolicy::fallback`.
  FallbackOptions fallback{};
  /// Called with the error each time a Redis call of this limiter fails, on the calling thread or an I/O thread: it
  /// must be thread-safe, must not block nor call the limiter; what it throws is ignored. Empty: the default report on
  /// stderr (include/ratelimit/redis/README.md "Failure policy and hook"); `ignore_backend_failure` silences it.
  std::function<void(const BackendError&)> on_backend_failure{};
};

/// Both halves in one object, for `RedisLimiter(policy, options)`, each field reachable by name (`o.host`,
/// `o.key_prefix`). A pool or router takes the halves: `ConnectionPool(o.connection(), o.limiter())`.
struct RedisOptions : ConnectionOptions, LimiterOptions {
  /// The connection fields, and the limiter fields, of these options.
  [[nodiscard]] const ConnectionOptions& connection() const noexcept { return *this; }
  [[nodiscard]] ConnectionOptions& connection() noexcept { return *this; }
  [[nodiscard]] const LimiterOptions& limiter() const noexcept { return *this; }
  [[nodiscard]] LimiterOptions& limiter() noexcept { return *this; }
};

}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
