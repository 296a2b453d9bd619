#pragma once

/// @file
/// `FairAcquirer`: `acquire` that serves the waiters of one key in arrival order, for any limiter
/// (include/ratelimit/README.md "Shaping").

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "ratelimit/acquire.hpp"
#include "ratelimit/clock.hpp"
#include "ratelimit/decision.hpp"
#include "ratelimit/jitter.hpp"
#include "ratelimit/limiter.hpp"

namespace ratelimit {

/// Waits until `limiter` admits a request, serving the waiters of one key in the order they arrived
/// (FIFO within the process; include/ratelimit/README.md "Shaping").
///
/// Per key, a queue of waiters: only its head checks the limiter (`allow`) and sleeps the denial's
/// `retry_after`; the next waiter starts when the head leaves (admitted, or given up), woken alone (no
/// thundering herd: one check per wait, one waiter woken per departure). Admission is the limiter's
/// alone, so no more pass than it admits. A waiter whose `max_wait` passes while others are ahead of it
/// leaves the queue without checking (with a clock that is not real time, e.g. `ManualClock`, it notices
/// when it reaches the head). Memory: one entry per key that has waiters, removed with its last waiter.
///
/// A `ReservingLimiter` needs no queue: each call books a slot with `reserve`, as `acquire` does, and
/// the order of booking is the order of arrival.
///
/// Thread-safe: any number of threads may call `acquire` at once. The limiter must outlive it; other
/// callers of the same limiter (not through this object) are not queued.
/// @tparam L a `Limiter` (any policy, layered or of your own).
/// @tparam C a `Clock` measuring `max_wait`: `std::chrono::steady_clock` by default, `ManualClock` in tests.
/// Example:
///   ratelimit::MemoryLimiter<ratelimit::FixedWindow> outgoing({.limit = 100, .window = std::chrono::minutes(1)});
///   ratelimit::FairAcquirer fair(outgoing);  // shared by the threads calling the partner API
///   if (fair.acquire("partner-api", 1, std::chrono::seconds(5))) { /* call it */ }
template <Limiter L, Clock C = std::chrono::steady_clock>
class FairAcquirer {
 public:
  /// Queues the waiters of `limiter` (kept by reference); `clock` measures `max_wait`.
  explicit FairAcquirer(L& limiter, C clock = {}) : limiter_(limiter), clock_(clock) {}
  FairAcquirer(const FairAcquirer&) = delete;
  FairAcquirer& operator=(const FairAcquirer&) = delete;

  /// Waits in `key`'s queue, then as its head until the limiter admits `cost` units or the next wait
  /// would end past `max_wait` after the call. Returns the admitting decision or the last denial (a
  /// waiter that gave up before reaching the head gets `peek(key)`'s numbers, not admitted).
  /// `wait(delay)` sleeps (inject one that advances a `ManualClock` in tests). Thread-safe.
  /// @throws `std::invalid_argument` naming `max_wait` when it is negative, and what the limiter throws
  ///         (the waiter leaves the queue first).
  template <AcquireWaiter W = SleepWaiter>
  Decision acquire(std::string_view key, std::int64_t cost, std::chrono::nanoseconds max_wait, W&& wait = {}) {
    return acquire_with(key, cost, max_wait, nullptr, wait);
  }

  /// `acquire` that adds a random extra wait from `jitter` to each of the head's waits, within `max_wait`
  /// (include/ratelimit/README.md "Shaping"). Thread-safe.
  template <AcquireWaiter W = SleepWaiter>
  Decision acquire(std::string_view key, std::int64_t cost, std::chrono::nanoseconds max_wait, Jitter& jitter,
                   W&& wait = {}) {
    return acquire_with(key, cost, max_wait, &jitter, wait);
  }

  /// How many callers wait for `key` now, the head included (0 for a key nobody waits for). Thread-safe.
  [[nodiscard]] std::size_t waiting(std::string_view key) const {
    std::lock_guard lock(mutex_);
    const auto it = queues_.find(key);
    return it == queues_.end() ? 0 : it->second.size();
  }

  /// How many keys have waiters now (the entries held in memory). Thread-safe.
  [[nodiscard]] std::size_t keys() const {
    std::lock_guard lock(mutex_);
    return queues_.size();
  }

 private:
  /// One caller in a key's queue; lives on the caller's stack.
  struct Ticket {
    std::condition_variable turn;  // notified when it becomes the head
    bool head = false;
  };
  using Queue = std::list<Ticket*>;
  static constexpr std::int64_t kHourNs = 3'600'000'000'000;
  using Queues = std::map<std::string, Queue, std::less<>>;

  template <AcquireWaiter W>
  Decision acquire_with(std::string_view key, std::int64_t cost, std::chrono::nanoseconds max_wait, Jitter* jitter,
                        W& wait) {
    if constexpr (ReservingLimiter<L>) {
      return detail::acquire(limiter_, key, cost, max_wait, jitter, wait, clock_);
    } else {
      if (max_wait < std::chrono::nanoseconds::zero()) detail::invalid("max_wait", "must be >= 0");
      const std::int64_t deadline_ns = detail::saturating_add(detail::now_ns(clock_), max_wait.count());
      Ticket ticket;
      const std::optional<typename Queues::iterator> queue = enter(key, ticket, deadline_ns);
      if (!queue) {
        Decision d = limiter_.peek(key);
        d.allowed = false;
        return d;
      }
      struct Leave {
        FairAcquirer& self;
        typename Queues::iterator queue;
        ~Leave() { self.leave(queue); }
      } leave_on_exit{*this, *queue};
      return detail::acquire_by_retrying(limiter_, key, cost, deadline_ns, jitter, wait, clock_);
    }
  }

  /// Joins `key`'s queue and blocks until `ticket` is its head; nothing when the deadline passed first (the
  /// ticket has left the queue). A clock that throws leaves the queue as it was.
  std::optional<typename Queues::iterator> enter(std::string_view key, Ticket& ticket, std::int64_t deadline_ns) {
    std::unique_lock lock(mutex_);
    auto queue = queues_.find(key);
    if (queue == queues_.end()) queue = queues_.emplace(std::string(key), Queue{}).first;
    try {
      queue->second.push_back(&ticket);
    } catch (...) {
      if (queue->second.empty()) queues_.erase(queue);
      throw;
    }
    const auto mine = std::prev(queue->second.end());
    if (queue->second.size() == 1) {
      ticket.head = true;  // nobody ahead: check at once, even with max_wait 0
      return queue;
    }
    try {
      for (;;) {
        const std::int64_t left_ns = detail::saturating_sub(deadline_ns, detail::now_ns(clock_));
        if (left_ns <= 0) break;
        if (ticket.head) return queue;
        // At most an hour per wait: a far deadline added to the system's clock must not overflow.
        ticket.turn.wait_for(lock, std::chrono::nanoseconds(left_ns < kHourNs ? left_ns : kHourNs));
      }
    } catch (...) {
      give_up_locked(queue, mine, ticket);
      throw;
    }
    give_up_locked(queue, mine, ticket);
    return std::nullopt;
  }

  /// `ticket` leaves `queue` before its turn was used.
  void give_up_locked(typename Queues::iterator queue, typename Queue::iterator mine, const Ticket& ticket) noexcept {
    if (ticket.head) {
      leave_locked(queue);  // the next waiter's turn
    } else {
      queue->second.erase(mine);  // not the head: the queue keeps its head, nobody to wake
    }
  }

  /// The head leaves `queue`: the next waiter becomes the head, or the key's entry goes.
  void leave(typename Queues::iterator queue) noexcept {
    std::lock_guard lock(mutex_);
    leave_locked(queue);
  }

  void leave_locked(typename Queues::iterator queue) noexcept {
    queue->second.pop_front();
    if (queue->second.empty()) {
      queues_.erase(queue);
      return;
    }
    Ticket* next = queue->second.front();
    next->head = true;
    next->turn.notify_one();
  }

  L& limiter_;
  C clock_;
  mutable std::mutex mutex_;  // queues_ and every ticket's `head`
  Queues queues_;
};

}  // namespace ratelimit
