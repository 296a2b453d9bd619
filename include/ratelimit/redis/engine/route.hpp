#pragma once

/// @file
/// `Route`: where commands go (`ServerRoute`, `ClusterRouter`, `SentinelRoute`). Routes send commands and
/// follow redirections; they know nothing of scripts (`engine/script_call.hpp` does).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/engine/circuit_breaker.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/redis/options.hpp"
#include "ratelimit/redis/engine/pipeline.hpp"
#include "ratelimit/redis/engine/pool.hpp"
#include "ratelimit/redis/engine/reply.hpp"
#include "ratelimit/redis/stats.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace engine {

class ClusterRouter;

namespace detail {

/// What failure `e` tells `ticket`'s breaker: an error reply means the server is alive, anything else failed.
inline void settle(CircuitBreaker<>::Ticket& ticket, const BackendError& e) noexcept {
  e.cause() == BackendErrorCause::reply ? ticket.succeeded() : ticket.failed();
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

/// Adds the counters of `pool` (connections, refusals, its breaker) to `c`.
inline void add_counters(RouteCounters& c, ConnectionPool& pool) {
  c.connects += pool.connects();
  c.dropped_connections += pool.drops();
  c.refused_calls += pool.refused();
  const BreakerCounters b = pool.breaker().counters();
  c.breaker_opens += b.opens;
  c.breaker_probes += b.probes;
}

/// Sets every call of `calls` to the error `e` (none was sent).
inline void fail_unsent(std::span<RouteCall> calls, const BackendError& e) {
  for (RouteCall& c : calls) {
    c.reply.reset();
    c.error = e;
    c.sent = false;
  }
}

/// How `execute_gated` ended: queued (outcomes in the calls), refused by the breaker (cause `circuit_open`), or
/// refused locally (`max_in_flight` outstanding); refused calls were not sent.
enum class Gated { ran, circuit_open, queue_full };

/// One round trip of sync calls on a pool's shared connection, gated by the server's breaker
/// (include/ratelimit/redis/README.md "Circuit breaker"); a local refusal tells the breaker nothing. `start`
/// queues, `finish` (or destruction) waits, so one caller can have several in flight.
class GatedRoundTrip {
 public:
  /// Queues `calls` (`drive`: as `Pipeline::start`), or fails them at once, unsent.
  Gated start(ConnectionPool& pool, std::span<RouteCall> calls, bool drive = true) {
    ticket_.emplace(pool.breaker().admit());
    if (!*ticket_) {
      fail_unsent(calls, circuit_open(endpoint(pool.options())));
      return Gated::circuit_open;
    }
    calls_ = calls;
    if (calls.empty() || pool.pipeline().start(calls, sync_, drive)) return Gated::ran;
    ticket_.reset();
    return Gated::queue_full;
  }
  /// Waits until every call queued has its outcome.
  void finish() {
    if (sync_.pipeline == nullptr) return;
    sync_.pipeline->wait(sync_);
    settle(*ticket_, calls_);
  }

 private:
  std::optional<CircuitBreaker<>::Ticket> ticket_;
  std::span<RouteCall> calls_;
  SyncCalls sync_;
};

/// Runs `calls` on `pool`'s shared connection as one gated round trip (`GatedRoundTrip`).
inline Gated execute_gated(ConnectionPool& pool, std::span<RouteCall> calls) {
  GatedRoundTrip trip;
  const Gated g = trip.start(pool, calls);
  trip.finish();
  return g;
}

/// Starts async `op` on `pool` under one breaker ticket, settled by its outcome; refused, it completes with cause
/// `circuit_open` on the I/O thread, unsent. A call already past its deadline (never written) takes no ticket.
inline void submit_gated(ConnectionPool& pool, PipelineOp& op) {
  Pipeline& pipeline = pool.pipeline();
  if (op.deadline <= std::chrono::steady_clock::now()) return pipeline.submit(op);
  auto ticket = pool.breaker().admit();
  if (!ticket) return pipeline.reject(op, circuit_open(endpoint(pool.options())));
  pipeline.submit(op, std::move(ticket));
}

}  // namespace detail

/// Where commands go; also the sink of the async calls it relays (their re-sends come back to it). Thread-safe.
class Route : public AsyncSink {
 public:
  Route() = default;
  Route(const Route&) = delete;
  Route& operator=(const Route&) = delete;
  virtual ~Route() = default;

  /// Runs every call on the server owning its key, pipelined (per node); outcomes land in each call's
  /// `reply` / `error`, and a call is sent at most once per `execute` (redirections aside). Never throws
  /// `BackendError` (failures are per call); may throw `std::bad_alloc`, and `std::logic_error` in a
  /// process forked after the route was made (touching nothing).
  virtual void execute(std::span<RouteCall> calls) = 0;
  /// Starts one async call (`op.command`, `op.args`, `op.slot`, `op.deadline` set); never blocks. `op.complete`
  /// runs exactly once on the route's I/O thread, also when the breaker refuses it (cause `circuit_open`). Throws
  /// `std::logic_error` in a process forked after the route was made.
  virtual void submit(PipelineOp& op) = 0;
  /// True when keys of different slots may live on different servers (a multi-key script needs one slot).
  [[nodiscard]] virtual bool sharded() const noexcept = 0;
  /// What limiters sharing this route share: their joint checks can be one script.
  [[nodiscard]] virtual const void* domain() const noexcept = 0;
  /// The options of the route's connections.
  [[nodiscard]] virtual const ConnectionOptions& options() const noexcept = 0;
  /// The options of limiters made on this route without their own.
  [[nodiscard]] virtual const LimiterOptions& limiter_defaults() const noexcept = 0;
  [[nodiscard]] virtual RouteCounters counters() const = 0;
  /// The router when this route is Redis Cluster, else null.
  [[nodiscard]] virtual ClusterRouter* cluster_router() noexcept { return nullptr; }

  /// True when scripts go as `FCALL` (`ConnectionOptions::use_functions`) and no server refused Functions yet.
  [[nodiscard]] bool functions_usable() const noexcept {
    return options().use_functions && !functions_refused_->load(std::memory_order_relaxed);
  }
  /// Set when a server refused `FCALL` or `FUNCTION LOAD` (later scripts go as `EVALSHA`); shared with async
  /// calls, which may outlive the route.
  [[nodiscard]] const std::shared_ptr<std::atomic<bool>>& functions_refusal() const noexcept {
    return functions_refused_;
  }

 protected:
  /// Throws `std::logic_error` in a process forked after the route was made, touching nothing.
  void check_not_forked() const { fork_.check(); }
  [[nodiscard]] bool forked() const noexcept { return fork_.forked(); }

 private:
  std::shared_ptr<std::atomic<bool>> functions_refused_ = std::make_shared<std::atomic<bool>>(false);
  detail::ForkCheck fork_;
};

/// A single server: every call on the pool's shared pipelined connection, gated by the server's breaker. When
/// the connection fails midway, every call written and unanswered gets the error (it may have run).
class ServerRoute final : public Route {
 public:
  /// Throws `std::invalid_argument` for a null pool.
  explicit ServerRoute(std::shared_ptr<ConnectionPool> pool) : pool_(std::move(pool)) {
    if (!pool_) throw std::invalid_argument("ServerRoute: null pool");
  }

  void execute(std::span<RouteCall> calls) override {
    if (!calls.empty()) (void)detail::execute_gated(*pool_, calls);
  }
  void submit(PipelineOp& op) override { detail::submit_gated(*pool_, op); }
  [[nodiscard]] bool sharded() const noexcept override { return false; }
  [[nodiscard]] const void* domain() const noexcept override { return pool_.get(); }
  [[nodiscard]] const ConnectionOptions& options() const noexcept override { return pool_->options(); }
  [[nodiscard]] const LimiterOptions& limiter_defaults() const noexcept override { return pool_->limiter_defaults(); }
  [[nodiscard]] RouteCounters counters() const override {
    RouteCounters c;
    detail::add_counters(c, *pool_);
    return c;
  }

 private:
  std::shared_ptr<ConnectionPool> pool_;
};

/// A route's own threads for what must not block a caller or an I/O thread. The task thread runs the route's
/// background task (`ask`: ask the sentinels, reload a slot map), which may block for long. Async calls that wait
/// for it (no master or slot owner known yet) are held meanwhile and handed to `place` when a run of the task ends;
/// a held call whose deadline passes first fails then (cause timeout) on the timer thread, so a dead seed or
/// sentinel holds no call past its own deadline. Past `max_in_flight` held, calls fail (cause timeout);
/// destruction waits for the running task and fails the held calls (cause io). Thread-safe; refuses use in a
/// forked child.
class RouteWorker final : public AsyncSink {
 public:
  /// The background task; `asked`: `ask` was called since its last run; `held`: calls wait for this run.
  using Task = std::function<void(bool asked, bool held)>;
  /// Sends or fails each call once, after a run of the task (on the task thread); must not block.
  using Place = std::function<void(const std::vector<PipelineOp*>& calls)>;

  RouteWorker(std::size_t max_in_flight, Task task, Place place)
      : max_in_flight_(max_in_flight), task_(std::move(task)), place_(std::move(place)) {}
  RouteWorker(const RouteWorker&) = delete;
  RouteWorker& operator=(const RouteWorker&) = delete;
  ~RouteWorker() {
    if (fork_.forked()) {  // the condition variables may count the parent's threads: destroying one would hang
      (void)task_cv_.release();
      (void)timer_cv_.release();
      (void)ended_cv_.release();
      for (std::thread* t : {&task_thread_, &timer_thread_}) {
        if (t->joinable()) new std::thread(std::move(*t));  // the parent's threads: not in this process
      }
      return;
    }
    stop(task_thread_, *task_cv_, [this] { stopping_ = true; });
    stop(timer_thread_, *timer_cv_, [this] { timer_stopping_ = true; });  // it fails what is held
  }

  /// Holds `op` for the next run of the task (or, past `max_in_flight`, refuses it on the timer thread).
  void submit(PipelineOp& op) override {
    fork_.check();
    PipelineOpAccess::set_sink(op, this);
    {
      const std::lock_guard lock(mutex_);
      start_threads();
      if (held_.size() - taken_ >= max_in_flight_) {  // the calls the running task serves are not queued
        refused_.fetch_add(1, std::memory_order_relaxed);
        refused_ops_.push_back(&op);
      } else {
        held_.push_back(&op);
        wanted_ = true;
      }
    }
    task_cv_->notify_one();
    timer_cv_->notify_one();
  }
  [[nodiscard]] std::uint64_t refused() const noexcept { return refused_.load(std::memory_order_relaxed); }

  /// Has the task run (once, however many ask meanwhile). Never blocks. Returns the number of the run that
  /// serves this request, for `await`.
  std::uint64_t ask() {
    if (fork_.forked()) return 0;
    std::uint64_t run = 0;
    {
      const std::lock_guard lock(mutex_);
      if (stopping_) return ended_;
      asked_ = true;
      start_threads();
      run = started_ + 1;
    }
    task_cv_->notify_one();
    return run;
  }

  /// Waits until run `run` of the task (from `ask`) ended, or `deadline` passed (then false).
  bool await(std::uint64_t run, std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    return ended_cv_->wait_until(lock, deadline, [&] { return ended_ >= run || stopping_; }) && ended_ >= run;
  }

 private:
  static BackendError destroyed() {
    return BackendError(BackendErrorCause::io, "connection closed: the limiter was destroyed");
  }
  static void fail(const std::vector<PipelineOp*>& ops, const BackendError& e) {
    const detail::CompletionScope completions;
    for (PipelineOp* op : ops) op->complete(nullptr, e);
  }
  template <class Flag>
  void stop(std::thread& thread, std::condition_variable& cv, Flag flag) {
    {
      const std::lock_guard lock(mutex_);
      flag();
    }
    cv.notify_one();
    ended_cv_->notify_all();
    if (thread.joinable()) thread.join();
  }
  void start_threads() {  // lock held
    if (!task_thread_.joinable()) task_thread_ = std::thread([this] { run_tasks(); });
    if (!timer_thread_.joinable()) timer_thread_ = std::thread([this] { run_timer(); });
  }

  // The task may block (no I/O thread).
  void run_tasks() {
    std::unique_lock lock(mutex_);
    for (;;) {
      task_cv_->wait(lock, [this] { return stopping_ || asked_ || wanted_; });
      if (stopping_) return;
      const bool asked = std::exchange(asked_, false);
      const bool held = std::exchange(wanted_, false);
      taken_ = held_.size();
      ++started_;
      lock.unlock();
      task_(asked, held);
      lock.lock();
      std::vector<PipelineOp*> calls;
      if (!stopping_) {  // while stopping, the timer fails them
        calls.swap(held_);
        taken_ = 0;
        wanted_ = false;  // the calls held during this run are served by its end too
      }
      ++ended_;
      ended_cv_->notify_all();
      if (calls.empty()) continue;
      lock.unlock();
      place_(calls);
      lock.lock();
    }
  }

  // Fails the refused calls, and the held ones whose deadline passed; when stopping, every held call.
  void run_timer() {
    std::unique_lock lock(mutex_);
    for (;;) {
      const auto now = std::chrono::steady_clock::now();
      std::vector<PipelineOp*> refused, expired;
      refused.swap(refused_ops_);
      std::size_t kept = 0, taken = 0;
      for (std::size_t i = 0; i < held_.size(); ++i) {
        PipelineOp* op = held_[i];
        if (timer_stopping_ || op->deadline <= now) {
          expired.push_back(op);
          continue;
        }
        if (i < taken_) ++taken;
        held_[kept++] = op;
      }
      held_.resize(kept);
      taken_ = taken;
      if (!refused.empty() || !expired.empty()) {
        lock.unlock();
        fail(refused, BackendError(BackendErrorCause::timeout, "queue full: max_in_flight calls queued"));
        fail(expired, timer_stopping_ ? destroyed()
                                      : BackendError(BackendErrorCause::timeout,
                                                     "deadline passed while no server was known for the call"));
        lock.lock();
        continue;
      }
      if (timer_stopping_) return;
      auto next = std::chrono::steady_clock::time_point::max();
      for (const PipelineOp* op : held_) next = std::min(next, op->deadline);
      timer_cv_->wait_until(lock, next);
    }
  }

  const std::size_t max_in_flight_;
  const detail::ForkCheck fork_;
  const Task task_;
  const Place place_;
  std::mutex mutex_;
  std::unique_ptr<std::condition_variable> task_cv_ = std::make_unique<std::condition_variable>();
  std::unique_ptr<std::condition_variable> timer_cv_ = std::make_unique<std::condition_variable>();
  std::unique_ptr<std::condition_variable> ended_cv_ = std::make_unique<std::condition_variable>();
  std::vector<PipelineOp*> held_;
  std::size_t taken_ = 0;  // the first ones of `held_`, there when the running task started
  std::vector<PipelineOp*> refused_ops_;
  bool stopping_ = false;        // the task thread ends
  bool timer_stopping_ = false;  // then the timer thread, failing what is held
  bool asked_ = false;
  bool wanted_ = false;  // calls are held for the next run
  std::uint64_t started_ = 0;
  std::uint64_t ended_ = 0;
  std::thread task_thread_;
  std::thread timer_thread_;
  std::atomic<std::uint64_t> refused_{0};
};

namespace detail {

/// A call's stand-in on a server's pipeline: carries its command and deadline and hands the outcome back once,
/// with the route as the call's sink (re-sends come back through the route). Made with `new`; deletes itself.
class Relay : public PipelineOp {
 public:
  Relay(Route& route, PipelineOp& call) noexcept : route_(route), call_(call) {
    command.swap(call.command);
    deadline = call.deadline;
  }

 protected:
  virtual ~Relay() = default;
  [[nodiscard]] const PipelineOp& call() const noexcept { return call_; }
  void hand_back(Reply reply, std::optional<BackendError> error) noexcept {
    PipelineOp& call = call_;
    call.command.swap(command);
    PipelineOpAccess::set_sink(call, &route_);
    delete this;
    call.complete(std::move(reply), std::move(error));
  }

 private:
  Route& route_;
  PipelineOp& call_;
};

}  // namespace detail

}  // namespace engine
using engine::Route;
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
