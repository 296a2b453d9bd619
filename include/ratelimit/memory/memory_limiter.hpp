#pragma once

/// @file
/// `MemoryLimiter`: a policy joined to the in-process sharded store and a clock.

#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/clock.hpp"
#include "ratelimit/decision.hpp"
#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/detail/decl.hpp"
#include "ratelimit/detail/key_length.hpp"
#include "ratelimit/limiter.hpp"
#include "ratelimit/memory/detail/key_handle.hpp"
#include "ratelimit/memory/joint_check.hpp"
#include "ratelimit/memory/options.hpp"
#include "ratelimit/memory/sharded_store.hpp"
#include "ratelimit/policy/policy.hpp"
#include "ratelimit/batch_request.hpp"
#include "ratelimit/reservation.hpp"

namespace ratelimit {

namespace detail {

/// The most heap bytes one key's state under `rules` can hold (0 for fixed-size states).
template <class R>
[[nodiscard]] std::size_t max_state_heap_bytes(const R& rules) noexcept {
  if constexpr (requires { rules.max_heap_bytes(); }) {
    return rules.max_heap_bytes();
  } else {
    return 0;
  }
}

/// `o` if its fields are in range for a store of states under `rules`; throws `std::invalid_argument` naming
/// the field (`MemoryOptions.max_keys`, `.max_key_bytes`, `.shards`, `.max_bytes`) otherwise.
template <class R>
MemoryOptions validated_memory_options(MemoryOptions o, const R& rules) {
  if (o.max_keys < 1) invalid("MemoryOptions.max_keys", "must be >= 1");
  if (o.max_key_bytes > (std::size_t{1} << 31)) invalid("MemoryOptions.max_key_bytes", "must be <= 2^31");
  if (o.shards > 65536) invalid("MemoryOptions.shards", "must be <= 65536");
  if (o.max_bytes < 1) invalid("MemoryOptions.max_bytes", "must be >= 1");
  // One key's log must fit: evicting other keys could not bring a budget below it back in bounds.
  if (const std::size_t one_key = max_state_heap_bytes(rules); o.max_bytes < one_key) {
    if (one_key == std::numeric_limits<std::size_t>::max()) {  // saturated: no byte count is large enough
      invalid("MemoryOptions.max_bytes",
              "must be SIZE_MAX (no byte budget) for this limit: one key's longest log, "
              "2 * (limit + 1) entries of 16 bytes, exceeds any size_t; got " +
                  std::to_string(o.max_bytes));
    }
    invalid("MemoryOptions.max_bytes", "must be >= " + std::to_string(one_key) +
                                           " (one key's longest log: 2 * (limit + 1) entries of 16 bytes), got " +
                                           std::to_string(o.max_bytes));
  }
  return o;
}

/// Whether each of `shards` shards' share of `max_bytes` holds one key's longest log of `one_key` bytes; always
/// with `max_bytes = SIZE_MAX`, which turns the byte budget off (no shard's states reach a share of it).
[[nodiscard]] inline bool shard_share_holds(std::size_t max_bytes, std::size_t shards, std::size_t one_key) noexcept {
  return max_bytes == std::numeric_limits<std::size_t>::max() || max_bytes / shards >= one_key;
}

/// Requested shards (64 by default) rounded up to a power of two, but at most one per 16 keys of
/// `max_keys` so that every shard holds a useful share of the cap, and few enough that each shard's
/// share of `max_bytes` holds one key's longest log under `rules`.
template <class R>
std::size_t memory_shards_for(const MemoryOptions& o, const R& rules) {
  std::size_t shards = std::bit_ceil(o.shards == 0 ? std::size_t{64} : o.shards);
  while (shards > 1 && shards * 16 > o.max_keys) shards /= 2;
  const std::size_t one_key = max_state_heap_bytes(rules);
  while (shards > 1 && !shard_share_holds(o.max_bytes, shards, one_key)) shards /= 2;
  return shards;
}

}  // namespace detail

/// The in-process backend: per-key state for one policy, in nanosecond ticks of `Clock`.
///
/// Thread-safe: every method may be called from any number of threads. Checks of one key are
/// linearizable (each runs under that key's shard lock); checks of keys in different shards run in
/// parallel. A present key's check does not allocate (except a sliding log growing its entry list).
/// Memory is bounded by `MemoryOptions::max_keys` and, for sliding window logs, `MemoryOptions::max_bytes`
/// (include/ratelimit/README.md "Guarantees"): a key whose state is full again is reclaimed, and at either bound keys
/// are evicted, approximately least recently used first.
///
/// A `JointBackend`: any `MemoryLimiter`s (of any policies and clocks) check several keys as one atomic
/// step (`check_jointly`, used by `check_layers`), under the shard locks of all the keys.
///
/// @tparam P a `Policy` (`FixedWindow`, `SlidingWindowLog`, `SlidingWindowCounter`, `TokenBucket`, `Gcra`).
/// @tparam C a `Clock`; `std::chrono::steady_clock` by default, `ManualClock` in tests.
/// Example:
///   // One limiter per policy, shared by every thread of the process; a key per client.
///   ratelimit::MemoryLimiter<ratelimit::Gcra> limiter(
///       ratelimit::Gcra{.limit = 100, .period = std::chrono::minutes(1), .burst = 10},
///       ratelimit::MemoryOptions{.max_keys = 50'000});
///   const std::string client_ip = "203.0.113.7";
///   if (const ratelimit::Decision d = limiter.allow(client_ip); !d) {
///     /* answer 429; d.retry_after says when the same request would pass */
///   }
template <Policy P, Clock C = std::chrono::steady_clock>
class MemoryLimiter final : public detail::LockedMember, public detail::ReservationBook {
 public:
  using policy_type = P;
  using clock_type = C;
  using time_point = typename C::time_point;

  /// The in-memory tick: one nanosecond.
  static constexpr std::int64_t kTickNs = 1;

  /// A limiter of `policy`, holding at most `options.max_keys` keys, reading `clock`. Allocates the shards'
  /// tables; no thread is started. Throws `std::invalid_argument` naming the field when the policy (e.g.
  /// `Gcra.burst`) or an option (`MemoryOptions.max_keys`, `.max_key_bytes`, `.shards`, `.max_bytes`) is
  /// out of range.
  explicit MemoryLimiter(P policy, MemoryOptions options = {}, C clock = {});

  /// Checks a request of `cost` units for `key` now and consumes them if it is admitted.
  /// Thread-safe. Throws `std::invalid_argument` for a negative cost or a key longer than
  /// `max_key_bytes`. Cost 0 reports the current state and is allowed, except on a GCRA or token-bucket key that
  /// owes a settled debt or has bookings ahead (include/ratelimit/README.md "Keys, costs and validation").
  /// Example:
  ///   ratelimit::MemoryLimiter<ratelimit::FixedWindow> limiter(
  ///       ratelimit::FixedWindow{.limit = 1000, .window = std::chrono::hours(1)});
  ///   const ratelimit::Decision d = limiter.allow("api-key:7f3a", /*cost=*/5);
  ///   if (!d) { /* answer 429: over 1,000 units this hour */ }
  ///   if (d.remaining < 100) { /* warn the client: fewer than 100 units left this hour */ }
  [[gnu::flatten]] Decision allow(std::string_view key, std::int64_t cost = 1);

  /// As `allow`, with the outcome every backend reports (in memory always `Outcome::decided`): code written
  /// against `check` runs on the Redis backends too, where a failure policy may answer. Thread-safe. Throws
  /// as `allow`.
  /// Example:
  ///   ratelimit::MemoryLimiter<ratelimit::Gcra> limiter(
  ///       ratelimit::Gcra{.limit = 10, .period = std::chrono::seconds(1), .burst = 10});
  ///   const ratelimit::CheckResult r = limiter.check("client-42");
  ///   if (r.failed()) { /* never in memory: a backend failure answered by the failure policy */ }
  ///   if (!r) { /* answer 429, waiting r.decision.retry_after */ }
  CheckResult check(std::string_view key, std::int64_t cost = 1) { return {allow(key, cost), Outcome::decided}; }

  /// Checks many requests (any keys and costs) at one reading of the clock and returns their decisions in the
  /// order of `requests`, as `RedisLimiter::allow_many` does. Each request is atomic on its own (one `allow`),
  /// not the batch; the requests of one key run in their order. Over many keys a request costs less than one
  /// `allow`: the batch hashes the keys ahead and starts loading the slots of the next requests while it checks
  /// one, so their cache misses overlap (bench/README.md "Results"). Thread-safe. Validates every request first and
  /// throws `std::invalid_argument` naming the first bad request (`"requests[i].cost: ..."` for a negative cost,
  /// `"requests[i].key: ..."` for a key longer than `max_key_bytes`) before checking any;
  /// `std::bad_alloc` from inserting a new key leaves the requests before it applied.
  /// Example:
  ///   ratelimit::MemoryLimiter<ratelimit::Gcra> limiter(
  ///       ratelimit::Gcra{.limit = 100, .period = std::chrono::seconds(1), .burst = 100});
  ///   const std::vector<ratelimit::BatchRequest> batch = {{"user:1", 1}, {"user:2", 3}, {"user:1", 1}};
  ///   const std::vector<ratelimit::Decision> decisions = limiter.allow_many(batch);
  ///   for (std::size_t i = 0; i < batch.size(); ++i) {
  ///     if (!decisions[i]) { /* drop the message of batch[i].key */ }
  ///   }
  std::vector<Decision> allow_many(std::span<const BatchRequest> requests) {
    std::vector<Decision> decisions(requests.size());
    allow_many(requests, decisions, clock_.now());
    return decisions;
  }

  /// As `allow_many(requests)`, with the outcome every backend reports (in memory always `Outcome::decided`),
  /// so that code written for `RedisLimiter::check_many` runs on either backend. Thread-safe. Throws as
  /// `allow_many`.
  /// Example:
  ///   ratelimit::MemoryLimiter<ratelimit::FixedWindow> limiter(
  ///       ratelimit::FixedWindow{.limit = 50, .window = std::chrono::seconds(1)});
  ///   const ratelimit::BatchRequest batch[] = {{"tenant:a", 10}, {"tenant:b", 60}};
  ///   for (const ratelimit::CheckResult& r : limiter.check_many(batch)) {
  ///     if (!r) { /* tenant:b's 60 units can never pass a limit of 50: r.decision.retry_after is never */ }
  ///   }
  std::vector<CheckResult> check_many(std::span<const BatchRequest> requests) {
    std::vector<CheckResult> results;
    results.reserve(requests.size());
    for (const Decision& d : allow_many(requests)) results.push_back({d, Outcome::decided});
    return results;
  }

  /// As `allow_many(requests)`, at a time the caller read, writing the decision of `requests[i]` to
  /// `decisions[i]`: no allocation, for a caller that checks batch after batch into one array. Throws
  /// `std::invalid_argument` naming `decisions` when its size is not `requests.size()`, checking nothing.
  /// Flattened as `allow`: on a hot key a request out of line cost about twice a flattened `allow`.
  [[gnu::flatten]] void allow_many(std::span<const BatchRequest> requests, std::span<Decision> decisions,
                                   time_point now);

  /// As `allow(key, cost)`, at a time the caller read once (e.g. for several layers of one request).
  [[gnu::flatten]] Decision allow(std::string_view key, std::int64_t cost, time_point now);

  /// Gives back up to `cost` units that `key` consumed (a request that failed or was cancelled), never
  /// past full (`remaining <= limit`); formulas in `ratelimit::refund`. Returns the key's state
  /// afterwards as a cost-0 check sees it. An absent (full) key stays absent. Thread-safe. Throws
  /// `std::invalid_argument` for a negative cost or a key longer than `max_key_bytes`.
  Decision refund(std::string_view key, std::int64_t cost) { return refund(key, cost, clock_.now()); }

  /// As `refund(key, cost)`, at a time the caller read.
  Decision refund(std::string_view key, std::int64_t cost, time_point now);

  /// Books `cost` units of `key` now for a later act (include/ratelimit/README.md "Reservations"), as
  /// golang.org/x/time/rate's `Reserve`: the units are taken at once, and `delay()` says how long after now the
  /// caller may act (bookings of one key follow each other by the emission interval `T`). Not booked (`ok()`
  /// false, nothing written) when `cost` exceeds the burst (`delay()` is `Decision::never`). GCRA and token
  /// bucket only (a compile error for the window policies: the README says why). Exact in nanoseconds.
  /// Thread-safe (one step under the key's shard lock); the limiter must outlive the `Reservation`. Throws
  /// `std::invalid_argument` for a negative cost or a key longer than `max_key_bytes`.
  /// Example:
  ///   ratelimit::MemoryLimiter<ratelimit::Gcra> outgoing(
  ///       ratelimit::Gcra{.limit = 10, .period = std::chrono::seconds(1), .burst = 1});
  ///   ratelimit::Reservation r = outgoing.reserve("partner-api");
  ///   if (r.ok()) { std::this_thread::sleep_for(r.delay()); /* call the partner */ }
  Reservation reserve(std::string_view key, std::int64_t cost = 1) requires ReservableRules<RulesOf<P>> {
    return reserve_at(key, cost, Decision::never, ticks(clock_.now()));
  }

  /// As `reserve(key, cost)`, booking only when the delay would be at most `max_delay` (>= 0): otherwise
  /// nothing is written and the refusal's `delay()` is the wait the booking would have needed. Also refused
  /// when the key's backlog would pass `Rules::max_backlog()` (~73 years). What shaping uses: one atomic step.
  /// Throws as `reserve`, and `std::invalid_argument` naming `max_delay` when it is negative.
  /// Example:
  ///   ratelimit::MemoryLimiter<ratelimit::TokenBucket> uploads(ratelimit::TokenBucket{
  ///       .capacity = 5, .refill_tokens = 1, .refill_period = std::chrono::seconds(1)});
  ///   ratelimit::Reservation r = uploads.reserve("user:7", 2, std::chrono::milliseconds(500));
  ///   if (!r.ok()) { /* answer 429 with Retry-After: r.delay() */ }
  Reservation reserve(std::string_view key, std::int64_t cost,
                      std::chrono::nanoseconds max_delay) requires ReservableRules<RulesOf<P>> {
    return reserve_at(key, cost, max_delay, ticks(clock_.now()));
  }

  /// As `reserve(key, cost, max_delay)`, at a time the caller read. `cancel()` reads the limiter's clock.
  Reservation reserve(std::string_view key, std::int64_t cost, std::chrono::nanoseconds max_delay,
                      time_point now) requires ReservableRules<RulesOf<P>> {
    return reserve_at(key, cost, max_delay, ticks(now));
  }

  /// After the response, makes `key`'s state what charging `actual` units instead of `charged` would have made
  /// it (include/ratelimit/README.md "Settling after the response"): the difference above `charged` is debited
  /// even past the limit (the key owes it: with GCRA, 5 units owed delay the next request by 5 emission
  /// intervals), the difference below is given back exactly as `refund`. Window policies act on the current
  /// window, which is the one the request was charged in while it is current. No bound on the debt beyond
  /// what keeps the arithmetic exact (`settle` with `max_debt` bounds it). Returns the key's state afterwards as
  /// a cost-0 check sees it (`remaining` 0 in debt), for headers. Thread-safe (one step under the key's shard
  /// lock). Throws `std::invalid_argument` naming `charged` or `actual` when negative, or for a key longer than
  /// `max_key_bytes`.
  /// Example:
  ///   ratelimit::MemoryLimiter<ratelimit::Gcra> tokens(
  ///       ratelimit::Gcra{.limit = 10'000, .period = std::chrono::minutes(1), .burst = 20'000});
  ///   const std::int64_t estimate = 500;
  ///   if (tokens.allow("tenant:3", estimate)) {
  ///     const std::int64_t used = 800;  // the model's answer turned out longer
  ///     const ratelimit::Decision after = tokens.settle("tenant:3", estimate, used);
  ///     (void)after;  // headers: after.remaining, after.reset_after
  ///   }
  Decision settle(std::string_view key, std::int64_t charged, std::int64_t actual) {
    return settle(key, charged, actual, detail::kInt64Max, clock_.now());
  }

  /// As `settle(key, charged, actual)`, leaving at most `max_debt` units (>= 0) owed beyond the limit: a debit
  /// past that is clamped, never refused (0: never past the limit). Throws as `settle`, and
  /// `std::invalid_argument` naming `max_debt` when it is negative.
  Decision settle(std::string_view key, std::int64_t charged, std::int64_t actual, std::int64_t max_debt) {
    return settle(key, charged, actual, max_debt, clock_.now());
  }

  /// As `settle(key, charged, actual, max_debt)`, at a time the caller read.
  Decision settle(std::string_view key, std::int64_t charged, std::int64_t actual, std::int64_t max_debt,
                  time_point now);

  /// What a cost-1 request would see now, consuming nothing (include/ratelimit/README.md "Decisions"). Thread-safe.
  /// Throws `std::invalid_argument` for a key longer than `max_key_bytes`.
  Decision peek(std::string_view key) { return peek(key, clock_.now()); }

  /// As `peek(key)`, at a time the caller read.
  Decision peek(std::string_view key, time_point now);

  /// Forgets the key's state: it is full again. Thread-safe.
  /// Throws `std::invalid_argument` for a key longer than `max_key_bytes`.
  void reset(std::string_view key);

  /// Reclaims every key whose state is full now; returns how many. Thread-safe. Keys are also
  /// reclaimed as they are touched and as new keys arrive; call this from a timer to return memory
  /// after traffic stops.
  std::size_t sweep();

  /// Keys held now. Thread-safe (a snapshot).
  [[nodiscard]] std::size_t size() const { return store_.size(); }
  /// Keys evicted so far, at `max_keys` or over `max_bytes`, that were not full (their usage was lost).
  /// Thread-safe.
  [[nodiscard]] std::size_t evictions() const { return store_.evictions(); }
  /// Bytes held by the store: slots, their touch times, long keys and sliding window logs' entries
  /// (their vectors' capacity). A running count, O(shards). Thread-safe (a snapshot).
  [[nodiscard]] std::size_t table_bytes() const { return store_.table_bytes(); }
  /// `table_bytes()` recomputed by walking every key, O(keys) under each shard's lock in turn: a check of
  /// the running count for tests and diagnostics, not for a hot path. Thread-safe.
  [[nodiscard]] std::size_t recount_table_bytes() const { return store_.recount_table_bytes(); }

  /// Independently locked shards of the store (a power of two; `MemoryOptions::shards`). Thread-safe.
  [[nodiscard]] std::size_t shard_count() const noexcept { return store_.shard_count(); }
  /// The shard that holds `key`, in [0, shard_count()): checks of keys in different shards run in parallel,
  /// keys of one shard share its lock. The mapping is random per limiter (a keyed hash). For diagnostics and
  /// benchmarks. Thread-safe. Throws `std::invalid_argument` for a key longer than `max_key_bytes`.
  [[nodiscard]] std::size_t shard_of(std::string_view key) const {
    check_key(key);
    return store_.shard_index(store_.hash(key));
  }

  /// Replaces the policy at run time, keeping every key's usage (include/ratelimit/README.md "Changing a policy at run
  /// time"): each key's state is carried over in units (`Rules::carry`: GCRA and token bucket keep the
  /// used units `ceil((TAT - t) / T_old)`, `TAT = t + min(units, burst) * T_new`; windows keep their
  /// counts, compared with the new limit; a sliding log keeps its entries; rules equal to the current ones
  /// convert nothing, as on Redis, so repeating a policy changes no state). Thread-safe: every shard's
  /// lock is held while the states are converted and the rules swapped, so each check runs wholly under
  /// the old policy or wholly under the new one, never a mix; checks wait meanwhile (O(keys)).
  /// Throws `std::invalid_argument` naming the field for a bad policy (or `MemoryOptions.max_bytes` when
  /// one key's log of the new limit would not fit), changing nothing. A `LimiterLayer` advertises the
  /// new quota from then on (`policy_generation()`).
  void set_policy(P policy);

  /// How many times `set_policy` has replaced the policy (0 at first): a layer re-reads `policy()` when it
  /// moved. Thread-safe (one relaxed-or-stronger load, no lock).
  [[nodiscard]] std::uint64_t policy_generation() const noexcept { return generation_.load(std::memory_order_acquire); }

  /// The policy now, as given (durations in nanoseconds). Thread-safe (a copy: `set_policy` may replace it).
  [[nodiscard]] P policy() const {
    std::lock_guard config(config_mutex_);
    return policy_;
  }
  /// The validated rules now, in ticks of 1 ns. Thread-safe (a copy).
  [[nodiscard]] RulesOf<P> rules() const {
    std::lock_guard config(config_mutex_);
    return rules_;
  }
  /// The options as given. Thread-safe (immutable).
  [[nodiscard]] const MemoryOptions& options() const noexcept { return options_; }
  /// The clock this limiter reads (a `ManualClock` copy shares its time with the caller's).
  [[nodiscard]] C& clock() noexcept { return clock_; }

 private:
  using State = StateOf<P>;

  /// How many requests ahead `allow_many` starts loading slots: enough misses in flight to hide one
  /// memory access behind the checks before it (a check of a cached slot takes a tenth of an access).
  static constexpr std::size_t kBatchAhead = 8;

  /// `allow` of a key whose length was checked and whose hash is `hash`, at `t`. Flattened: the lock, the
  /// probe and the policy's decision compile into one function (the paths of absent keys, of reclaiming
  /// and of errors stay out of line).
  [[gnu::flatten]] Decision allow_hashed(std::string_view key, std::uint64_t hash, std::int64_t cost, std::int64_t t) {
    detail::require_cost(cost);
    return to_decision(store_.update(key, hash, allow_fn(t, cost), is_full_fn(t)), kTickNs);
  }

  // detail::LockedMember: the joint check's hooks (memory/joint_check.hpp).
  detail::KeyHandle locate_key(std::string_view key) override;
  Decision allow_under_lock(std::string_view key, const detail::KeyHandle& handle, std::int64_t cost) override;
  Decision refund_under_lock(std::string_view key, const detail::KeyHandle& handle, std::int64_t cost) override;
  Decision evaluate_under_lock(std::string_view key, const detail::KeyHandle& handle, std::int64_t cost) override;
  Decision current_under_lock(std::string_view key, const detail::KeyHandle& handle) override;

  // The `reserve` overloads at `t`. Unconstrained, so that an explicit instantiation for a window policy (which
  // clang 14 makes of constrained members too) compiles: it books nothing there.
  Reservation reserve_at(std::string_view key, std::int64_t cost, std::chrono::nanoseconds max_delay, std::int64_t t);

  // detail::ReservationBook: a `Reservation`'s cancel. Nothing for a key evicted or reset since the booking and
  // still absent; a key made again since is never taken below its state before the booking (`Rules::cancel`).
  void cancel_reservation(std::string_view key, const detail::ReservationTicket& ticket) noexcept override;

  // The store callbacks of allow and refund, shared by the locking and the `*_locked` paths.
  auto allow_fn(std::int64_t t, std::int64_t cost) const {
    return [this, t, cost](State& state, bool present) {
      const TickDecision decision = rules_.decide(state, t, cost);  // every caller has checked `cost`
      // A commit leaves quota in use; otherwise a present key that is full again is reclaimed.
      const bool keep = (decision.allowed && cost > 0) || (present && !rules_.is_full(state, t));
      return std::pair{decision, keep};
    };
  }
  auto refund_fn(std::int64_t t, std::int64_t cost) const {
    return [this, t, cost](State& state, bool present) {
      // An absent key is full: nothing to give back, and nothing is inserted.
      const TickDecision decision = present ? rules_.refund(state, t, cost) : rules_.evaluate(state, t, 0);
      return std::pair{decision, present && !rules_.is_full(state, t)};
    };
  }
  auto is_full_fn(std::int64_t t) const {
    return [this, t](const State& state) { return rules_.is_full(state, t); };
  }

  void check_key(std::string_view key) const { detail::check_key_length(key, options_.max_key_bytes); }

  static std::int64_t ticks(time_point now) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  }

  mutable std::mutex config_mutex_;  // guards policy_ and rules_ for readers outside the shard locks
  std::atomic<std::uint64_t> generation_{0};
  P policy_;
  RulesOf<P> rules_;  // read by checks under their shard lock; written by set_policy under every one
  MemoryOptions options_;
  C clock_;
  detail::ShardedStore<State> store_;
};

// The members that reach the store, defined out of the class: `inline` header-only (as if defined in it);
// in a separately compiled program (`<ratelimit/src.hpp>`) not inline, so that the `extern template`
// declarations below keep every unit but one from compiling them.
template <Policy P, Clock C>
RATELIMIT_DECL MemoryLimiter<P, C>::MemoryLimiter(P policy, MemoryOptions options, C clock)
    : policy_(std::move(policy)),
      rules_(policy_.rules(kTickNs)),
      options_(detail::validated_memory_options(options, rules_)),
      clock_(std::move(clock)),
      store_(options_.max_keys, detail::memory_shards_for(options_, rules_), options_.max_bytes) {}

template <Policy P, Clock C>
RATELIMIT_DECL Decision MemoryLimiter<P, C>::allow(std::string_view key, std::int64_t cost) {
  check_key(key);
  if (store_.prefetching()) {
    const std::uint64_t hash = store_.hash(key);
    store_.prefetch(hash);  // the key's slot loads from memory while the clock is read
    return allow_hashed(key, hash, cost, ticks(clock_.now()));
  }
  // Every table is small enough to stay in cache: the clock first. Its read waits for every instruction
  // before it, so hashing after it overlaps the end of the read instead of delaying its start.
  const std::int64_t t = ticks(clock_.now());
  return allow_hashed(key, store_.hash(key), cost, t);
}

template <Policy P, Clock C>
RATELIMIT_DECL void MemoryLimiter<P, C>::allow_many(std::span<const BatchRequest> requests,
                                                    std::span<Decision> decisions, time_point now) {
  if (decisions.size() != requests.size()) {
    detail::invalid("decisions", "must hold one decision per request (" + std::to_string(requests.size()) + "), got " +
                                     std::to_string(decisions.size()));
  }
  detail::validate_batch(requests, options_.max_key_bytes);
  const std::int64_t t = ticks(now);
  const std::size_t n = requests.size();
  std::array<std::uint64_t, kBatchAhead> ahead{};  // hashes of the next requests, whose slots are loading
  auto start_loading = [&](std::size_t i) {
    const std::uint64_t hash = store_.hash(requests[i].key);
    store_.prefetch(hash);
    ahead[i % kBatchAhead] = hash;
  };
  for (std::size_t i = 0; i < n && i < kBatchAhead; ++i) start_loading(i);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t hash = ahead[i % kBatchAhead];
    if (i + kBatchAhead < n) start_loading(i + kBatchAhead);
    decisions[i] = allow_hashed(requests[i].key, hash, requests[i].cost, t);
  }
}

template <Policy P, Clock C>
RATELIMIT_DECL Decision MemoryLimiter<P, C>::allow(std::string_view key, std::int64_t cost, time_point now) {
  check_key(key);
  return allow_hashed(key, store_.hash(key), cost, ticks(now));
}

template <Policy P, Clock C>
RATELIMIT_DECL Decision MemoryLimiter<P, C>::refund(std::string_view key, std::int64_t cost, time_point now) {
  check_key(key);
  detail::require_cost(cost);
  const std::int64_t t = ticks(now);
  return to_decision(store_.update(key, store_.hash(key), refund_fn(t, cost), is_full_fn(t)), kTickNs);
}

template <Policy P, Clock C>
RATELIMIT_DECL Reservation MemoryLimiter<P, C>::reserve_at(std::string_view key, std::int64_t cost,
                                                           std::chrono::nanoseconds max_delay, std::int64_t t) {
  if constexpr (ReservableRules<RulesOf<P>>) {
    check_key(key);
    detail::require_cost(cost);
    if (max_delay.count() < 0) detail::invalid("max_delay", "must be >= 0, got " + std::to_string(max_delay.count()));
    std::string held(key);  // before booking: a booking must not be lost to a failed allocation
    auto fn = [&](State& state, bool present) {
      const auto booking = rules_.reserve(state, t, cost, max_delay.count() / kTickNs);
      return std::pair{booking, (booking.ok && cost > 0) || (present && !rules_.is_full(state, t))};
    };
    const auto booking = store_.update(key, store_.hash(key), fn, is_full_fn(t));
    const Decision decision = to_decision(booking.decision, kTickNs);
    const std::chrono::nanoseconds delay = to_decision(TickDecision{.retry_after = booking.delay}, kTickNs).retry_after;
    if (!booking.ok) return Reservation::refused(delay, decision);
    return Reservation(this, std::move(held), booking.ticket, delay, decision);
  } else {
    (void)key, (void)cost, (void)max_delay, (void)t;
    return Reservation{};
  }
}

template <Policy P, Clock C>
RATELIMIT_DECL void MemoryLimiter<P, C>::cancel_reservation(std::string_view key,
                                                            const detail::ReservationTicket& ticket) noexcept {
  if constexpr (ReservableRules<RulesOf<P>>) {
    try {
      const std::int64_t t = ticks(clock_.now());
      auto fn = [&](State& state, bool present) {
        if (present) rules_.cancel(state, t, ticket);  // an absent key was evicted or reset: nothing to give back
        return std::pair{true, present && !rules_.is_full(state, t)};
      };
      store_.update(key, store_.hash(key), fn, is_full_fn(t));
    } catch (...) {  // a clock that throws: the slot stays spent, the safe side
    }
  } else {
    (void)key;
    (void)ticket;
  }
}

template <Policy P, Clock C>
RATELIMIT_DECL Decision MemoryLimiter<P, C>::settle(std::string_view key, std::int64_t charged, std::int64_t actual,
                                                    std::int64_t max_debt, time_point now) {
  check_key(key);
  detail::require_settle(charged, actual, max_debt);
  const std::int64_t t = ticks(now);
  auto fn = [&](State& state, bool present) {
    // An absent key is full: a give-back leaves it so, and nothing is inserted.
    if (!present && actual <= charged) return std::pair{rules_.evaluate(state, t, 0), false};
    const TickDecision d = ratelimit::settle(rules_, state, t, charged, actual, max_debt);
    return std::pair{d, !rules_.is_full(state, t)};
  };
  return to_decision(store_.update(key, store_.hash(key), fn, is_full_fn(t)), kTickNs);
}

template <Policy P, Clock C>
RATELIMIT_DECL Decision MemoryLimiter<P, C>::peek(std::string_view key, time_point now) {
  check_key(key);
  const std::int64_t t = ticks(now);
  const TickDecision d =
      store_.read(key, store_.hash(key), [&](const State& state) { return ratelimit::peek(rules_, state, t); });
  return to_decision(d, kTickNs);
}

template <Policy P, Clock C>
RATELIMIT_DECL void MemoryLimiter<P, C>::reset(std::string_view key) {
  check_key(key);
  store_.erase(key, store_.hash(key));
}

template <Policy P, Clock C>
RATELIMIT_DECL std::size_t MemoryLimiter<P, C>::sweep() {
  const std::int64_t t = ticks(clock_.now());
  return store_.sweep([&](const State& state) { return rules_.is_full(state, t); });
}

template <Policy P, Clock C>
RATELIMIT_DECL void MemoryLimiter<P, C>::set_policy(P policy) {
  RulesOf<P> rules = policy.rules(kTickNs);
  (void)detail::validated_memory_options(options_, rules);
  if (!detail::shard_share_holds(options_.max_bytes, store_.shard_count(), detail::max_state_heap_bytes(rules))) {
    detail::invalid("MemoryOptions.max_bytes", "a shard's share cannot hold one key's log of the new limit");
  }
  std::lock_guard config(config_mutex_);  // one change at a time; readers of policy() wait
  if (rules == rules_) {
    // Nothing to convert (checks read only the rules): a repeated policy, e.g. a periodic reload, must not
    // round a GCRA backlog up again at every call (a key reloaded faster than once per T never drained).
    policy_ = std::move(policy);
  } else {
    const std::int64_t t = ticks(clock_.now());
    store_.transform_all([&](State& state) { rules.carry(rules_, state, t); },
                         [&] {
                           rules_ = rules;
                           policy_ = std::move(policy);
                         });
  }
  generation_.fetch_add(1, std::memory_order_release);  // after the policy: a reader of it sees the new one
}

template <Policy P, Clock C>
RATELIMIT_DECL detail::KeyHandle MemoryLimiter<P, C>::locate_key(std::string_view key) {
  check_key(key);
  const std::uint64_t hash = store_.hash(key);
  return detail::KeyHandle{hash, ticks(clock_.now()), &store_.lock_of(hash)};
}

template <Policy P, Clock C>
RATELIMIT_DECL Decision MemoryLimiter<P, C>::allow_under_lock(std::string_view key, const detail::KeyHandle& handle,
                                                              std::int64_t cost) {
  detail::require_cost(cost);
  const std::int64_t t = handle.now_ns;
  return to_decision(store_.update_locked(key, handle.hash, allow_fn(t, cost), is_full_fn(t)), kTickNs);
}

template <Policy P, Clock C>
RATELIMIT_DECL Decision MemoryLimiter<P, C>::refund_under_lock(std::string_view key, const detail::KeyHandle& handle,
                                                               std::int64_t cost) {
  detail::require_cost(cost);
  const std::int64_t t = handle.now_ns;
  return to_decision(store_.update_locked(key, handle.hash, refund_fn(t, cost), is_full_fn(t)), kTickNs);
}

template <Policy P, Clock C>
RATELIMIT_DECL Decision MemoryLimiter<P, C>::evaluate_under_lock(std::string_view key, const detail::KeyHandle& handle,
                                                                 std::int64_t cost) {
  detail::require_cost(cost);
  const std::int64_t t = handle.now_ns;
  return to_decision(
      store_.read_locked(key, handle.hash, [&](const State& state) { return rules_.evaluate(state, t, cost); }),
      kTickNs);
}

template <Policy P, Clock C>
RATELIMIT_DECL Decision MemoryLimiter<P, C>::current_under_lock(std::string_view key, const detail::KeyHandle& handle) {
  const std::int64_t t = handle.now_ns;
  return to_decision(
      store_.read_locked(key, handle.hash, [&](const State& state) { return rules_.evaluate(state, t, 0); }), kTickNs);
}

}  // namespace ratelimit

#ifdef RATELIMIT_SEPARATE_COMPILATION
#include "ratelimit/policy/fixed_window.hpp"
#include "ratelimit/policy/gcra.hpp"
#include "ratelimit/policy/sliding_window_counter.hpp"
#include "ratelimit/policy/sliding_window_log.hpp"
#include "ratelimit/policy/token_bucket.hpp"

namespace ratelimit {
// Compiled once, in the unit that includes <ratelimit/src.hpp>: the five policies with the default clock.
extern template class MemoryLimiter<FixedWindow>;
extern template class MemoryLimiter<SlidingWindowLog>;
extern template class MemoryLimiter<SlidingWindowCounter>;
extern template class MemoryLimiter<TokenBucket>;
extern template class MemoryLimiter<Gcra>;
}  // namespace ratelimit
#endif
