#pragma once

/// @file
/// `SentinelRoute`: one Redis server found through Redis Sentinel, and followed across failovers.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/engine/connection.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/redis/options.hpp"
#include "ratelimit/redis/engine/pipeline.hpp"
#include "ratelimit/redis/engine/pool.hpp"
#include "ratelimit/redis/engine/reply.hpp"
#include "ratelimit/redis/engine/route.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace engine {

/// The master that Redis Sentinel names for `ConnectionOptions::sentinel.master_name`, followed across
/// failovers (include/ratelimit/redis/README.md "Redis Sentinel"): calls go to a `ConnectionPool` of it, as on
/// a `ServerRoute`. The sentinels are asked (and `ROLE` confirmed) on the route's worker thread, so a slow
/// sentinel holds no call past its deadline; a sync call failed as a failover explains waits for that
/// discovery, and what did not run on the old master (`READONLY`, or unsent) runs on the new one, once.
/// Thread-safe.
class SentinelRoute final : public Route {
 public:
  /// Validates `options`; connects nothing yet. Throws `std::invalid_argument` naming the field (e.g.
  /// `SentinelOptions.master_name`). `limiter_defaults`: for limiters made here without their own.
  explicit SentinelRoute(ConnectionOptions options, LimiterOptions limiter_defaults = {})
      : options_(validated(std::move(options))),
        limiter_defaults_(std::move(limiter_defaults)),
        worker_(
            options_.max_in_flight, [this](bool asked, bool held) { discover_for(asked, held); },
            [this](const std::vector<PipelineOp*>& calls) { start(calls); }) {}
  SentinelRoute(const SentinelRoute&) = delete;
  SentinelRoute& operator=(const SentinelRoute&) = delete;
  ~SentinelRoute() override {
    // In a forked child the condition may count a parent's waiting thread: destroying it would wait forever.
    if (forked()) (void)discovered_.release();
  }

  void execute(std::span<RouteCall> calls) override {
    if (calls.empty()) return;
    check_not_forked();
    auto deadline = std::chrono::steady_clock::now() + options_.command_timeout;
    for (const RouteCall& c : calls) deadline = std::min(deadline, c.deadline);
    for (RouteCall& c : calls) c.deadline = deadline;  // the wait for a master counts against it
    std::shared_ptr<ConnectionPool> pool;
    try {
      pool = master_by(deadline);
    } catch (const BackendError& e) {
      return detail::fail_unsent(calls, e);
    }
    // A local refusal says nothing of the master either.
    if (detail::execute_gated(*pool, calls) == detail::Gated::queue_full || !suspect(calls)) return;
    const std::shared_ptr<ConnectionPool> now = after_failure(*pool, deadline);
    if (!now || now == pool) return;  // the calls keep their own failures
    // A new master: what did not run on the old one runs there (once), its outcome back in place.
    std::vector<RouteCall*> again;
    std::vector<RouteCall> part;
    for (RouteCall& c : calls) {
      if (!did_not_run(c)) continue;
      again.push_back(&c);
      part.push_back(std::move(c));
    }
    if (part.empty()) return;
    (void)detail::execute_gated(*now, part);
    for (std::size_t k = 0; k < part.size(); ++k) *again[k] = std::move(part[k]);
  }

  void submit(PipelineOp& op) override {
    check_not_forked();
    if (const std::shared_ptr<ConnectionPool> pool = known()) return send(*pool, op);
    worker_.submit(op);  // its thread asks the sentinels first
  }

  [[nodiscard]] bool sharded() const noexcept override { return false; }
  [[nodiscard]] const void* domain() const noexcept override { return this; }
  /// The options as given (`host` and `port` are not the master's: see `master_address`).
  [[nodiscard]] const ConnectionOptions& options() const noexcept override { return options_; }
  [[nodiscard]] const LimiterOptions& limiter_defaults() const noexcept override { return limiter_defaults_; }
  [[nodiscard]] RouteCounters counters() const override {
    const std::lock_guard lock(mutex_);
    RouteCounters c = freed_;
    if (pool_) detail::add_counters(c, *pool_);
    for (const auto& p : retired_) detail::add_counters(c, *p);
    c.refused_calls += worker_.refused();
    c.master_discoveries = discoveries_;
    c.master_changes = changes_;
    return c;
  }

  /// The master's address (`host:port`) as last discovered; empty before the first discovery. Thread-safe.
  [[nodiscard]] std::string master_address() const {
    const std::lock_guard lock(mutex_);
    return address_;
  }

  /// Asks the sentinels now and follows the master they name; returns its address (`host:port`). Thread-safe.
  /// Throws `BackendError` when no sentinel names a confirmed master; `std::logic_error` in a forked child.
  std::string refresh() {
    check_not_forked();
    (void)rediscover(Why::asked);
    return master_address();
  }

 private:
  /// Why the sentinels are asked: a check is due (or no master is known), a call failed, or `refresh`.
  enum class Why { due, failed, asked };

  using Address = ClusterNode;  // host and port

  static ConnectionOptions validated(ConnectionOptions o) {
    const SentinelOptions& s = o.sentinel;
    auto bad = [](const std::string& field, const char* what) {
      throw std::invalid_argument("SentinelOptions." + field + ": " + what);
    };
    if (s.master_name.empty()) bad("master_name", "must name the master the sentinels monitor");
    if (s.nodes.empty()) bad("nodes", "must name at least one sentinel");
    redis::detail::check_nodes(s.nodes, "SentinelOptions.nodes");
    if (s.check_interval.count() <= 0 || s.check_interval > std::chrono::hours(24)) {
      bad("check_interval", "must be in (0, 24 h]");
    }
    if (!o.cluster_nodes.empty()) {
      throw std::invalid_argument("ConnectionOptions.cluster_nodes: Redis Cluster and Sentinel exclude each other");
    }
    o.unix_socket.clear();
    ConnectionOptions master = o;
    master.host = s.nodes.front().host;  // the master's address comes from the sentinels: `host` is not used
    (void)ConnectionPool(master);        // validates the master's connection fields (connects nothing)
    return o;
  }

  static bool did_not_run(const RouteCall& c) {
    return (c.reply && is_error(*c.reply, "READONLY")) || (c.error && !c.sent);
  }
  /// An outcome that a failover explains: the server gone, or demoted.
  static bool suspect(const Reply& reply, const std::optional<BackendError>& error) noexcept {
    return (reply && is_error(*reply, "READONLY")) || (error && error->cause() != BackendErrorCause::reply);
  }
  static bool suspect(std::span<const RouteCall> calls) {
    return std::any_of(calls.begin(), calls.end(), [](const RouteCall& c) { return suspect(c.reply, c.error); });
  }

  /// An async call on the master's pipeline: an outcome a failover explains has the sentinels asked.
  class Watched final : public detail::Relay {
   public:
    Watched(SentinelRoute& route, PipelineOp& call, const ConnectionPool& pool) noexcept
        : Relay(route, call), route_(route), pool_(pool) {}
    void complete(Reply reply, std::optional<BackendError> error) noexcept override {
      if (suspect(reply, error)) route_.failed_on(pool_);
      hand_back(std::move(reply), std::move(error));
    }

   private:
    SentinelRoute& route_;
    const ConnectionPool& pool_;
  };

  /// Sends async `op` to `pool`, gated by its breaker, watched on its way back.
  void send(ConnectionPool& pool, PipelineOp& op) { detail::submit_gated(pool, *new Watched(*this, op, pool)); }
  /// An async call on `pool` failed as a failover explains (called on its I/O thread: no I/O here).
  void failed_on(const ConnectionPool& pool) noexcept {
    const std::lock_guard lock(mutex_);
    if (pool_.get() == &pool) failed_on_ = &pool;
  }

  /// The known master's pool (null when none is known yet); when a check is due or a call on it failed, has the
  /// worker ask the sentinels. Never blocks.
  std::shared_ptr<ConnectionPool> known() {
    std::unique_lock lock(mutex_);
    std::shared_ptr<ConnectionPool> pool = pool_;
    const bool due = pool && (std::chrono::steady_clock::now() >= next_check_ || failed_on_ == pool.get());
    lock.unlock();
    if (due) worker_.ask();
    return pool;
  }
  /// Has the worker ask the sentinels and waits (`lock` held) until that discovery ended, `done()` holds or
  /// `deadline` passed (then false).
  template <class Done>
  bool await_discovery(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point deadline, Done done) {
    const std::uint64_t seen = background_discoveries_;
    lock.unlock();
    worker_.ask();
    lock.lock();
    return discovered_->wait_until(lock, deadline, [&] { return done() || background_discoveries_ != seen; });
  }
  /// The worker's discovery: after a failed call (at most every 100 ms), or because a check is due. A
  /// failed one keeps the master known (the sentinels may be down while it is fine), tried again in 100 ms.
  void discover_in_background() {
    const ConnectionPool* failed = nullptr;
    {
      const std::lock_guard lock(mutex_);
      failed = std::exchange(failed_on_, nullptr);
    }
    try {
      (void)(failed != nullptr ? rediscover(Why::failed, failed) : rediscover(Why::due));
    } catch (const BackendError& e) {
      const std::lock_guard lock(mutex_);
      next_check_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      discovery_error_ = e;
    }
    {
      const std::lock_guard lock(mutex_);
      ++background_discoveries_;
    }
    discovered_->notify_all();
  }
  /// A sync call on `failed` failed as a failover explains: asks the sentinels in the background and waits
  /// for that until `deadline`. Returns the master's pool then (`failed`'s, unless it changed).
  std::shared_ptr<ConnectionPool> after_failure(const ConnectionPool& failed,
                                                std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    if (pool_.get() == &failed) failed_on_ = &failed;
    (void)await_discovery(lock, deadline, [] { return false; });
    return pool_;
  }

  /// The worker's task: a background discovery when `asked`; for async calls held while no master is known, a
  /// discovery unless that one just ran (its failure is theirs).
  void discover_for(bool asked, bool held) {
    if (asked) discover_in_background();
    if (!held || asked) return;
    try {
      (void)master();
    } catch (const BackendError& e) {
      const std::lock_guard lock(mutex_);
      discovery_error_ = e;
    }
  }

  /// The async calls held for the worker's discovery: sent to the master found, or failed with why.
  void start(const std::vector<PipelineOp*>& calls) {
    std::shared_ptr<ConnectionPool> pool;
    std::optional<BackendError> error;
    {
      const std::lock_guard lock(mutex_);
      pool = pool_;
      if (!pool) error = no_master();
    }
    if (pool) {
      for (PipelineOp* op : calls) send(*pool, *op);
      return;
    }
    const BackendError& e = *error;
    const detail::CompletionScope completions;
    for (PipelineOp* op : calls) op->complete(nullptr, e);
  }

  /// The master's pool for a sync call: the known one, else the one the worker's discovery finds by `deadline`
  /// (one discovery serves every waiting caller). Throws `BackendError`: the discovery's failure (also for
  /// 100 ms after it, without asking again), or cause `timeout` when it has not ended by `deadline`.
  std::shared_ptr<ConnectionPool> master_by(std::chrono::steady_clock::time_point deadline) {
    if (std::shared_ptr<ConnectionPool> pool = known()) return pool;
    std::unique_lock lock(mutex_);
    if (discovery_error_ && !pool_ && std::chrono::steady_clock::now() < next_check_)
      throw discovery_error_->unshared();
    if (!await_discovery(lock, deadline, [&] { return pool_ != nullptr; })) {
      throw BackendError(BackendErrorCause::timeout, "Redis Sentinel: no master '" + options_.sentinel.master_name +
                                                         "' known yet: the sentinels did not answer by the call's "
                                                         "deadline");
    }
    if (pool_) return pool_;
    throw no_master();
  }

  /// Why no master is known (`mutex_` held): the last discovery's failure, else none found.
  [[nodiscard]] BackendError no_master() const {
    return discovery_error_ ? discovery_error_->unshared()
                            : BackendError(BackendErrorCause::io,
                                           "Redis Sentinel: no master '" + options_.sentinel.master_name + "' found");
  }

  /// The master's pool: the known one, else the one the sentinels name now (on the worker's thread). Throws
  /// `BackendError` when none is found.
  std::shared_ptr<ConnectionPool> master() {
    if (std::shared_ptr<ConnectionPool> pool = known()) return pool;
    return rediscover(Why::due);
  }

  /// Takes the replaced masters' pools nothing uses (no holder, no call outstanding), for the caller to destroy
  /// with no lock held; their counters stay in `freed_`. None on an I/O thread, which must not destroy its pool.
  std::vector<std::shared_ptr<ConnectionPool>> take_unused() {
    std::vector<std::shared_ptr<ConnectionPool>> unused;
    if (detail::on_io_thread()) return unused;
    const std::lock_guard lock(mutex_);
    for (auto it = retired_.begin(); it != retired_.end();) {
      if (it->use_count() == 1 && (*it)->load() == 0) {
        detail::add_counters(freed_, **it);
        unused.push_back(std::move(*it));
        it = retired_.erase(it);
      } else {
        ++it;
      }
    }
    return unused;
  }

  /// Asks the sentinels and moves to the master they name, unless another thread's discovery answered `why`: no
  /// check due; after a failed call on `seen`, another pool or one < 100 ms old. Throws `BackendError` if none.
  std::shared_ptr<ConnectionPool> rediscover(Why why, const ConnectionPool* seen = nullptr) {
    std::vector<std::shared_ptr<ConnectionPool>> unused;  // destroyed last, with no lock held
    const std::lock_guard one(discovery_mutex_);          // one discovery at a time; the others wait for it
    const auto now = std::chrono::steady_clock::now();
    {
      const std::lock_guard lock(mutex_);
      if (pool_ && why == Why::due && now < next_check_) return pool_;
      if (pool_ && why == Why::failed &&
          (pool_.get() != seen || now < last_discovery_ + std::chrono::milliseconds(100))) {
        return pool_;
      }
      last_discovery_ = now;
      ++discoveries_;
    }
    unused = take_unused();  // at most one check_interval after a replaced master's last call
    const Address a = discover();
    const std::string address = a.host + ":" + std::to_string(a.port);
    const std::lock_guard lock(mutex_);
    next_check_ = std::chrono::steady_clock::now() + options_.sentinel.check_interval;
    if (pool_ && address == address_) return pool_;
    if (pool_) {
      ++changes_;
      retired_.push_back(std::move(pool_));  // until idle (`free_retired`): calls may be outstanding on it
    }
    pool_ = std::make_shared<ConnectionPool>(detail::at(options_, a.host, a.port), limiter_defaults_,
                                             ConnectionPool::Discovered{});
    address_ = address;
    discovery_error_.reset();
    discovered_->notify_all();  // sync callers waiting for a first master (`master_by`)
    return pool_;
  }

  /// The master's address from the first sentinel that names one whose `ROLE` is master.
  Address discover() {
    const SentinelOptions& s = options_.sentinel;
    std::string why;
    bool answered = false;
    std::size_t first;
    {
      const std::lock_guard lock(mutex_);
      first = preferred_;
    }
    for (std::size_t k = 0; k < s.nodes.size(); ++k) {
      const std::size_t i = (first + k) % s.nodes.size();
      const std::string where = s.nodes[i].host + ":" + std::to_string(s.nodes[i].port);
      try {
        ConnectionOptions so;
        so.host = s.nodes[i].host;
        so.port = s.nodes[i].port;
        so.user = s.user;
        so.password = s.password;
        so.connect_timeout = options_.connect_timeout;
        so.tls = options_.tls;  // the sentinels speak what the servers do
        so.command_timeout = options_.command_timeout;
        Connection c = Connection::open(so);
        const Reply r = c.command({"SENTINEL", "get-master-addr-by-name", s.master_name});
        answered = true;
        const bool pair = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                          r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING;
        if (!pair) {
          why += "; sentinel " + where +
                 (r->type == REDIS_REPLY_NIL     ? " does not know a master named '" + s.master_name + "'"
                  : r->type == REDIS_REPLY_ERROR ? ": " + std::string(text(*r))
                                                 : ": malformed reply to SENTINEL get-master-addr-by-name");
          continue;
        }
        Address a{std::string(text(*r->element[0])), std::stoi(std::string(text(*r->element[1])))};
        if (const std::string role = role_of(a); role != "master") {
          why += "; sentinel " + where + " names " + a.host + ":" + std::to_string(a.port) + ", which " + role;
          continue;
        }
        const std::lock_guard lock(mutex_);
        preferred_ = i;
        return a;
      } catch (const std::exception& e) {  // BackendError, or std::stoi of a malformed port
        why += "; sentinel " + where + ": " + e.what();
      }
    }
    throw BackendError(answered ? BackendErrorCause::reply : BackendErrorCause::io,
                       "Redis Sentinel: no master '" + s.master_name + "' found" + why);
  }

  /// "master", or why the server at `a` is not one ("is a replica", "cannot be reached: ...").
  std::string role_of(const Address& a) {
    try {
      Connection c = Connection::open(detail::at(options_, a.host, a.port));
      const Reply r = c.command({"ROLE"});
      if (is_error(*r, "NOPERM")) return "master";  // a user without +role: take the sentinel's word
      if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 && text(*r->element[0]) == "master") return "master";
      return "is not a master (ROLE " + std::string(r->elements >= 1 ? text(*r->element[0]) : text(*r)) + ")";
    } catch (const BackendError& e) {
      return std::string("cannot be reached: ") + e.what();
    }
  }

  const ConnectionOptions options_;
  const LimiterOptions limiter_defaults_;
  mutable std::mutex mutex_;    // the fields below
  std::mutex discovery_mutex_;  // one discovery at a time
  std::unique_ptr<std::condition_variable> discovered_ = std::make_unique<std::condition_variable>();
  std::uint64_t background_discoveries_ = 0;
  std::optional<BackendError> discovery_error_;  // why the last background discovery found no master
  std::shared_ptr<ConnectionPool> pool_;
  const ConnectionPool* failed_on_ = nullptr;             // an async call on this pool failed: the next ones rediscover
  std::vector<std::shared_ptr<ConnectionPool>> retired_;  // replaced masters' pools, until unused
  RouteCounters freed_;                                   // the counters of the retired pools freed
  std::string address_;
  std::size_t preferred_ = 0;  // the sentinel that answered last
  std::chrono::steady_clock::time_point next_check_{};
  std::chrono::steady_clock::time_point last_discovery_{};
  std::uint64_t discoveries_ = 0;
  std::uint64_t changes_ = 0;
  RouteWorker worker_;  // last: destroyed first, its batch finishes while the pools live
};

}  // namespace engine
using engine::SentinelRoute;
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
