#pragma once

/// @file
/// `Pipeline`: one Redis connection shared by every caller (automatic pipelining, flat combining:
/// include/ratelimit/redis/README.md "Redis engine").

#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/engine/circuit_breaker.hpp"
#include "ratelimit/redis/engine/connection.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/redis/engine/reply.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace engine {

class PipelineOp;
class Pipeline;
struct RouteCall;
namespace detail {
struct Waiter;
}  // namespace detail

/// Where an async call goes: a `Pipeline`, or a route's fallback. Implementations are thread-safe.
class AsyncSink {
 public:
  /// Starts `op`; never blocks. `op.complete` is called exactly once, on the sink's I/O thread (also when
  /// the call is refused). Throws `std::logic_error` in a process forked after the sink was made.
  virtual void submit(PipelineOp& op) = 0;

 protected:
  ~AsyncSink() = default;
};

/// One command of an async call, completed exactly once by the sink it was submitted to.
class PipelineOp {
 public:
  /// The command in RESP (`append_resp`): exactly one reply is expected.
  std::string command;
  /// The arguments and their key's slot, for sinks that send through a `Route` (e.g. Redis Cluster).
  std::vector<std::string> args;
  std::uint16_t slot = 0;
  /// Past it the call fails (cause timeout): unsent, it never goes; written, its late reply is discarded.
  std::chrono::steady_clock::time_point deadline{};
  /// Sent right after an `ASKING` (Redis Cluster's ASK redirection), whose reply is discarded.
  bool asking = false;

  PipelineOp() = default;
  PipelineOp(const PipelineOp&) = delete;
  PipelineOp& operator=(const PipelineOp&) = delete;

  /// The reply (maybe an error reply) or the error, once per submission on the sink's I/O thread; may
  /// submit the op again (e.g. `EVAL` after `NOSCRIPT`) or delete it.
  virtual void complete(Reply reply, std::optional<BackendError> error) noexcept = 0;

 protected:
  ~PipelineOp() = default;
  /// The sink of the last submission (for a re-send from `complete`).
  [[nodiscard]] AsyncSink* sink() const noexcept { return sink_; }

 private:
  friend class Pipeline;
  friend struct PipelineOpAccess;
  detail::Waiter* waiter_ = nullptr;  // sync calls: their caller, and `out_` gets the outcome
  RouteCall* out_ = nullptr;
  AsyncSink* sink_ = nullptr;
  Reply reply_;  // async calls: the outcome until `complete` runs, and the breaker's ticket
  std::optional<BackendError> error_;
  std::optional<CircuitBreaker<>::Ticket> ticket_;
};

/// One single-key command for `Route::execute`, and its outcome.
struct RouteCall {
  /// The slot of the command's key (`detail::key_slot`); a single server ignores it.
  std::uint16_t slot = 0;
  /// The key when calls on one key must run in request order (empty: no such constraint): a cluster sends
  /// the calls of one `execute` on one key one at a time. Must outlive `execute`.
  std::string_view key;
  /// The command and its arguments; they must outlive `execute`.
  std::vector<std::string_view> args;
  /// Kept by every step that sends the call (a reload after `NOSCRIPT`, a redirection); a send also ends
  /// by its pipeline's `command_timeout`.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  /// Out: the final reply (never a redirection; may be another error reply), unless `error` is set.
  Reply reply;
  /// Out: why the call got no reply. A command that failed once sent may have run: never re-sent.
  std::optional<BackendError> error;
  /// Out: whether the command was written (a call that failed unsent may go elsewhere).
  bool sent = false;
  /// Sent right after an `ASKING` (Redis Cluster's ASK redirection), whose reply is discarded.
  bool asking = false;
};

/// Internal access for sinks other than `Pipeline`.
struct PipelineOpAccess {
  static void set_sink(PipelineOp& op, AsyncSink* s) noexcept { op.sink_ = s; }
};

namespace detail {

/// A sync caller waiting for its calls. It waits on `state` without taking the pipeline's lock. kDrive: handed
/// the connection (stored under the lock); kDone: every call has its outcome (stored after the lock is
/// released, the finishing thread's last touch of the waiter); kParked: asleep in the kernel (a futex), so the
/// poster must wake it.
struct Waiter {
  static constexpr std::uint32_t kWaiting = 0, kDrive = 1, kDone = 2, kParked = 3;
  std::atomic<std::uint32_t> state{kWaiting};
  std::chrono::steady_clock::time_point deadline{};
  std::size_t remaining = 0;  // the rest under the pipeline's lock
  bool drive = false;         // handed the connection: this caller does the I/O next
  bool may_drive = true;      // it waits in `Pipeline::wait`, so it may be handed the connection
};
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
              std::atomic<std::uint32_t>::is_always_lock_free);

inline timespec to_timespec(std::chrono::nanoseconds d) noexcept {
  return {static_cast<time_t>(d.count() / 1'000'000'000), static_cast<long>(d.count() % 1'000'000'000)};
}

/// Stores `value` into `w.state`, waking its thread when it is parked. `w` may be gone after the exchange: the
/// wake uses the address only (a stale wake is spurious to whatever sleeps there; all re-check).
inline void post(Waiter& w, std::uint32_t value) noexcept {
  std::atomic<std::uint32_t>* const a = &w.state;
  if (a->exchange(value, std::memory_order_acq_rel) != Waiter::kParked) return;  // not asleep: no system call
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(a), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

/// Times a waiter gives its CPU away (`sched_yield`) before it parks. When other threads wait for a core (the
/// caller driving the connection among them) that runs them first, and a waiter answered meanwhile needs no
/// wake-up across CPUs; on an idle core each yield returns at once. include/ratelimit/redis/README.md "Redis
/// engine" has the numbers.
inline constexpr int kYieldsBeforePark = 8;

/// Waits while `w.state` is `kWaiting`, until `deadline` (null: none): yields, then parks. Returns the state
/// (`kWaiting`: timed out).
inline std::uint32_t await_post(Waiter& w, const std::chrono::steady_clock::time_point* deadline) noexcept {
  for (int i = 0; i < kYieldsBeforePark; ++i) {
    const std::uint32_t s = w.state.load(std::memory_order_acquire);
    if (s != Waiter::kWaiting) return s;
    if (deadline != nullptr && std::chrono::steady_clock::now() >= *deadline) break;  // a yield may last a slice
    ::sched_yield();
  }
  std::uint32_t s = Waiter::kWaiting;
  if (!w.state.compare_exchange_strong(s, Waiter::kParked, std::memory_order_acq_rel)) return s;
  // steady_clock is CLOCK_MONOTONIC, the bitset wait's clock.
  const timespec ts = deadline != nullptr ? to_timespec(deadline->time_since_epoch()) : timespec{};
  for (;;) {
    const long r = ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&w.state), FUTEX_WAIT_BITSET_PRIVATE,
                             Waiter::kParked, deadline != nullptr ? &ts : nullptr, nullptr, FUTEX_BITSET_MATCH_ANY);
    if (r != 0 && errno == ETIMEDOUT) {
      s = Waiter::kParked;  // unpark, unless a post came first: then `s` is what it stored
      return w.state.compare_exchange_strong(s, Waiter::kWaiting, std::memory_order_acq_rel) ? Waiter::kWaiting : s;
    }
    s = w.state.load(std::memory_order_acquire);
    if (s != Waiter::kParked) return s;
  }
}

/// A sync caller's calls on one pipeline from `Pipeline::start` to the end of `Pipeline::wait`; the pipeline
/// points into it meanwhile, so it does not move and its destruction waits.
struct SyncCalls {
  struct Op final : PipelineOp {
    void complete(Reply, std::optional<BackendError>) noexcept override {}
  };
  SyncCalls() = default;
  SyncCalls(const SyncCalls&) = delete;
  SyncCalls& operator=(const SyncCalls&) = delete;
  inline ~SyncCalls();

  Pipeline* pipeline = nullptr;  // set while calls are queued or unanswered
  std::unique_ptr<Op[]> ops;
  Waiter waiter;
};

/// Bumped in a child after fork(): what was made before refuses use (its connections and threads are the parent's).
inline std::atomic<unsigned>& fork_generation() noexcept {
  static std::atomic<unsigned> generation{0};
  static const int registered =
      pthread_atfork(nullptr, nullptr, [] { fork_generation().fetch_add(1, std::memory_order_relaxed); });
  (void)registered;
  return generation;
}

/// Remembers the process it was made in (`fork_generation`).
class ForkCheck {
 public:
  [[nodiscard]] bool forked() const noexcept {
    return fork_generation().load(std::memory_order_relaxed) != generation_;
  }
  /// Throws `std::logic_error` in such a child.
  void check() const {
    if (forked()) {
      throw std::logic_error(
          "ratelimit: a Redis limiter, pool or route made before fork() is used in the child; make a new one in "
          "the child (include/ratelimit/redis/README.md \"Redis engine\", fork)");
    }
  }

 private:
  unsigned generation_ = fork_generation().load(std::memory_order_relaxed);
};

/// True on a thread that runs async completions: a blocking call there would wait for itself.
inline bool& on_io_thread() noexcept {
  thread_local bool on = false;
  return on;
}

/// Marks this thread as running async completions while it lives (for a route's worker thread).
class CompletionScope {
 public:
  CompletionScope() noexcept : was_(std::exchange(on_io_thread(), true)) {}
  ~CompletionScope() { on_io_thread() = was_; }
  CompletionScope(const CompletionScope&) = delete;
  CompletionScope& operator=(const CompletionScope&) = delete;

 private:
  bool was_;
};

}  // namespace detail

/// One connection to one Redis server shared by every caller (include/ratelimit/redis/README.md "Redis
/// engine"): what is queued when the connection is free goes out in one write. A sync caller that finds it
/// idle does the I/O itself and hands it on when its replies came; else the I/O thread drives, running async
/// completions in reply order. A write or read failure, or no byte for `command_timeout` while replies are
/// due, fails the calls written (never re-sent); queued ones go on a new connection. Beyond `max_in_flight`
/// commands outstanding a call fails at once (cause timeout, "queue full"). Destruction fails every call left
/// (cause io) and runs its completion. Thread-safe; throws `std::logic_error` in a child after fork.
class Pipeline final : public AsyncSink {
 public:
  /// Opens a connection (throws `BackendError`), on a thread of its own.
  using Opener = std::function<std::unique_ptr<Connection>()>;
  /// Called when a broken connection is dropped.
  using DropCounter = std::function<void()>;

  /// `command_timeout` (> 0) bounds each call and the wait for a due reply; `max_in_flight` >= 1. Connects nothing.
  Pipeline(Opener open, DropCounter dropped, std::chrono::milliseconds command_timeout, std::size_t max_in_flight)
      : open_(std::move(open)),
        dropped_(std::move(dropped)),
        command_timeout_(command_timeout),
        max_in_flight_(max_in_flight) {}

  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  ~Pipeline() {
    if (fork_.forked()) {
      // A child's copy: the parent's threads do not exist here, and a condition variable counting one of
      // them would wait forever when destroyed. Leave everything (the fds close at exit).
      (void)conn_.release();
      (void)io_cv_.release();
      (void)connect_cv_.release();
      if (io_.joinable()) new std::thread(std::move(io_));  // never joined nor destroyed: it does not exist
      if (connector_.joinable()) new std::thread(std::move(connector_));
      return;
    }
    {
      std::unique_lock lock(mutex_);
      stopping_ = true;
      if (!driving_) fail_all(closed());
      wake_io();
      unlock_posting(lock);
    }
    if (io_.joinable()) io_.join();
    if (connector_.joinable()) connector_.join();  // a connect ends by connect_timeout
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }

  /// Queues `calls` into `batch` without waiting (one caller may have calls on several pipelines); `wait`
  /// (or `batch`'s destruction) blocks until each has its `reply` or `error`. `drive`: this caller may do the
  /// I/O once it waits; false hands an idle connection to the I/O thread. Returns false when the calls were
  /// refused, never queued (empty, `max_in_flight` outstanding, shutting down): each has that error. Never
  /// throws `BackendError`; throws `std::logic_error` from an async completion or in a forked child.
  bool start(std::span<RouteCall> calls, detail::SyncCalls& batch, bool drive = true) {
    if (calls.empty()) return false;
    if (detail::on_io_thread()) {
      throw std::logic_error("ratelimit: a blocking Redis call from an async completion (use the async API there)");
    }
    fork_.check();
    auto deadline = std::chrono::steady_clock::now() + command_timeout_;
    for (const RouteCall& c : calls) deadline = std::min(deadline, c.deadline);  // the caller's, when earlier
    batch.waiter.deadline = deadline;
    batch.ops = std::make_unique<detail::SyncCalls::Op[]>(calls.size());
    for (std::size_t i = 0; i < calls.size(); ++i) {
      batch.ops[i].deadline = deadline;
      batch.ops[i].asking = calls[i].asking;
      calls[i].sent = false;
      batch.ops[i].out_ = &calls[i];
      batch.ops[i].waiter_ = &batch.waiter;
      append_resp(batch.ops[i].command, std::span<const std::string_view>(calls[i].args));  // outside the lock
    }
    const std::lock_guard lock(mutex_);
    if (full()) {
      const BackendError e = refuse();
      for (RouteCall& c : calls) {
        c.reply.reset();
        c.error = e;
      }
      return false;
    }
    batch.pipeline = this;
    batch.waiter.remaining = calls.size();
    batch.waiter.may_drive = drive;
    for (std::size_t i = 0; i < calls.size(); ++i) queued_.push_back(&batch.ops[i]);
    update_load();
    if (!driving_ && drive) {
      driving_ = true;
      batch.waiter.drive = true;
    } else if (!driving_) {
      drive_on_io_thread();
    }
    return true;
  }

  /// Waits until every call `start` queued in `batch` has its outcome, driving the connection when handed it;
  /// at the deadline the calls left fail (timeout) and are withdrawn.
  void wait(detail::SyncCalls& batch) {
    detail::Waiter& waiter = batch.waiter;
    std::unique_lock lock(mutex_);
    waiter.may_drive = true;
    bool timed_out = false;
    for (;;) {  // lock held
      if (waiter.drive) {
        waiter.drive = false;
        waiter.state.store(detail::Waiter::kWaiting, std::memory_order_relaxed);
        drive(lock, &waiter);
        continue;
      }
      if (timed_out && waiter.remaining > 0)
        time_out([&](const PipelineOp& op) { return op.waiter_ == &waiter; }, nullptr);
      const bool finished = waiter.remaining == 0;  // only its post is due (or done)
      unlock_posting(lock);
      const std::uint32_t s = detail::await_post(waiter, finished ? nullptr : &waiter.deadline);
      if (s == detail::Waiter::kDone) {
        batch.pipeline = nullptr;
        return;
      }
      timed_out = s == detail::Waiter::kWaiting;
      lock.lock();
    }
  }

  /// Starts `op` (`command` and `deadline` set), as `AsyncSink::submit` says.
  void submit(PipelineOp& op) override {
    fork_.check();
    op.sink_ = this;
    op.waiter_ = nullptr;
    const std::lock_guard lock(mutex_);
    start_io_thread();  // a sync driver hands async outcomes to it
    if (full()) return complete_unsent(op, refuse());
    queued_.push_back(&op);
    update_load();
    if (!driving_) {
      drive_on_io_thread();
    } else if (op.deadline < io_wakes_at_) {
      wake_io();  // the I/O thread, waiting or polling for replies, takes up this nearer deadline
    } else if (connecting_) {
      connect_cv_->notify_all();  // the driver waiting for the connect takes up this call's deadline
    }
  }

  /// As `submit`; the outcome settles `ticket` before the completion runs (include/ratelimit/redis/README.md
  /// "Circuit breaker").
  void submit(PipelineOp& op, CircuitBreaker<>::Ticket ticket) {
    op.ticket_.emplace(std::move(ticket));
    submit(op);
  }

  /// Completes `op` with `error` on the I/O thread, unsent (e.g. refused by the breaker). Throws as `submit`.
  void reject(PipelineOp& op, BackendError error) {
    fork_.check();
    op.sink_ = this;
    op.waiter_ = nullptr;
    const std::lock_guard lock(mutex_);
    complete_unsent(op, std::move(error));
  }

  /// Commands queued or awaiting a reply (a snapshot, for the pool's choice of connection).
  [[nodiscard]] std::size_t load() const noexcept { return load_.load(std::memory_order_relaxed); }
  /// Submissions refused because `max_in_flight` commands were outstanding.
  [[nodiscard]] std::uint64_t refused() const noexcept { return refused_.load(std::memory_order_relaxed); }
  /// Writes to the socket so far (each carries every command then queued).
  [[nodiscard]] std::uint64_t writes() const noexcept { return writes_.load(std::memory_order_relaxed); }

 private:
  static BackendError closed() { return {BackendErrorCause::io, "connection closed: the limiter was destroyed"}; }
  // Lock held. True when a new call must be refused (`refuse`).
  [[nodiscard]] bool full() const noexcept { return stopping_ || queued_.size() + inflight_.size() >= max_in_flight_; }
  // Lock held. The error of a call refused unsent; a full queue is counted.
  [[nodiscard]] BackendError refuse() {
    if (stopping_) return closed();
    refused_.fetch_add(1, std::memory_order_relaxed);
    return BackendError(BackendErrorCause::timeout, "queue full: max_in_flight commands outstanding");
  }
  // Lock held. Completes async `op` with `error` on the I/O thread, never sent (no breaker verdict).
  void complete_unsent(PipelineOp& op, BackendError error) {
    start_io_thread();
    op.ticket_.reset();
    op.error_ = std::move(error);
    completions_.push_back(&op);
    wake_io();
  }
  void update_load() noexcept { load_.store(queued_.size() + inflight_.size(), std::memory_order_relaxed); }

  // Lock held. Starts the I/O thread once (async calls need it).
  void start_io_thread() {
    if (io_.joinable()) return;
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    io_ = std::thread([this] { io_main(); });
  }
  // Lock held.
  void wake_io() {
    io_cv_->notify_one();
    if (connecting_) connect_cv_->notify_all();  // e.g. completions for an I/O thread waiting for a connect
    if (wake_fd_ >= 0) {
      const std::uint64_t one = 1;
      [[maybe_unused]] const auto n = ::write(wake_fd_, &one, sizeof one);
    }
  }

  // What an outcome tells the server's breaker (async calls with a ticket only).
  enum class Verdict { none, succeeded, failed };

  // Lock held. Records `op`'s outcome: a sync caller's goes straight to it (woken by `unlock_posting`); an
  // async one settles its ticket with `verdict` and runs on the I/O thread (`ready`: this is the I/O thread).
  void finish(PipelineOp* op, Reply reply, std::optional<BackendError> error, std::vector<PipelineOp*>* ready,
              Verdict verdict = Verdict::none) {
    if (error) error.emplace(error->unshared());  // one error often fails many calls, read on many threads
    if (op->ticket_) {
      if (verdict == Verdict::succeeded) op->ticket_->succeeded();
      if (verdict == Verdict::failed) op->ticket_->failed();
      op->ticket_.reset();
    }
    if (op->waiter_ != nullptr) {
      op->out_->reply = std::move(reply);
      op->out_->error = std::move(error);
      if (--op->waiter_->remaining == 0) posts_.push_back(op->waiter_);
      return;
    }
    op->reply_ = std::move(reply);
    op->error_ = std::move(error);
    if (ready != nullptr) {
      ready->push_back(op);
    } else {
      completions_.push_back(op);
      wake_io();
    }
  }

  // Releases the lock, then wakes the sync callers finished meanwhile (woken under the lock, they would wait for it).
  void unlock_posting(std::unique_lock<std::mutex>& lock) {
    if (posts_.empty()) {
      lock.unlock();
      return;
    }
    thread_local std::vector<detail::Waiter*> batch;
    batch.swap(posts_);
    lock.unlock();
    for (detail::Waiter* w : batch) detail::post(*w, detail::Waiter::kDone);
    batch.clear();
  }

  // Lock held. Fails every queued (never sent) and unanswered call with `e`.
  void fail_all(const BackendError& e, std::vector<PipelineOp*>* ready = nullptr) {
    for (PipelineOp* op : inflight_) {
      if (op != nullptr) finish(op, nullptr, e, ready);
    }
    inflight_.clear();
    for (PipelineOp* op : queued_) finish(op, nullptr, e, ready);
    queued_.clear();
    update_load();
  }

  // Lock held. Unanswered calls fail (they may have run); queued ones wait for a new connection.
  void break_connection(const BackendError& e, std::vector<PipelineOp*>* ready) {
    for (PipelineOp* op : inflight_) {
      if (op != nullptr) finish(op, nullptr, e, ready, Verdict::failed);
    }
    inflight_.clear();
    update_load();
    if (conn_) {
      conn_.reset();
      if (dropped_) dropped_();
    }
  }

  // Lock held. The calls `due` picks fail (timeout): queued ones unsent, written ones leave a hole in `inflight_`.
  template <class Due>
  void time_out(Due due, std::vector<PipelineOp*>* ready) {
    // Unsent behind replies that did not come, or behind a connect that did not end: the server's fault.
    const Verdict unsent = inflight_.empty() && !connecting_ ? Verdict::none : Verdict::failed;
    std::erase_if(queued_, [&](PipelineOp* op) {
      if (!due(*op)) return false;
      finish(op, nullptr, BackendError(BackendErrorCause::timeout, "deadline passed before the call was sent"), ready,
             unsent);
      return true;
    });
    for (PipelineOp*& op : inflight_) {
      if (op != nullptr && due(*op)) {
        finish(std::exchange(op, nullptr), nullptr,
               BackendError(BackendErrorCause::timeout, "no reply before the call's deadline"), ready, Verdict::failed);
      }
    }
    update_load();
  }

  // Lock held; this thread holds the driver role. `self`: the sync caller driving (it stops once its calls are
  // answered), or null for the I/O thread (it stops when idle).
  void drive(std::unique_lock<std::mutex>& lock, detail::Waiter* self) {
    std::vector<PipelineOp*> ready;  // I/O thread: completions to run outside the lock
    std::vector<PipelineOp*>* const ready_ptr = self == nullptr ? &ready : nullptr;
    for (;;) {
      if (stopping_) {
        fail_all(closed(), ready_ptr);
        if (ready.empty()) break;
      }
      const auto now = std::chrono::steady_clock::now();
      time_out([now](const PipelineOp& op) { return op.deadline <= now; }, ready_ptr);
      if (self == nullptr && !completions_.empty()) {  // e.g. refused calls: answered now, not after this drive
        ready.insert(ready.end(), completions_.begin(), completions_.end());
        completions_.clear();
      }
      if (!ready.empty()) {
        run_outside_lock(lock, ready);
        continue;
      }
      if (!queued_.empty()) {
        if (!conn_) {
          // A caller whose calls ended leaves the connect to the I/O thread (a waiter handed the connection
          // now could see the connect fail its calls first, and leave with the role).
          if (self != nullptr && self->remaining == 0) return drive_on_io_thread();
          await_connect(lock, self);
          continue;  // connected or not, calls may have expired or joined meanwhile
        }
        if (!write_queued(lock, ready_ptr)) continue;
      }
      if (self != nullptr && self->remaining == 0) break;
      if (inflight_.empty()) {
        if (queued_.empty()) break;
        continue;
      }
      read_due(lock, self, ready_ptr);
    }
    hand_off(self);
  }

  // Lock held (released for the write). Writes every queued call at once; false when the write failed.
  bool write_queued(std::unique_lock<std::mutex>& lock, std::vector<PipelineOp*>* ready) {
    out_.clear();
    if (inflight_.empty()) last_progress_ = std::chrono::steady_clock::now();
    for (PipelineOp* op : queued_) {
      if (op->asking) {
        out_ += "*1\r\n$6\r\nASKING\r\n";
        inflight_.push_back(nullptr);  // a hole: its reply is discarded
      }
      out_ += op->command;
      inflight_.push_back(op);
      if (op->out_ != nullptr) op->out_->sent = true;
    }
    queued_.clear();
    Connection* c = conn_.get();
    unlock_posting(lock);  // wakes the callers answered by the last read before writing
    std::optional<BackendError> failed;
    try {
      c->write_raw(out_);
    } catch (const BackendError& e) {
      failed = e;
    }
    writes_.fetch_add(1, std::memory_order_relaxed);
    lock.lock();
    if (failed) break_connection(*failed, ready);
    return !failed;
  }

  // Lock held (released for the read). Reads and hands out the replies: the I/O thread waits in poll (deadlines,
  // destruction wake it); a sync caller in recv (timeout command_timeout), or in poll when its deadline is sooner.
  void read_due(std::unique_lock<std::mutex>& lock, detail::Waiter* self, std::vector<PipelineOp*>* ready) {
    Connection* c = conn_.get();
    const auto stall_at = last_progress_ + command_timeout_;
    auto wait_until = stall_at;
    bool poll_first = self == nullptr;
    if (self == nullptr) {
      wait_until = std::min(wait_until, nearest_deadline(true));
    } else if (self->deadline < std::chrono::steady_clock::now() + command_timeout_ - kReadSlack) {
      poll_first = true;
      wait_until = std::min(wait_until, self->deadline);
    }
    if (self == nullptr) io_wakes_at_ = wait_until;
    unlock_posting(lock);
    std::optional<BackendError> failed;
    try {
      if (!poll_first || wait_readable(*c, wait_until, self == nullptr)) {
        c->read_some();
        while (Reply r = c->next_buffered_reply()) replies_.push_back(std::move(r));
      }
    } catch (const BackendError& e) {
      failed = e;
    }
    lock.lock();
    io_wakes_at_ = {};
    const auto now = std::chrono::steady_clock::now();
    if (failed) {
      replies_.clear();
      return break_connection(*failed, ready);
    }
    if (!replies_.empty()) last_progress_ = now;
    hand_out_replies(ready);
    if (!inflight_.empty() && now >= stall_at && last_progress_ + command_timeout_ <= now) {
      break_connection(BackendError(BackendErrorCause::timeout, "no reply within command_timeout"), ready);
    }
  }

  // Lock held. Matches the replies read to the calls written, in order.
  void hand_out_replies(std::vector<PipelineOp*>* ready) {
    for (Reply& r : replies_) {
      if (inflight_.empty()) {  // more replies than commands: the stream is out of step
        break_connection(BackendError(BackendErrorCause::protocol, "unexpected reply"), ready);
        break;
      }
      PipelineOp* op = inflight_.front();
      inflight_.pop_front();
      if (op != nullptr) finish(op, std::move(r), std::nullopt, ready, Verdict::succeeded);
    }
    replies_.clear();
    update_load();
  }

  // Lock held. The nearest deadline of the calls queued (and, `inflight`, of those written).
  [[nodiscard]] std::chrono::steady_clock::time_point nearest_deadline(bool inflight) const {
    auto until = std::chrono::steady_clock::time_point::max();
    for (const PipelineOp* op : queued_) until = std::min(until, op->deadline);
    if (inflight) {
      for (const PipelineOp* op : inflight_) {
        if (op != nullptr) until = std::min(until, op->deadline);
      }
    }
    return until;
  }

  // Lock held; no connection. Starts a connect unless one runs, then waits for it until the driver's deadline
  // (`self`'s, or the nearest queued call's).
  void await_connect(std::unique_lock<std::mutex>& lock, detail::Waiter* self) {
    if (!connecting_) start_connect();
    const auto until = self != nullptr ? self->deadline : nearest_deadline(false);
    connect_cv_->wait_until(lock, until,
                            [&] { return !connecting_ || stopping_ || (self == nullptr && !completions_.empty()); });
  }

  // Lock held. Opens the connection on a thread of its own (bounded by connect_timeout); on failure every call
  // still queued fails, unsent.
  void start_connect() {
    if (connector_.joinable()) connector_.join();  // the last connect has ended (connecting_ is false)
    connecting_ = true;
    connector_ = std::thread([this] {
      std::unique_ptr<Connection> c;
      std::optional<BackendError> failed;
      try {
        c = open_();
      } catch (const BackendError& e) {
        failed = e;
      }
      std::unique_lock lock(mutex_);
      connecting_ = false;
      if (failed) {
        for (PipelineOp* op : queued_) finish(op, nullptr, *failed, nullptr, Verdict::failed);
        queued_.clear();
        update_load();
      } else {
        conn_ = std::move(c);
        // Calls queued after every driver left: the I/O thread writes them.
        if (!driving_ && !queued_.empty() && !stopping_) drive_on_io_thread();
      }
      connect_cv_->notify_all();
      unlock_posting(lock);
    });
  }

  // Runs async completions with the lock released (they may submit again).
  void run_outside_lock(std::unique_lock<std::mutex>& lock, std::vector<PipelineOp*>& ready) {
    std::vector<PipelineOp*> batch;
    batch.swap(ready);
    unlock_posting(lock);
    for (PipelineOp* op : batch) {
      Reply r = std::move(op->reply_);
      std::optional<BackendError> e = std::move(op->error_);
      op->error_.reset();
      op->complete(std::move(r), std::move(e));
    }
    lock.lock();
  }

  // Lock held. The driver is done: the oldest waiting sync caller drives next, else the I/O thread if anything
  // is outstanding.
  void hand_off(detail::Waiter* self) {
    if (queued_.empty() && inflight_.empty()) {
      driving_ = false;
      return;
    }
    auto pick = [self](const std::deque<PipelineOp*>& q) -> detail::Waiter* {
      for (PipelineOp* op : q) {
        const detail::Waiter* w = op != nullptr ? op->waiter_ : nullptr;
        if (w != nullptr && w != self && w->remaining > 0 && w->may_drive) return op->waiter_;
      }
      return nullptr;
    };
    detail::Waiter* next = pick(inflight_);
    if (next == nullptr) next = pick(queued_);
    if (next != nullptr) {
      next->drive = true;
      detail::post(*next, detail::Waiter::kDrive);  // under the lock: it cannot finish (nor go) before
      return;
    }
    if (self == nullptr) {
      io_drive_ = true;  // the I/O thread goes on (only async or abandoned replies are due)
    } else {
      drive_on_io_thread();
    }
  }

  // Lock held; the driver role is free or this thread's. The I/O thread takes the connection.
  void drive_on_io_thread() {
    driving_ = true;
    io_drive_ = true;
    start_io_thread();
    wake_io();
  }

  // True when the socket is readable before `until` and (`wakeable`) before the I/O thread is woken.
  bool wait_readable(const Connection& c, std::chrono::steady_clock::time_point until, bool wakeable) {
    const auto left = until - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return false;
    const timespec ts = detail::to_timespec(left);
    pollfd fds[2] = {{c.fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int n = ::ppoll(fds, wakeable && wake_fd_ >= 0 ? 2 : 1, &ts, nullptr);
    if (n > 0 && wake_fd_ >= 0 && (fds[1].revents & POLLIN) != 0) {
      std::uint64_t drained = 0;
      [[maybe_unused]] const auto r = ::read(wake_fd_, &drained, sizeof drained);
    }
    return n > 0 && fds[0].revents != 0;
  }

  void io_main() {
    detail::on_io_thread() = true;
    std::unique_lock lock(mutex_);
    for (;;) {
      if (!completions_.empty()) {
        run_outside_lock(lock, completions_);
        continue;
      }
      if (io_drive_) {
        io_drive_ = false;
        drive(lock, nullptr);
        continue;
      }
      if (!posts_.empty()) {  // the last drive's answered callers
        unlock_posting(lock);
        lock.lock();
        continue;
      }
      if (stopping_ && !driving_) break;
      // A sync caller drives (it blocks in its read or connect): async calls still end by their deadlines.
      const auto due = driving_ ? nearest_async_deadline() : std::chrono::steady_clock::time_point::max();
      io_wakes_at_ = due;
      if (due == std::chrono::steady_clock::time_point::max()) {
        io_cv_->wait(lock);
      } else if (io_cv_->wait_until(lock, due) == std::cv_status::timeout) {
        const auto now = std::chrono::steady_clock::now();
        time_out([now](const PipelineOp& op) { return op.waiter_ == nullptr && op.deadline <= now; }, nullptr);
      }
      io_wakes_at_ = std::chrono::steady_clock::time_point{};  // awake: every submission notifies
    }
  }

  // Lock held. The nearest deadline of the async calls queued or written.
  [[nodiscard]] std::chrono::steady_clock::time_point nearest_async_deadline() const {
    auto until = std::chrono::steady_clock::time_point::max();
    for (const auto* q : {&queued_, &inflight_}) {
      for (const PipelineOp* op : *q) {
        if (op != nullptr && op->waiter_ == nullptr) until = std::min(until, op->deadline);
      }
    }
    return until;
  }

  Opener open_;
  DropCounter dropped_;
  const std::chrono::milliseconds command_timeout_;
  const std::size_t max_in_flight_;
  const detail::ForkCheck fork_;
  // A sync driver whose deadline is nearer than the socket's timeout by more than this polls first.
  static constexpr std::chrono::milliseconds kReadSlack{2};

  std::mutex mutex_;                  // everything below but the atomics and (outside the lock) the driver's connection
  std::deque<PipelineOp*> queued_;    // not yet written
  std::deque<PipelineOp*> inflight_;  // written, replies due in this order (null: abandoned at its deadline)
  std::vector<PipelineOp*> completions_;  // async outcomes for the I/O thread
  std::vector<detail::Waiter*> posts_;    // sync callers finished, woken when the lock is released
  std::string out_;                       // the driver's: the batch it writes
  std::vector<Reply> replies_;            // the driver's: the replies it read
  std::unique_ptr<Connection> conn_;
  std::chrono::steady_clock::time_point last_progress_{};
  bool driving_ = false;  // someone holds the driver role (or it was handed to a waiter / the I/O thread)
  bool io_drive_ = false;
  bool stopping_ = false;
  std::unique_ptr<std::condition_variable> io_cv_ = std::make_unique<std::condition_variable>();
  std::thread io_;
  bool connecting_ = false;  // the connector thread is opening the connection
  std::unique_ptr<std::condition_variable> connect_cv_ = std::make_unique<std::condition_variable>();
  std::thread connector_;
  int wake_fd_ = -1;
  std::chrono::steady_clock::time_point io_wakes_at_{};  // when the I/O thread, waiting or polling, wakes by itself
  std::atomic<std::size_t> load_{0};
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::uint64_t> writes_{0};
};

inline detail::SyncCalls::~SyncCalls() {
  if (pipeline != nullptr) pipeline->wait(*this);
}

}  // namespace engine
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
