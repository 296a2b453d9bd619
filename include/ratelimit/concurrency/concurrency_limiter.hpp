#pragma once

/// @file
/// `ConcurrencyLimiter`: at most `permits` units in flight per key (or an adaptive limit below it), in
/// process, with a bounded wait queue per key (include/ratelimit/concurrency/README.md "Concurrency limits").

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ratelimit/clock.hpp"
#include "ratelimit/concurrency/adaptive_algorithm.hpp"
#include "ratelimit/concurrency/permit.hpp"
#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/detail/entropy.hpp"
#include "ratelimit/detail/siphash.hpp"

namespace ratelimit {

/// Which waiter of a key's queue gets returned units first.
enum class QueueOrder {
  /// FIFO: the longest waiting first; a waiter needing more units than are free holds back the ones
  /// behind it (no overtaking, so large requests are not starved).
  oldest_first,
  /// LIFO: the newest first (fresh requests are served while old ones, whose clients may have given up,
  /// wait); at a full queue the oldest waiters are pushed out (`queue_full`) to make room.
  newest_first,
};

/// Options of `ConcurrencyLimiter`; a plain aggregate.
struct ConcurrencyOptions {
  /// Units in flight per key at most; >= 1. With `adaptive` (not in shadow) the ceiling of the adaptive
  /// limit, and at least its initial limit (set it to the algorithm's `max_limit`, or INT64_MAX).
  std::int64_t permits = 1;
  /// Units that may wait per key at most (a waiter of n units takes n); >= 0. 0: nobody waits.
  std::int64_t queue_limit = 0;
  /// Order in which waiters get returned units.
  QueueOrder queue_order = QueueOrder::oldest_first;
  /// Keys held at once at most (a key is held while it has permits out or waiters queued; an idle key
  /// is forgotten at once); >= 1. A new key beyond it is denied (`key_limit`): busy keys are never evicted.
  std::size_t max_keys = 100'000;
  /// Longest key accepted, in bytes; a longer key throws `std::invalid_argument`. <= 2^31.
  std::size_t max_key_bytes = 512;
  /// Independently locked shards, rounded up to a power of two; 0 picks 16. <= 65536.
  std::size_t shards = 0;
  /// An adaptive limit (include/ratelimit/concurrency/README.md "Adaptive limits in the limiter"): a
  /// prototype, which the limiter `clone()`s (one algorithm per limiter, fed by every key's releases).
  /// The limit in force for each key is then min(`permits`, the algorithm's limit). Null: `permits`.
  std::shared_ptr<const AdaptiveAlgorithm> adaptive{};
  /// With `adaptive`: dry run. The limiter enforces `permits` and only computes the adaptive limit,
  /// which `stats()` and `on_limit_change` report.
  bool adaptive_shadow = false;
  /// Called with (old, new) each time the adaptive limit moves, in order, under the limiter's adaptive
  /// mutex: must be quick, must not throw (what it throws is dropped) and must not release permits of
  /// this limiter. Optional.
  std::function<void(std::int64_t, std::int64_t)> on_limit_change{};
};

/// A snapshot of a `ConcurrencyLimiter`'s counts (`ConcurrencyLimiter::stats()`), for metrics.
struct ConcurrencyStats {
  /// The limit in force per key now: `permits`, or the adaptive limit below it (not in shadow).
  std::int64_t limit = 0;
  /// The adaptive algorithm's limit now (in shadow: the one it would use); 0 without `adaptive`.
  std::int64_t adaptive_limit = 0;
  /// The algorithm's unloaded round-trip time; 0 when it does not know or use one.
  std::chrono::nanoseconds min_rtt{0};
  /// Units in flight, over all keys.
  std::int64_t in_flight = 0;
  /// Units waiting in the queues, over all keys.
  std::int64_t queued = 0;
  /// Acquisitions answered other than `acquired` (busy, queue_full, timed_out, too_many_units, ...).
  std::uint64_t denied = 0;
  /// Permits returned `succeeded` (`Permit::release()`, the destructor, `release(PermitOutcome)`).
  std::uint64_t succeeded = 0;
  /// Permits returned `failed`.
  std::uint64_t failed = 0;
  /// Permits returned `dropped`.
  std::uint64_t dropped = 0;
  /// Permits returned without a sample (`Permit::release_unused`, or an outcome outside the enum).
  std::uint64_t unused = 0;
  /// True when the adaptive limit runs in shadow mode (`ConcurrencyOptions::adaptive_shadow`).
  bool shadow = false;
};

/// What a blocked `ConcurrencyLimiter::acquire` waits on: its own wake-up signal. A wait strategy is
/// called as `strategy(PermitWait&, std::chrono::nanoseconds timeout)` and returns when it likes (early
/// returns are fine: the caller checks its state and its deadline on its clock, and calls again).
class PermitWait {
 public:
  /// Blocks the calling thread until this waiter is answered (granted, pushed out, cancelled) or
  /// `timeout` of real time (steady clock) passed. Thread-safe.
  void wait_for(std::chrono::nanoseconds timeout) {
    // Bounded slices: a deadline far away (or never) must not overflow the condition variable's clock.
    const std::chrono::nanoseconds slice = timeout < std::chrono::hours(1) ? timeout : std::chrono::hours(1);
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, slice, [this] { return signaled_; });
  }
  /// True once this waiter was answered. Thread-safe.
  [[nodiscard]] bool answered() const noexcept { return state_.load(std::memory_order_acquire) != kWaiting; }

 private:
  template <Clock>
  friend class ConcurrencyLimiter;
  static constexpr int kWaiting = 0;
  static constexpr int kGranted = 1;
  static constexpr int kDenied = 2;

  void signal() {
    {
      std::lock_guard lock(mutex_);
      signaled_ = true;
    }
    cv_.notify_one();
  }

  std::atomic<int> state_{kWaiting};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool signaled_ = false;
};

/// The default wait strategy: blocks on the waiter's condition variable (`PermitWait::wait_for`).
/// Tests pass one that moves a `ManualClock` or releases a permit instead.
struct BlockingWait {
  void operator()(PermitWait& wait, std::chrono::nanoseconds timeout) const { wait.wait_for(timeout); }
};

/// At most `permits` units in flight per key (a bulkhead: nginx `limit_conn`, .NET `ConcurrencyLimiter`),
/// in process. Algorithm: per key a count of units held and a queue of waiters; units are taken when
/// they fit (and, oldest-first, nobody waits ahead), and each returned unit goes to the queue in
/// `queue_order`, as many waiters as fit (include/ratelimit/concurrency/README.md "Concurrency limits").
///
/// With `ConcurrencyOptions::adaptive` the limit per key moves: each measured release gives the one
/// algorithm of the limiter a latency sample (its own mutex, never held with a shard's lock); a limit
/// that rises grants the waiters that now fit at once, one that falls revokes nothing (new grants wait
/// until fewer than the limit are in flight).
///
/// Thread-safe: every method may be called from any number of threads; one key's operations are
/// linearizable under its shard's lock. Callbacks and wake-ups run after that lock is released.
/// Memory: a key is held only while it has permits out or waiters queued (idle keys are forgotten at
/// once), at most `max_keys` of them; per waiter one small heap block.
/// The limiter must outlive its permits; destroying it denies queued async waiters (`cancelled`), and
/// must not race with blocked `acquire` calls.
///
/// @tparam C a `Clock` for deadlines: `std::chrono::steady_clock` by default; `ManualClock` in tests
///           (with a wait strategy that moves it).
/// Example:
///   // At most 4 exports running per tenant; up to 8 more may wait their turn.
///   ratelimit::ConcurrencyLimiter<> exports(ratelimit::ConcurrencyOptions{.permits = 4, .queue_limit = 8});
///   ratelimit::PermitResult r = exports.acquire("tenant:acme", 1, std::chrono::seconds(1));
///   if (!r) { /* answer 429 or 503: to_string(r.status) says why */ }
///   /* run the export; r.permit returns the unit when it goes out of scope */
template <Clock C = std::chrono::steady_clock>
class ConcurrencyLimiter final : public PermitSource {
 public:
  using clock_type = C;
  /// The callback of `acquire_async`; called exactly once, must not throw.
  using Callback = std::function<void(PermitResult)>;

  /// Throws `std::invalid_argument` naming the field (`ConcurrencyOptions.permits`, `.queue_limit`,
  /// `.queue_order`, `.max_keys`, `.max_key_bytes`, `.shards`, `.adaptive`, `.adaptive_shadow`) when out
  /// of range, and `ConcurrencyOptions.permits` when below the adaptive algorithm's initial limit
  /// (enforcing: it would be the ceiling).
  explicit ConcurrencyLimiter(ConcurrencyOptions options, C clock = {})
      : options_(validated(options)),
        clock_(std::move(clock)),
        shard_count_(shard_count(options_)),
        shards_(std::make_unique<Shard[]>(shard_count_)),
        algorithm_(options_.adaptive ? options_.adaptive->clone() : nullptr),
        enforce_adaptive_(algorithm_ != nullptr && !options_.adaptive_shadow) {
    if (options_.adaptive && !algorithm_) detail::invalid("ConcurrencyOptions.adaptive", "clone() returned null");
    if (algorithm_) {
      adaptive_limit_.store(std::max<std::int64_t>(1, algorithm_->limit()));
      min_rtt_ns_.store(algorithm_->min_rtt_ns());
      if (enforce_adaptive_ && options_.permits < adaptive_limit_.load()) {
        detail::invalid("ConcurrencyOptions.permits",
                        "the ceiling of an adaptive limit must be >= its initial limit (" +
                            std::to_string(adaptive_limit_.load()) + "), got " + std::to_string(options_.permits));
      }
    }
    detail::fill_with_entropy(hash_key_, 2);
    for (std::size_t i = 0; i < shard_count_; ++i) shards_[i].keys = Map(0, Hash{hash_key_}, Equal{});
  }
  ConcurrencyLimiter(const ConcurrencyLimiter&) = delete;
  ConcurrencyLimiter& operator=(const ConcurrencyLimiter&) = delete;

  /// Answers every queued async waiter `cancelled`.
  ~ConcurrencyLimiter() {
    std::vector<std::shared_ptr<Waiter>> cancelled;
    for (std::size_t s = 0; s < shard_count_; ++s) {
      std::lock_guard lock(shards_[s].mutex);
      for (auto& [key, state] : shards_[s].keys) {
        for (auto& w : state.queue) {
          w->denial = PermitStatus::cancelled;
          w->state_.store(PermitWait::kDenied, std::memory_order_release);
          cancelled.push_back(w);
        }
        state.queue.clear();
      }
    }
    for (auto& w : cancelled) notify(*w);  // now: this limiter goes
  }

  /// Takes `units` for `key` if they fit now, without waiting (oldest-first: only when nobody waits).
  /// Thread-safe. Returns the permit, or `busy` / `too_many_units` / `key_limit` with the key's counts.
  /// Throws `std::invalid_argument` for `units < 1` (`units`) or a key over `max_key_bytes` (`key`).
  /// Example:
  ///   ratelimit::ConcurrencyLimiter<> uploads(ratelimit::ConcurrencyOptions{.permits = 2});
  ///   if (ratelimit::PermitResult r = uploads.try_acquire("user:42")) {
  ///     /* handle the upload while r.permit is held */
  ///   } else {
  ///     /* r.status is busy: two uploads of user:42 run already */
  ///   }
  PermitResult try_acquire(std::string_view key, std::int64_t units = 1) {
    return acquire(key, units, std::chrono::nanoseconds(0));
  }

  /// Takes `units` for `key`, waiting up to `max_wait` (on the limiter's clock) in the key's queue.
  /// Returns at once with the permit when the units fit, with `too_many_units` when they never can,
  /// `busy` when `max_wait` is 0, `queue_full` when the queue cannot take them (oldest-first), or
  /// `key_limit`; otherwise waits until granted (in `queue_order`), pushed out (`queue_full`,
  /// newest-first) or the deadline (`timed_out`). Waiting calls `wait(PermitWait&, remaining)`
  /// repeatedly (`BlockingWait` by default; inject one driving a `ManualClock` in tests). Thread-safe.
  /// Throws `std::invalid_argument` for `units < 1` (`units`), a negative `max_wait` (`max_wait`) or a
  /// key over `max_key_bytes` (`key`); whatever `wait` throws (the waiter leaves the queue first).
  /// Example:
  ///   ratelimit::ConcurrencyLimiter<> db(ratelimit::ConcurrencyOptions{.permits = 10, .queue_limit = 100});
  ///   // A report takes 3 of the 10 connections; wait up to 500 ms in the queue for them.
  ///   ratelimit::PermitResult r = db.acquire("reports", 3, std::chrono::milliseconds(500));
  ///   if (r.status == ratelimit::PermitStatus::timed_out) { /* answer 503 */ }
  ///   r.permit.release();  // done early: give the 3 units back before the permit's scope ends
  template <class Wait = BlockingWait>
  PermitResult acquire(std::string_view key, std::int64_t units, std::chrono::nanoseconds max_wait, Wait&& wait = {}) {
    validate(key, units, max_wait);
    const std::int64_t deadline = detail::saturating_add(now_ns(), max_wait.count());
    std::shared_ptr<Waiter> w;
    PermitResult immediate = enqueue(key, units, max_wait, deadline, nullptr, w);
    if (!w) return immediate;
    try {
      for (;;) {
        if (w->answered()) return answer(*w);
        const std::int64_t now = now_ns();
        if (now >= deadline) {
          withdraw(*w, PermitStatus::timed_out);
          return answer(*w);
        }
        wait(static_cast<PermitWait&>(*w), std::chrono::nanoseconds(deadline - now));
      }
    } catch (...) {
      withdraw(*w, PermitStatus::cancelled);
      if (w->state_.load(std::memory_order_acquire) == PermitWait::kGranted) answer(*w).permit.release_unused();
      throw;
    }
  }

  /// As `acquire`, without blocking: `done(PermitResult)` is called exactly once, inline when the answer
  /// is immediate, else later on the thread that returns units (granted, in `queue_order`), that pushes
  /// it out, or that finds its deadline passed: deadlines are checked on every operation on the key and
  /// by `expire_waiters()`, which an event loop's timer should call (this limiter starts no thread). Callbacks
  /// granted by units `done` returns run on its thread after it returned, not inside it.
  /// `done` must not throw. Thread-safe. Throws as `acquire` (then `done` is not called).
  void acquire_async(std::string_view key, std::int64_t units, std::chrono::nanoseconds max_wait, Callback done) {
    validate(key, units, max_wait);
    if (!done) detail::invalid("done", "must not be empty");
    const std::int64_t deadline = detail::saturating_add(now_ns(), max_wait.count());
    std::shared_ptr<Waiter> w;
    PermitResult immediate = enqueue(key, units, max_wait, deadline, &done, w);
    if (!w) done(std::move(immediate));
  }

  /// Answers `timed_out` to every queued waiter whose deadline passed (async callbacks run here, blocked
  /// callers wake), and grants what that frees. Returns how many expired. Thread-safe; O(keys).
  std::size_t expire_waiters() {
    const std::int64_t now = now_ns();
    std::size_t expired = 0;
    for (std::size_t s = 0; s < shard_count_; ++s) {
      std::vector<std::shared_ptr<Waiter>> out;
      {
        std::lock_guard lock(shards_[s].mutex);
        for (auto it = shards_[s].keys.begin(); it != shards_[s].keys.end();) {
          const std::size_t before = out.size();
          expire(it->second, now, out);
          expired += out.size() - before;
          grant(it->second, now, out);
          it = it->second.idle() ? erase(shards_[s], it) : std::next(it);
        }
      }
      for (auto& w : out) deliver(w);
    }
    return expired;
  }

  /// Units in flight for `key` now. Thread-safe (a snapshot).
  [[nodiscard]] std::int64_t in_flight(std::string_view key) const { return counts(key).first; }
  /// Units waiting in `key`'s queue now. Thread-safe (a snapshot).
  [[nodiscard]] std::int64_t queued(std::string_view key) const { return counts(key).second; }
  /// Keys held now (with permits out or waiters queued). Thread-safe (a snapshot).
  [[nodiscard]] std::size_t size() const noexcept { return keys_.load(std::memory_order_relaxed); }
  /// The limit in force per key now: `permits`, or min(`permits`, the adaptive limit) unless in shadow.
  /// Thread-safe (a snapshot).
  [[nodiscard]] std::int64_t limit() const noexcept {
    return enforce_adaptive_ ? std::min(options_.permits, adaptive_limit_.load(std::memory_order_acquire))
                             : options_.permits;
  }
  /// The counts for metrics: limits, min RTT, units in flight and queued over all keys, denials and
  /// releases by outcome. Thread-safe; O(shards); each field a snapshot (not one instant for all).
  [[nodiscard]] ConcurrencyStats stats() const noexcept {
    ConcurrencyStats out;
    out.limit = limit();
    out.adaptive_limit = algorithm_ ? adaptive_limit_.load(std::memory_order_acquire) : 0;
    out.min_rtt = std::chrono::nanoseconds(min_rtt_ns_.load(std::memory_order_relaxed));
    for (std::size_t s = 0; s < shard_count_; ++s) {
      out.in_flight =
          detail::saturating_add(out.in_flight, unwrapped(shards_[s].in_flight.load(std::memory_order_relaxed)));
      out.queued = detail::saturating_add(out.queued, unwrapped(shards_[s].queued.load(std::memory_order_relaxed)));
    }
    out.denied = denied_.load(std::memory_order_relaxed);
    out.succeeded = ended_[0].load(std::memory_order_relaxed);
    out.failed = ended_[1].load(std::memory_order_relaxed);
    out.dropped = ended_[2].load(std::memory_order_relaxed);
    out.unused = ended_[3].load(std::memory_order_relaxed);
    out.shadow = algorithm_ != nullptr && !enforce_adaptive_;
    return out;
  }
  /// The options as given. Thread-safe (immutable).
  [[nodiscard]] const ConcurrencyOptions& options() const noexcept { return options_; }
  /// The clock deadlines are read on (a `ManualClock` copy shares its time with the caller's).
  [[nodiscard]] C& clock() noexcept { return clock_; }

  // PermitSource
  /// Returns the units unmeasured (`Permit` calls `end_permit`).
  void release_permit(void* token, std::int64_t units) noexcept override {
    end_permit(token, PermitEnd{units, 0, 0, PermitOutcome::succeeded, false});
  }
  /// Returns the units; a measured end gives the adaptive algorithm a sample first, so the grants this
  /// release makes see the moved limit, and a risen limit grants other keys' waiters too.
  void end_permit(void* token, const PermitEnd& end) noexcept override {
    const auto kind = static_cast<std::size_t>(end.outcome);
    const bool measured = end.measured && kind < 3;  // an outcome outside the enum gives no sample
    ended_[measured ? kind : 3].fetch_add(1, std::memory_order_relaxed);
    const bool rose = algorithm_ && measured && sample(end);
    auto* state = static_cast<KeyState*>(token);
    Shard& shard = shards_[state->shard];
    std::vector<std::shared_ptr<Waiter>> out;
    {
      std::lock_guard lock(shard.mutex);
      add_in_flight(*state, -end.units);
      const std::int64_t now = now_ns();
      expire(*state, now, out);
      grant(*state, now, out);
      if (state->idle()) erase(shard, shard.keys.find(*state->key));
    }
    for (auto& w : out) deliver(w);
    if (rose) grant_everywhere();
  }
  [[nodiscard]] bool permit_valid(const void*) const noexcept override { return true; }

 private:
  struct KeyState;
  struct Waiter : PermitWait {
    KeyState* where = nullptr;  // while queued
    typename std::list<std::shared_ptr<Waiter>>::iterator pos{};
    std::size_t shard = 0;
    std::int64_t units = 0;
    std::int64_t deadline_ns = 0;
    PermitStatus denial = PermitStatus::timed_out;
    std::int64_t in_flight = 0;  // at the answer
    std::int64_t queued = 0;
    std::int64_t limit = 0;
    std::int64_t granted_ns = 0;     // when granted
    std::int64_t in_flight_all = 0;  // the limiter's units in flight then (adaptive only)
    void* token = nullptr;           // the key's state, when granted
    Callback done;                   // async only
  };
  using Queue = std::list<std::shared_ptr<Waiter>>;

  struct KeyState {
    std::int64_t in_flight = 0;
    std::int64_t queued_units = 0;
    Queue queue;
    const std::string* key = nullptr;  // the map's key (stable: map nodes never move)
    std::size_t shard = 0;
    [[nodiscard]] bool idle() const noexcept { return in_flight == 0 && queue.empty(); }
  };

  struct Hash {
    using is_transparent = void;
    const std::uint64_t* key;
    std::size_t operator()(std::string_view s) const noexcept { return detail::siphash<1, 3>(key[0], key[1], s); }
  };
  struct Equal {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const noexcept { return a == b; }
  };
  using Map = std::unordered_map<std::string, KeyState, Hash, Equal>;

  struct alignas(64) Shard {
    std::mutex mutex;
    Map keys{0, Hash{nullptr}, Equal{}};
    // The shard's units in flight and queued: written under `mutex`, read without it (metrics, and
    // to skip shards with nobody waiting when the adaptive limit rises).
    std::atomic<std::int64_t> in_flight{0};
    std::atomic<std::int64_t> queued{0};
  };

  static ConcurrencyOptions validated(ConcurrencyOptions o) {
    detail::require_positive(o.permits, "ConcurrencyOptions.permits");
    if (o.queue_limit < 0)
      detail::invalid("ConcurrencyOptions.queue_limit", "must be >= 0, got " + std::to_string(o.queue_limit));
    if (o.queue_order != QueueOrder::oldest_first && o.queue_order != QueueOrder::newest_first) {
      detail::invalid("ConcurrencyOptions.queue_order", "must be oldest_first or newest_first");
    }
    if (o.max_keys < 1) detail::invalid("ConcurrencyOptions.max_keys", "must be >= 1");
    if (o.max_key_bytes > (std::size_t{1} << 31))
      detail::invalid("ConcurrencyOptions.max_key_bytes", "must be <= 2^31");
    if (o.shards > 65536) detail::invalid("ConcurrencyOptions.shards", "must be <= 65536");
    if (o.adaptive_shadow && !o.adaptive)
      detail::invalid("ConcurrencyOptions.adaptive_shadow", "needs an adaptive algorithm (adaptive is null)");
    return o;
  }
  /// Whether `more` units fit beside `held` (>= 0; above `limit` after an adaptive limit fell) under
  /// `limit` (>= 0), without forming a sum that could overflow: `permits` and `queue_limit` may be
  /// INT64_MAX, `units` anything >= 1.
  static constexpr bool fits(std::int64_t held, std::int64_t more, std::int64_t limit) noexcept {
    return more <= limit && held <= limit - more;
  }
  static std::size_t shard_count(const ConcurrencyOptions& o) { return std::bit_ceil(o.shards == 0 ? 16 : o.shards); }

  void validate(std::string_view key, std::int64_t units, std::chrono::nanoseconds max_wait) const {
    if (key.size() > options_.max_key_bytes) {
      detail::invalid("key", std::to_string(key.size()) + " bytes exceeds max_key_bytes (" +
                                 std::to_string(options_.max_key_bytes) + ")");
    }
    detail::require_positive(units, "units");
    if (max_wait.count() < 0) detail::invalid("max_wait", "must be >= 0");
  }

  std::int64_t now_ns() { return detail::now_ns(clock_); }

  std::size_t shard_of(std::string_view key) const noexcept {
    const std::uint64_t h = detail::siphash<1, 3>(hash_key_[0], hash_key_[1], key);
    return static_cast<std::size_t>(h >> 32) & (shard_count_ - 1);
  }
  typename Map::iterator erase(Shard& shard, typename Map::iterator it) {
    keys_.fetch_sub(1, std::memory_order_relaxed);
    return shard.keys.erase(it);
  }

  /// Takes the units, queues a waiter (`w` set) or answers at once (the returned result).
  PermitResult enqueue(std::string_view key, std::int64_t units, std::chrono::nanoseconds max_wait,
                       std::int64_t deadline, Callback* done, std::shared_ptr<Waiter>& w) {
    const std::size_t s = shard_of(key);
    Shard& shard = shards_[s];
    std::vector<std::shared_ptr<Waiter>> out;
    PermitResult result;
    {
      std::lock_guard lock(shard.mutex);
      const std::int64_t limit_now = limit();
      auto it = shard.keys.find(key);
      if (it == shard.keys.end()) {
        if (units > options_.permits) return denied(PermitResult{{}, PermitStatus::too_many_units, 0, 0, limit_now});
        if (keys_.fetch_add(1, std::memory_order_relaxed) >= options_.max_keys) {
          keys_.fetch_sub(1, std::memory_order_relaxed);
          return denied(PermitResult{{}, PermitStatus::key_limit, 0, 0, limit_now});
        }
        it = shard.keys.try_emplace(std::string(key)).first;
        it->second.key = &it->first;
        it->second.shard = s;
      }
      KeyState& state = it->second;
      const std::int64_t now = now_ns();
      expire(state, now, out);
      grant(state, now, out);
      const bool nobody_ahead = state.queue.empty() || options_.queue_order == QueueOrder::newest_first;
      const auto refuse = [&](PermitStatus why) {
        return denied(PermitResult{{}, why, state.in_flight, state.queued_units, limit_now});
      };
      if (units > options_.permits) {
        result = refuse(PermitStatus::too_many_units);
      } else if (nobody_ahead && fits(state.in_flight, units, limit_now)) {
        const std::int64_t all = add_in_flight(state, units);
        result = PermitResult{Permit(this, &state, units, now, all), PermitStatus::acquired, state.in_flight,
                              state.queued_units, limit_now};
      } else if (max_wait.count() == 0) {
        result = refuse(PermitStatus::busy);
      } else if (!fits(options_.queue_order == QueueOrder::oldest_first ? state.queued_units : 0, units,
                       options_.queue_limit)) {
        result = refuse(PermitStatus::queue_full);
      } else {
        w = queue_waiter(state, units, deadline, done, out);
        if (enforce_adaptive_) {
          // A rise since `limit_now` was read may have looked for waiters here before this one queued
          // (`grant_everywhere`): the fences make one of the two see the other.
          std::atomic_thread_fence(std::memory_order_seq_cst);
          grant(state, now, out);
        }
      }
      if (state.idle()) erase(shard, it);
    }
    for (auto& x : out) deliver(x);
    return result;
  }

  /// Under the lock: queues a waiter of `units` on `state`, newest-first pushing the oldest out to make room.
  std::shared_ptr<Waiter> queue_waiter(KeyState& state, std::int64_t units, std::int64_t deadline, Callback* done,
                                       std::vector<std::shared_ptr<Waiter>>& out) {
    while (!fits(state.queued_units, units, options_.queue_limit)) {
      out.push_back(state.queue.front());
      state.queue.pop_front();
      Waiter& old = *out.back();
      add_queued(state, -old.units);
      answer_denied(old, PermitStatus::queue_full, state);
    }
    auto w = std::make_shared<Waiter>();
    w->units = units;
    w->deadline_ns = deadline;
    w->where = &state;
    w->shard = state.shard;
    if (done != nullptr) w->done = std::move(*done);
    w->pos = state.queue.insert(state.queue.end(), w);
    add_queued(state, units);
    return w;
  }

  /// Counts a denial; returns `r`.
  PermitResult denied(PermitResult r) noexcept {
    denied_.fetch_add(1, std::memory_order_relaxed);
    return r;
  }

  void answer_denied(Waiter& w, PermitStatus why, const KeyState& state) noexcept {
    denied_.fetch_add(1, std::memory_order_relaxed);
    w.denial = why;
    w.in_flight = state.in_flight;
    w.queued = state.queued_units;
    w.limit = limit();
    w.state_.store(PermitWait::kDenied, std::memory_order_release);
  }

  /// Under the key's shard lock: moves the key's and its shard's units in flight by `delta`, and with an
  /// adaptive limit the limiter's. Returns the limiter's units in flight after (0 without adaptive).
  std::int64_t add_in_flight(KeyState& state, std::int64_t delta) noexcept {
    state.in_flight += delta;
    shards_[state.shard].in_flight.fetch_add(delta, std::memory_order_relaxed);
    if (!algorithm_) return 0;
    const auto before = static_cast<std::uint64_t>(in_flight_all_.fetch_add(delta, std::memory_order_relaxed));
    return unwrapped(static_cast<std::int64_t>(before + static_cast<std::uint64_t>(delta)));
  }
  /// A count of units summed over keys (each key's <= INT64_MAX), kept in an atomic that wraps: negative only
  /// once the true count passed INT64_MAX, where it saturates.
  static constexpr std::int64_t unwrapped(std::int64_t count) noexcept { return count < 0 ? detail::kInt64Max : count; }
  /// Under the key's shard lock: moves the key's and its shard's queued units by `delta`.
  void add_queued(KeyState& state, std::int64_t delta) noexcept {
    state.queued_units += delta;
    shards_[state.shard].queued.fetch_add(delta, std::memory_order_relaxed);
  }

  /// Under the lock: answers the waiters whose deadline passed (`now` on the limiter's clock).
  void expire(KeyState& state, std::int64_t now, std::vector<std::shared_ptr<Waiter>>& out) {
    for (auto it = state.queue.begin(); it != state.queue.end();) {
      if ((*it)->deadline_ns > now) {
        ++it;
        continue;
      }
      add_queued(state, -(*it)->units);
      answer_denied(**it, PermitStatus::timed_out, state);
      out.push_back(std::move(*it));
      it = state.queue.erase(it);
    }
  }

  /// Under the lock: grants queued waiters in `queue_order` while the next one fits the limit now;
  /// `now` (the limiter's clock) is their grant time.
  void grant(KeyState& state, std::int64_t now, std::vector<std::shared_ptr<Waiter>>& out) {
    const bool fifo = options_.queue_order == QueueOrder::oldest_first;
    const std::int64_t limit_now = limit();
    while (!state.queue.empty()) {
      std::shared_ptr<Waiter>& next = fifo ? state.queue.front() : state.queue.back();
      if (!fits(state.in_flight, next->units, limit_now)) break;
      next->in_flight_all = add_in_flight(state, next->units);
      add_queued(state, -next->units);
      next->in_flight = state.in_flight;
      next->queued = state.queued_units;
      next->limit = limit_now;
      next->granted_ns = now;
      next->token = &state;
      next->state_.store(PermitWait::kGranted, std::memory_order_release);
      out.push_back(std::move(next));
      fifo ? state.queue.pop_front() : state.queue.pop_back();
    }
  }

  /// Outside every lock: gives the algorithm one measured release; returns whether the limit in force
  /// rose. A sample the algorithm throws on is lost (the limit stays).
  bool sample(const PermitEnd& end) noexcept {
    const std::int64_t now = now_ns();
    const LatencySample s{now, std::max<std::int64_t>(0, detail::saturating_sub(now, end.granted_ns)),
                          std::max<std::int64_t>(1, end.in_flight), end.outcome};
    std::lock_guard lock(adaptive_mutex_);
    const std::int64_t before = adaptive_limit_.load(std::memory_order_relaxed);
    std::int64_t after = before;
    try {
      after = std::max<std::int64_t>(1, algorithm_->on_sample(s));
    } catch (...) {
      return false;
    }
    adaptive_limit_.store(after, std::memory_order_release);
    min_rtt_ns_.store(algorithm_->min_rtt_ns(), std::memory_order_relaxed);
    if (after != before && options_.on_limit_change) {
      try {
        options_.on_limit_change(before, after);
      } catch (...) {  // a logging hook must not stop releases
      }
    }
    return enforce_adaptive_ && after > before && before < options_.permits;
  }

  /// After the adaptive limit rose: grants, in every shard with waiters, those that fit now.
  void grant_everywhere() noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);  // the risen limit before the queued counts: see `enqueue`
    for (std::size_t s = 0; s < shard_count_; ++s) {
      if (shards_[s].queued.load(std::memory_order_relaxed) == 0) continue;
      std::vector<std::shared_ptr<Waiter>> out;
      {
        std::lock_guard lock(shards_[s].mutex);
        const std::int64_t now = now_ns();
        for (auto it = shards_[s].keys.begin(); it != shards_[s].keys.end();) {
          expire(it->second, now, out);
          grant(it->second, now, out);
          it = it->second.idle() ? erase(shards_[s], it) : std::next(it);
        }
      }
      for (auto& w : out) deliver(w);
    }
  }

  /// Outside every lock: tells an answered waiter now (callback, or wake-up of the blocked caller).
  void notify(Waiter& w) {
    if (w.done) {
      Callback done = std::move(w.done);
      done(answer(w));
    } else {
      w.signal();
    }
  }

  /// As `notify`, but a callback that returns permits (of any limiter of this type) grants more waiters, whose
  /// callbacks then run on this thread after it returned, not inside it: the stack does not grow with a queue.
  void deliver(const std::shared_ptr<Waiter>& w) {
    if (!w->done) {  // a blocked caller's wake-up: nothing of the caller's runs here
      notify(*w);
      return;
    }
    if (delivering_ != nullptr) {
      delivering_->emplace_back(this, w);
      return;
    }
    std::vector<std::pair<ConcurrencyLimiter*, std::shared_ptr<Waiter>>> pending{{this, w}};
    delivering_ = &pending;
    struct Reset {
      ~Reset() { delivering_ = nullptr; }
    } reset;
    for (std::size_t i = 0; i < pending.size(); ++i) {
      auto [limiter, next] = pending[i];  // a copy: callbacks may append to `pending`
      limiter->notify(*next);
    }
  }

  /// The result of an answered waiter (its permit, once).
  PermitResult answer(Waiter& w) {
    if (w.state_.load(std::memory_order_acquire) == PermitWait::kGranted) {
      void* token = std::exchange(w.token, nullptr);
      if (token == nullptr) return PermitResult{{}, PermitStatus::cancelled, w.in_flight, w.queued, w.limit};
      return PermitResult{Permit(this, token, w.units, w.granted_ns, w.in_flight_all), PermitStatus::acquired,
                          w.in_flight, w.queued, w.limit};
    }
    return PermitResult{{}, w.denial, w.in_flight, w.queued, w.limit};
  }

  /// Takes a still-queued waiter out of its queue, answering it `why` (a granted one stays granted).
  void withdraw(Waiter& w, PermitStatus why) {
    Shard& shard = shards_[w.shard];
    std::vector<std::shared_ptr<Waiter>> out;
    {
      std::lock_guard lock(shard.mutex);
      if (w.answered()) return;
      KeyState& state = *w.where;  // held: the key has this waiter queued
      add_queued(state, -w.units);
      answer_denied(w, why, state);
      state.queue.erase(w.pos);
      grant(state, now_ns(), out);  // oldest-first, the one that held back others is gone
      if (state.idle()) erase(shard, shard.keys.find(*state.key));
    }
    for (auto& x : out) deliver(x);
  }

  std::pair<std::int64_t, std::int64_t> counts(std::string_view key) const {
    Shard& shard = shards_[shard_of(key)];
    std::lock_guard lock(shard.mutex);
    const auto it = shard.keys.find(key);
    return it == shard.keys.end() ? std::pair<std::int64_t, std::int64_t>{0, 0}
                                  : std::pair{it->second.in_flight, it->second.queued_units};
  }

  ConcurrencyOptions options_;
  C clock_;
  std::uint64_t hash_key_[2]{};
  std::size_t shard_count_;
  std::unique_ptr<Shard[]> shards_;
  std::atomic<std::size_t> keys_{0};
  // The adaptive limit: the algorithm is used only under `adaptive_mutex_` (never held with a shard's
  // lock); its limit and min RTT are mirrored in atomics that grants and metrics read.
  std::unique_ptr<AdaptiveAlgorithm> algorithm_;
  const bool enforce_adaptive_;
  std::mutex adaptive_mutex_;
  std::atomic<std::int64_t> adaptive_limit_{0};
  std::atomic<std::int64_t> min_rtt_ns_{0};
  std::atomic<std::int64_t> in_flight_all_{0};  // maintained with an adaptive limit only
  std::atomic<std::uint64_t> denied_{0};
  std::atomic<std::uint64_t> ended_[4]{};  // succeeded, failed, dropped, unused
  // The callbacks this thread is delivering (`deliver`), while it is; null otherwise.
  static inline thread_local std::vector<std::pair<ConcurrencyLimiter*, std::shared_ptr<Waiter>>>* delivering_ =
      nullptr;
};

}  // namespace ratelimit
