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

/// TLS to the server (include/ratelimit/redis/README.md "TLS"): OpenSSL does the TLS (the library built with
/// `RATELIMIT_TLS`, on when CMake finds OpenSSL), with the server's certificate verified against the CAs below and its
/// name against `server_name`. A plain aggregate; everything off by default (plain TCP).
struct TlsOptions {
  /// Connect with TLS (the server's `tls-port`). A pool or router made with it in a build without TLS
  /// throws `std::invalid_argument` (`ConnectionOptions.tls`).
  bool enabled = false;
  /// PEM file of the certificate authorities trusted to sign the server's certificate, and/or a
  /// directory of them (OpenSSL's hashed layout, `openssl rehash`). Both empty: OpenSSL's default store.
  std::string ca_file{};
  std::string ca_dir{};
  /// The client's certificate (PEM, may hold the chain) and private key (PEM), for servers that verify
  /// clients (`tls-auth-clients yes`): both or neither.
  std::string cert_file{};
  std::string key_file{};
  /// Sent as SNI and checked against the names of the server's certificate (DNS names, or an IP address);
  /// empty: the `host` connected to (on Redis Cluster each node's, from `CLUSTER SLOTS`).
  std::string server_name{};
};

/// A sentinel's address (include/ratelimit/redis/README.md "Redis Sentinel").
using SentinelNode = ClusterNode;

/// Redis Sentinel (include/ratelimit/redis/README.md "Redis Sentinel"): the limiter asks the sentinels which server is
/// the master of `master_name` (`SENTINEL get-master-addr-by-name`, confirmed with `ROLE`), and asks again when a call
/// fails or meets `READONLY` (the master was demoted), and every `check_interval`. A plain aggregate.
struct SentinelOptions {
  /// The sentinels; any of them answers (tried in order, starting with the last that answered, so a
  /// dead one costs a connect timeout only once). With `master_name`, selects Sentinel mode: `host`,
  /// `port` and `unix_socket` are then ignored, and the rest of `ConnectionOptions` is the master's.
  std::vector<SentinelNode> nodes{};
  /// The master's name in the sentinels' configuration (`sentinel monitor <name> ...`); non-empty
  /// selects Sentinel mode.
  std::string master_name{};
  /// ACL user and password for `AUTH` on the sentinels (empty: none); the master's are
  /// `ConnectionOptions::user` and `password`.
  std::string user{};
  std::string password{};
  /// How often the master is confirmed while calls succeed (a failover is also noticed at once by failed
  /// calls and `READONLY` replies); in (0, 24 h].
  std::chrono::milliseconds check_interval{1000};
};

/// Where the time `t` of a check comes from (include/ratelimit/README.md "Redis contract").
enum class TimeSource {
  /// The script reads Redis's `TIME`: every application server sees one clock (immune to their skew).
  server,
  /// The limiter's `Clock`, sent with each call: for tests, simulations and replays (`ManualClock`).
  client,
};

/// The circuit breaker of each server (each cluster node): after `failure_threshold` consecutive round
/// trips without a usable reply (io, timeout, protocol), calls on that server get the failure policy at
/// once, without I/O, for an open period; then one probe goes through, and its success closes the breaker
/// (include/ratelimit/redis/README.md "Circuit breaker"). A plain aggregate with working defaults.
struct CircuitBreakerOptions {
  /// Consecutive failed round trips that open the breaker; 0..1000, 0 turns the breaker off.
  int failure_threshold = 3;
  /// The first open period; in (0, 24 h]. Each failed probe doubles it, up to `open_max`.
  std::chrono::milliseconds open_min{100};
  /// The longest open period; in [`open_min`, 24 h]. It bounds how late checks return to Redis after it
  /// recovers (one open period plus the probe's round trip).
  std::chrono::milliseconds open_max{500};
  /// Each open period is shortened by a random amount of up to this percentage of it (so a fleet's
  /// probes spread out); 0..100.
  int jitter_percent = 20;
};

/// Options of the connections to one Redis server, or to every node of a Redis Cluster: where it is, how
/// to log in, timeouts, the pool and its reconnect backoff. `ConnectionPool`, `ClusterRouter` and
/// `Connection` take these; limiters sharing them take their own `LimiterOptions`. A plain aggregate, every
/// field has a working default; the pool or router validates them (`std::invalid_argument` naming the field,
/// e.g. `ConnectionOptions.pool_size`).
struct ConnectionOptions {
  /// Host name or IP address of the Redis server, alone: IPv6 bare (`::1`, not `[::1]`), no port, no
  /// scheme (`ConnectionOptions.host` is refused with a `:port`, a `redis://`, nothing, or a character no
  /// host has; read a URL with `from_url`). Ignored when `unix_socket` is set.
  std::string host = "127.0.0.1";
  /// TCP port, 1..65535.
  int port = 6379;
  /// Path of a Unix domain socket; when non-empty it is used instead of host/port. Absolute, at most 107
  /// bytes (`sockaddr_un`), no NUL byte.
  std::string unix_socket{};
  /// ACL user for `AUTH user password` (Redis 6+), also with an empty password (a `nopass` user; a user
  /// that has a password then refuses the connection: `BackendError`, cause `reply`). Empty: `AUTH
  /// password` (the default user) when `password` is set.
  std::string user{};
  /// Password; with `user` and `password` both empty no `AUTH` is sent.
  std::string password{};
  /// Logical database selected with `SELECT` on every new connection; >= 0.
  int database = 0;
  /// Bound on establishing a connection (TCP connect); in (0, 24 h].
  std::chrono::milliseconds connect_timeout{200};
  /// Each call's deadline (sync calls; the default of async ones), and how long a connection may owe a
  /// reply without sending a byte before it is dropped; in (0, 24 h].
  std::chrono::milliseconds command_timeout{100};
  /// Most connections per server; in 1..1024, opened only as the load needs them (include/ratelimit/redis/README.md
  /// "Sizing the pool").
  std::size_t pool_size = 4;
  /// Most commands queued or awaiting a reply on one connection; >= 1. A call beyond it fails at once
  /// (cause `timeout`, "queue full") with the failure policy instead of waiting.
  std::size_t max_in_flight = 4096;
  /// First wait before reconnecting after a failed connect; it doubles up to `reconnect_backoff_max`.
  /// Checks during the wait fail at once (no connect storm while Redis is down). >= 0.
  std::chrono::milliseconds reconnect_backoff_min{10};
  /// Longest reconnect wait; >= `reconnect_backoff_min`, <= 24 h.
  std::chrono::milliseconds reconnect_backoff_max{1000};
  /// Redis Cluster: seed nodes (any few nodes of the cluster; the rest are discovered with
  /// `CLUSTER SLOTS`). Non-empty selects cluster mode, where `host`, `port` and `unix_socket` are ignored,
  /// `database` must be 0, and `pool_size` applies per master node.
  std::vector<ClusterNode> cluster_nodes{};
  /// Cluster mode: most redirections (`MOVED`, `ASK`) and `NOSCRIPT` re-sends followed for one check
  /// before it fails with cause `protocol`; 1..100.
  int cluster_max_redirects = 5;
  /// Cluster mode: shortest time between two slot-map refreshes triggered by errors or redirections
  /// (the first load and `ClusterRouter::refresh` are not throttled); >= 0.
  std::chrono::milliseconds cluster_refresh_interval{100};
  /// The circuit breaker of the server (of each node on Redis Cluster).
  CircuitBreakerOptions breaker{};
  /// Send scripts as Redis Functions (include/ratelimit/redis/README.md "Redis Functions"; Redis >= 7): `FCALL` of the
  /// functions of one library (`FUNCTION LOAD`ed on first use, then kept by the server across restarts with persistence
  /// and replicated to replicas), instead of `EVALSHA`. Where the server has no functions or refuses them
  /// (`NOPERM` for `FCALL` or `FUNCTION LOAD`, unknown command), scripts go as `EVALSHA` from then on.
  /// Off by default.
  bool use_functions = false;
  /// Redis Sentinel: with `sentinel.master_name` set, the server is the master the sentinels name.
  SentinelOptions sentinel{};
  /// TLS (off by default); on Redis Cluster for every node, with Sentinel for the sentinels too.
  TlsOptions tls{};

  /// The options a Redis URL names (include/ratelimit/redis/README.md "Connection options"), every other field at its
  /// default: `redis://[user[:password]@]host[:port][/db]` (port 6379, database 0 by default; an IPv6 host in brackets,
  /// `redis://[::1]:6379`), `rediss://...` the same over TLS (`tls.enabled`), and
  /// `unix://[user[:password]@]/path/to/socket[?db=N]`. The scheme is case-insensitive; user, password
  /// and socket path are percent-decoded (`p%40ss` is `p@ss`), and must percent-encode what a URL
  /// reserves. Throws `std::invalid_argument` ("ConnectionOptions::from_url: ...") saying what is wrong
  /// (no scheme, no host, a port not in 1..65535, a query, ...), never showing the URL or its password.
  /// Pure; thread-safe.
  /// Example:
  ///   ratelimit::redis::RedisOptions options;
  ///   // Assigning the connection half resets its other fields: set them after.
  ///   options.connection() = ratelimit::redis::ConnectionOptions::from_url("rediss://app:secret@10.0.0.5:6380/2");
  ///   options.tls.ca_file = "/etc/ssl/certs/redis-ca.pem";
  ///   options.pool_size = 8;
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
  /// The number of processes sharing the limit (each gets `1 / instances` of the quota); in [1, 1,000,000].
  /// Required (0, the default, is refused) when `on_error` is `fallback`.
  std::int64_t instances = 0;
  /// The first wait after a failure before a check probes Redis again; in (0, 10 s]. Each failed probe
  /// doubles it, up to `probe_max`.
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

/// Options of one `RedisLimiter` (not of its connections): how it names its Redis keys, where its time
/// comes from and what it does when Redis fails. A plain aggregate, every field has a working default;
/// the limiter validates them (`std::invalid_argument` naming the field, e.g. `LimiterOptions.name`).
struct LimiterOptions {
  /// Prepended to every Redis key (include/ratelimit/redis/README.md "Redis backend", key layout); must not contain `{`
  /// or `}`.
  std::string key_prefix = "ratelimit:";
  /// The limiter's identity in its Redis keys (include/ratelimit/redis/README.md "Which limiters share state"). Empty:
  /// the policy's kind and parameters; non-empty: every limiter of this kind and name shares one state whatever its
  /// parameters. At most 256 bytes, without `{` or `}`.
  std::string name{};
  /// Where the time of a check comes from; `server` by default.
  TimeSource time_source = TimeSource::server;
  /// What a check returns when Redis fails; `fail_open` by default (rate limiting protects, it should
  /// not take the service down with Redis).
  FailurePolicy on_error = FailurePolicy::fail_open;
  /// `retry_after` and `reset_after` of a `fail_closed` decision; in (0, 365 days].
  std::chrono::milliseconds failure_retry_after{1000};
  /// Longest key accepted, in bytes; a longer key throws `std::invalid_argument`. <= 2^20.
  std::size_t max_key_bytes = 512;
  /// `RedisLimiter`'s denial cache (off by default).
  DenialCacheOptions deny_cache{};
  /// The in-memory fallback, used when `on_error` is `FailurePolicy::fallback`.
  FallbackOptions fallback{};
  /// Called with the error each time a Redis call of this limiter fails, under every `on_error`, on the calling
  /// thread or an async call's I/O thread: it must be thread-safe, must not block and must not call the limiter;
  /// what it throws is ignored. Empty: the default report on stderr (include/ratelimit/redis/README.md "Failure
  /// policy and hook"), which `ignore_backend_failure` silences.
  /// Example:
  ///   ratelimit::redis::RedisOptions options;
  ///   options.on_error = ratelimit::FailurePolicy::fail_open;  // admit while Redis is down, but not silently:
  ///   options.on_backend_failure = [](const ratelimit::BackendError& e) {
  ///     std::fprintf(stderr, "rate limiter: %s\n", e.what());  // e.g. "redis timeout: ...", never a password
  ///   };
  ///   // or: options.on_backend_failure = ratelimit::redis::ignore_backend_failure;
  std::function<void(const BackendError&)> on_backend_failure{};
};

/// Both halves in one object, for `RedisLimiter(policy, options)`: the connection fields
/// (`ConnectionOptions`) and the limiter fields (`LimiterOptions`), each reachable by name as before
/// (`o.host`, `o.key_prefix`). A pool or router takes the halves: `ConnectionPool(o.connection(),
/// o.limiter())` (the limiter fields are then the defaults of limiters made on it without their own).
struct RedisOptions : ConnectionOptions, LimiterOptions {
  /// The connection fields of these options.
  [[nodiscard]] const ConnectionOptions& connection() const noexcept { return *this; }
  [[nodiscard]] ConnectionOptions& connection() noexcept { return *this; }
  /// The limiter fields of these options.
  [[nodiscard]] const LimiterOptions& limiter() const noexcept { return *this; }
  [[nodiscard]] LimiterOptions& limiter() noexcept { return *this; }
};

}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
