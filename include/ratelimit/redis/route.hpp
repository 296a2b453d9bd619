#pragma once

/// @file
/// `Route`: where the Redis backend's commands go. A single server is one route (`ServerRoute`, over a
/// `ConnectionPool`); Redis Cluster routes each command to its slot's master (`ClusterRouter`). Routes
/// send commands and follow redirections; they know nothing of scripts (the `ScriptExecutor` does).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/redis/circuit_breaker.hpp"
#include "ratelimit/redis/error.hpp"
#include "ratelimit/redis/options.hpp"
#include "ratelimit/redis/pool.hpp"
#include "ratelimit/redis/reply.hpp"
#include "ratelimit/redis/stats.hpp"

namespace ratelimit::redis {

class ClusterRouter;

/// One single-key command for `Route::execute`, and its outcome.
struct RouteCall {
  /// The slot of the command's key (`detail::key_slot`); a single server ignores it.
  std::uint16_t slot = 0;
  /// The command's key when calls on one key must run in request order (empty: no such constraint). Of
  /// the calls of one `execute` naming the same key, a cluster sends one at a time, after the earlier
  /// ones have their final reply (a single server's pipeline keeps order anyway). Must outlive `execute`.
  std::string_view key;
  /// The command and its arguments; they must outlive `execute`.
  std::vector<std::string_view> args;
  /// Out: the final reply (never a redirection; may be another error reply), unless `error` is set.
  Reply reply;
  /// Out: why the call got no reply. After a failure once the command was sent (timeout, connection
  /// lost) the command may still have run: it is never re-sent.
  std::optional<BackendError> error;
};

/// The former name of `RouteCall`.
using ClusterCall = RouteCall;

namespace detail {

/// What a round trip that threw `e` (not a `PoolTimeout`, which says nothing) tells `ticket`'s breaker: an
/// error reply means the server is alive, anything else a failure.
inline void settle(CircuitBreaker<>::Ticket& ticket, const BackendError& e) noexcept {
  if (e.cause() == BackendErrorCause::reply) {
    ticket.succeeded();
  } else {
    ticket.failed();
  }
}

/// The same from the outcomes of one round trip's calls: any reply (error replies too) is a success.
inline void settle(CircuitBreaker<>::Ticket& ticket, std::span<const RouteCall> calls) noexcept {
  for (const RouteCall& c : calls) {
    if (c.reply || !c.error) return ticket.succeeded();
  }
  if (!calls.empty()) settle(ticket, *calls.front().error);
}

/// The error of a call the breaker refused.
inline BackendError circuit_open(std::string_view server) {
  return BackendError(BackendErrorCause::circuit_open, "not sent: circuit breaker open for " + std::string(server));
}

}  // namespace detail

/// Where commands go. Implementations are thread-safe.
class Route {
 public:
  Route() = default;
  Route(const Route&) = delete;
  Route& operator=(const Route&) = delete;
  virtual ~Route() = default;

  /// Runs every call on the server owning its key, pipelined (per node); outcomes land in each call's
  /// `reply` / `error`, and a call is sent at most once per `execute` (redirections aside). Never throws
  /// `BackendError` (failures are per call); may throw `std::bad_alloc`.
  virtual void execute(std::span<RouteCall> calls) = 0;
  /// True when keys of different slots may live on different servers (a multi-key script then needs
  /// its keys in one slot).
  [[nodiscard]] virtual bool sharded() const noexcept = 0;
  /// What limiters sharing this route share (the pool, or the router): their joint checks can be one
  /// script.
  [[nodiscard]] virtual const void* domain() const noexcept = 0;
  /// The options of the route's connections.
  [[nodiscard]] virtual const ConnectionOptions& options() const noexcept = 0;
  /// The options of limiters made on this route without their own (defaults, unless the pool or router
  /// was made from a whole `RedisOptions`).
  [[nodiscard]] virtual const LimiterOptions& limiter_defaults() const noexcept = 0;
  [[nodiscard]] virtual RouteCounters counters() const = 0;
  /// The router when this route is Redis Cluster, else null.
  [[nodiscard]] virtual ClusterRouter* cluster_router() noexcept { return nullptr; }
};

/// A single server: every call on one pooled connection, pipelined. When the connection fails midway,
/// every call of the `execute` gets the error (the ones already sent may have run).
class ServerRoute final : public Route {
 public:
  /// Throws `std::invalid_argument` for a null pool.
  explicit ServerRoute(std::shared_ptr<ConnectionPool> pool) : pool_(std::move(pool)) {
    if (!pool_) throw std::invalid_argument("ServerRoute: null pool");
  }

  void execute(std::span<RouteCall> calls) override {
    if (calls.empty()) return;
    auto ticket = pool_->breaker().admit();  // README "Circuit breaker": no I/O while open
    if (!ticket) return fail(calls, detail::circuit_open(server()));
    if (send(calls)) detail::settle(ticket, calls);
  }
  [[nodiscard]] bool sharded() const noexcept override { return false; }
  [[nodiscard]] const void* domain() const noexcept override { return pool_.get(); }
  [[nodiscard]] const ConnectionOptions& options() const noexcept override { return pool_->options(); }
  [[nodiscard]] const LimiterOptions& limiter_defaults() const noexcept override { return pool_->limiter_defaults(); }
  [[nodiscard]] RouteCounters counters() const override {
    RouteCounters c;
    c.connects = pool_->connects();
    c.dropped_connections = pool_->drops();
    const BreakerCounters b = pool_->breaker().counters();
    c.breaker_opens = b.opens;
    c.breaker_probes = b.probes;
    return c;
  }
  [[nodiscard]] const std::shared_ptr<ConnectionPool>& pool() const noexcept { return pool_; }

 private:
  /// One pooled connection for every call. False when no connection came free: no verdict on the server.
  bool send(std::span<RouteCall> calls) {
    try {
      auto lease = pool_->acquire();
      if (calls.size() == 1) {
        calls[0].reply = lease->command(calls[0].args);
        calls[0].error.reset();
        return true;
      }
      for (const RouteCall& c : calls) lease->append(c.args);
      for (RouteCall& c : calls) {
        c.reply = lease->read_reply();
        c.error.reset();
      }
    } catch (const PoolTimeout& e) {
      fail(calls, e);
      return false;
    } catch (const BackendError& e) {
      fail(calls, e);
    }
    return true;
  }
  static void fail(std::span<RouteCall> calls, const BackendError& e) {
    for (RouteCall& c : calls) {
      c.reply.reset();
      c.error = e;
    }
  }
  [[nodiscard]] std::string server() const {
    const ConnectionOptions& o = pool_->options();
    return o.unix_socket.empty() ? o.host + ":" + std::to_string(o.port) : "unix:" + o.unix_socket;
  }

  std::shared_ptr<ConnectionPool> pool_;
};

}  // namespace ratelimit::redis
