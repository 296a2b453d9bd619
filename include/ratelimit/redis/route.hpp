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
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/redis/error.hpp"
#include "ratelimit/redis/options.hpp"
#include "ratelimit/redis/pool.hpp"
#include "ratelimit/redis/reply.hpp"

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

/// Connection counters of a route (cluster ones are zero on a single server).
struct RouteCounters {
  std::uint64_t connects = 0;
  std::uint64_t drops = 0;
  std::uint64_t moved = 0;
  std::uint64_t asks = 0;
  std::uint64_t refreshes = 0;
};

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
  [[nodiscard]] virtual const RedisOptions& options() const noexcept = 0;
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
    try {
      auto lease = pool_->acquire();
      if (calls.size() == 1) {
        calls[0].reply = lease->command(calls[0].args);
        calls[0].error.reset();
        return;
      }
      for (const RouteCall& c : calls) lease->append(c.args);
      for (RouteCall& c : calls) {
        c.reply = lease->read_reply();
        c.error.reset();
      }
    } catch (const BackendError& e) {
      for (RouteCall& c : calls) {
        c.reply.reset();
        c.error = e;
      }
    }
  }
  [[nodiscard]] bool sharded() const noexcept override { return false; }
  [[nodiscard]] const void* domain() const noexcept override { return pool_.get(); }
  [[nodiscard]] const RedisOptions& options() const noexcept override { return pool_->options(); }
  [[nodiscard]] RouteCounters counters() const override {
    RouteCounters c;
    c.connects = pool_->connects();
    c.drops = pool_->drops();
    return c;
  }
  [[nodiscard]] const std::shared_ptr<ConnectionPool>& pool() const noexcept { return pool_; }

 private:
  std::shared_ptr<ConnectionPool> pool_;
};

}  // namespace ratelimit::redis
