#pragma once

/// @file
/// The in-memory keyed state store: shards of flat tables, each behind its own lock, with a hard cap
/// on the number of keys, approximate-LRU eviction and reclaiming of full keys.

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "ratelimit/detail/multiply_hash.hpp"
#include "ratelimit/detail/spin_lock.hpp"
#include "ratelimit/memory/key_table.hpp"

namespace ratelimit::detail {

/// Per-key state behind per-shard locks. Its one job is an atomic read-modify-write of one key's
/// state (`update`), the in-memory counterpart of a Redis script. All methods are thread-safe.
template <class State>
class ShardedStore {
  struct Shard;

 public:
  using Table = KeyTable<State>;
  using Slot = typename Table::Slot;

  /// Keys a shard samples when it must evict one (as Redis's `maxmemory-samples` default).
  static constexpr int kEvictionSamples = 5;

  /// `max_keys >= 1` is a hard cap over all shards; `shards` is a power of two <= max_keys.
  /// `max_state_bytes` caps the heap bytes of states that allocate (`HeapState`), split evenly over the
  /// shards; the caller keeps each shard's share at least one key's largest state. `seed` keys the hash:
  /// random unless a test fixes it (a known seed lets anyone compute colliding keys).
  ShardedStore(std::size_t max_keys, std::size_t shards, std::size_t max_state_bytes = SIZE_MAX,
               const HashSeed& seed = HashSeed::random())
      : shard_count_(shards),
        shard_shift_(shards > 1 ? 64 - std::countr_zero(shards) : 0),
        shards_(std::make_unique<Shard[]>(shards)),
        seed_(seed) {
    for (std::size_t i = 0; i < shards; ++i) {
      shards_[i].table.set_max_size(max_keys / shards + (i < max_keys % shards ? 1 : 0));
      shards_[i].state_budget = max_state_bytes / shards + (i < max_state_bytes % shards ? 1 : 0);
    }
  }

  /// A non-zero keyed hash of the key (`multiply_hash` under this store's random seed): the high bits
  /// pick the shard, the table maps them to a slot. Keyed, so that nobody who sends keys can compute keys
  /// that collide into one shard and one probe run (unkeyed hashes allow that, whatever their seed).
  [[nodiscard]] std::uint64_t hash(std::string_view key) const noexcept {
    const std::uint64_t h = multiply_hash(seed_, key);
    return h | (h == 0 ? 1 : 0);
  }

  /// Starts loading the lines of `hash`'s home slot and of the `kPrefetchSlots - 1` slots after it in memory
  /// (a probe that wraps to slot 0 is not covered), without the lock, so that their cache misses overlap with
  /// what the caller does before `update` (reading the clock, or the checks before it in a batch). A hint: the
  /// table may move meanwhile, and a prefetch of a stale or past-the-end address loads a useless line (it never
  /// faults). Thread-safe.
  void prefetch(std::uint64_t hash) const noexcept {
    const Shard& shard = shards_[shard_index(hash)];
    const typename Table::Home home = published_home(shard, hash);
    if (home.capacity < kPrefetchFromSlots) return;  // a small table stays in cache anyway
    const std::uintptr_t at = shard.slots_at.load(std::memory_order_relaxed) + home.index * sizeof(Slot);
    const std::uintptr_t last = at + kPrefetchSlots * sizeof(Slot) - 1;
    for (std::uintptr_t line = at & ~std::uintptr_t{kLineBytes - 1}; line <= last; line += kLineBytes)
      __builtin_prefetch(reinterpret_cast<const void*>(line));
  }

  /// Whether some shard's table has reached `kPrefetchFromSlots` slots (and may not stay in cache), so that
  /// `prefetch` can pay; until then a check need not hash its key before it reads the clock. Stays true once
  /// set: a hint, as `prefetch` is. Thread-safe (one relaxed load).
  [[nodiscard]] bool prefetching() const noexcept { return prefetching_.load(std::memory_order_relaxed); }

  /// Runs `fn(State& state, bool present)` under the key's lock; `fn` returns `{result, keep}`.
  /// An absent key gets a fresh `State{}`, inserted only if `keep` (evicting at the cap); a present key
  /// is erased if `!keep`. `is_full(const State&)` tells which keys can be dropped at no cost.
  template <class Fn, class IsFull>
  auto update(std::string_view key, std::uint64_t hash, Fn&& fn, IsFull&& is_full) {
    Shard& shard = shard_for(hash);
    // The probe's start under the capacity last published, before the lock: after the lock's exchange the
    // probe's first load then waits for no multiplication (the lookup checks that the capacity still holds).
    typename Table::Home home = published_home(shard, hash);
    // Where the lookup uses it, the compiler knows `home.index` equals the home computed from the table's own
    // capacity, and would compute that instead, after the lock; an empty asm hides where the index came from.
    asm("" : "+r"(home.index));
    std::lock_guard guard(shard.lock);
    return update_in(shard, home, key, hash, fn, is_full);
  }

  /// The lock of the shard that holds `hash`. Checks that must change several keys at once (layered
  /// limits) take the locks of all their keys, each lock once, in one global order (by address, over
  /// every store), then call the `*_locked` functions: no deadlock, and no one sees a partial change.
  [[nodiscard]] SpinLock& lock_of(std::uint64_t hash) noexcept { return shard_for(hash).lock; }

  /// `update` for a caller that holds `lock_of(hash)`. Slots may move: keep no reference across calls.
  template <class Fn, class IsFull>
  auto update_locked(std::string_view key, std::uint64_t hash, Fn&& fn, IsFull&& is_full) {
    return update_in(shard_for(hash), typename Table::Home{}, key, hash, fn, is_full);
  }

 private:
  /// `update_locked` in `shard` (the key's), whose lookup starts at `home` if that still holds.
  template <class Fn, class IsFull>
  auto update_in(Shard& shard, typename Table::Home home, std::string_view key, std::uint64_t hash, Fn& fn,
                 IsFull& is_full) {
    if (Slot* slot = shard.table.find(hash, key, home)) {
      const std::size_t before = state_heap_bytes(std::as_const(slot->state));  // 0 for fixed-size states
      auto [result, keep] = fn(slot->state, true);
      if constexpr (HeapState<State>) shard.table.add_state_bytes(before, state_heap_bytes(std::as_const(slot->state)));
      if (keep) {
        shard.table.touch(*slot, next_stamp(shard));
        if constexpr (HeapState<State>) {
          if (shard.table.state_bytes() > shard.state_budget) [[unlikely]]
            trim_to_budget(shard, hash, key, is_full);
        }
      } else {
        erase_slot(shard, *slot);
      }
      return result;
    }
    return update_absent(shard, key, hash, fn, is_full);
  }

 public:
  /// Runs `fn(const State&)` under the key's lock, on `State{}` when the key is absent.
  template <class Fn>
  auto read(std::string_view key, std::uint64_t hash, Fn&& fn) {
    std::lock_guard guard(lock_of(hash));
    return read_locked(key, hash, fn);
  }

  /// `read` for a caller that holds `lock_of(hash)`.
  template <class Fn>
  auto read_locked(std::string_view key, std::uint64_t hash, Fn&& fn) {
    Shard& shard = shard_for(hash);
    if (const Slot* slot = shard.table.find(hash, key)) return fn(slot->state);
    static const State absent{};
    return fn(absent);
  }

  /// Forgets the key; returns whether it was present.
  bool erase(std::string_view key, std::uint64_t hash) {
    Shard& shard = shard_for(hash);
    std::lock_guard guard(shard.lock);
    Slot* slot = shard.table.find(hash, key);
    if (slot == nullptr) return false;
    shard.table.erase(*slot);
    return true;
  }

  /// Removes every key for which `is_full(state)` holds and shrinks mostly empty tables.
  /// Locks one shard at a time. Returns the number of keys removed.
  template <class IsFull>
  std::size_t sweep(IsFull&& is_full) {
    std::size_t removed = 0;
    for (std::size_t i = 0; i < shard_count_; ++i) {
      Shard& shard = shards_[i];
      std::lock_guard guard(shard.lock);
      for (std::size_t j = 0; j < shard.table.capacity();) {
        Slot& slot = shard.table.at(j);
        if (!slot.empty() && is_full(std::as_const(slot.state))) {
          shard.table.erase(j);  // a later slot may shift into j: look at j again
          ++removed;
        } else {
          ++j;
        }
      }
      shard.table.shrink_to_fit();
      publish_slots(shard);
    }
    return removed;
  }

  /// Holds every shard's lock at once (taken in ascending address order, the global lock order of joint
  /// checks), calls `fn(state)` for every key, then `done()`, and releases them: no check runs meanwhile,
  /// so every check sees the states and whatever `done` changes either all before or all after. `fn`
  /// must not change a state's heap bytes. Thread-safe.
  template <class Fn, class Done>
  void transform_all(Fn&& fn, Done&& done) {
    for (std::size_t i = 0; i < shard_count_; ++i) shards_[i].lock.lock();
    struct Unlock {
      ShardedStore& store;
      ~Unlock() {
        for (std::size_t i = store.shard_count_; i > 0; --i) store.shards_[i - 1].lock.unlock();
      }
    } unlock{*this};
    for (std::size_t i = 0; i < shard_count_; ++i) {
      Table& table = shards_[i].table;
      for (std::size_t j = 0; j < table.capacity(); ++j) {
        if (Slot& slot = table.at(j); !slot.empty()) fn(slot.state);
      }
    }
    done();
  }

  /// Keys held now (a snapshot; other threads may change it at once).
  [[nodiscard]] std::size_t size() const {
    return sum([](const Shard& s) { return s.table.size(); });
  }
  /// Keys evicted so far, at the cap or over the byte budget, that were not full (their usage is lost);
  /// a full key evicted loses nothing and is not counted.
  [[nodiscard]] std::size_t evictions() const {
    return sum([](const Shard& s) { return s.evictions; });
  }
  /// Bytes held by the tables: slots, touch stamps, long keys and the states' own heap blocks (sliding
  /// window logs). A running count: O(shards).
  [[nodiscard]] std::size_t table_bytes() const {
    return sum([](const Shard& s) { return s.table.bytes(); });
  }
  /// `table_bytes()` recomputed from every slot, O(keys): a check of the running count.
  [[nodiscard]] std::size_t recount_table_bytes() const {
    return sum([](const Shard& s) { return s.table.recount_bytes(); });
  }
  [[nodiscard]] std::size_t shard_count() const noexcept { return shard_count_; }
  /// The mean distance of the keys from their home slots over all shards: how long probes are. O(keys),
  /// locks one shard at a time; for tests and diagnostics.
  [[nodiscard]] double mean_displacement() const {
    double total = 0;
    std::size_t keys = 0;
    for (std::size_t i = 0; i < shard_count_; ++i) {
      std::lock_guard guard(shards_[i].lock);
      total += shards_[i].table.mean_displacement() * static_cast<double>(shards_[i].table.size());
      keys += shards_[i].table.size();
    }
    return keys == 0 ? 0.0 : total / static_cast<double>(keys);
  }
  /// The index of the shard that holds `hash`, in [0, shard_count()).
  [[nodiscard]] std::size_t shard_index(std::uint64_t hash) const noexcept {
    return shard_shift_ == 0 ? 0 : static_cast<std::size_t>(hash >> shard_shift_);
  }

  /// Advances every shard's touch sequence by `n`, at most to 2^32 - 1 (for tests of its wrap-around).
  /// Thread-safe.
  void skip_touches(std::uint32_t n) {
    for (std::size_t i = 0; i < shard_count_; ++i) {
      std::lock_guard guard(shards_[i].lock);
      std::uint32_t& touches = shards_[i].touches;
      touches = n > UINT32_MAX - touches ? UINT32_MAX : touches + n;
    }
  }

 private:
  /// A cache line: shards are aligned to it (no false sharing), and `prefetch` loads whole lines.
  static constexpr std::size_t kLineBytes = 64;

  struct alignas(kLineBytes) Shard {
    mutable SpinLock lock;
    Table table;
    std::size_t evictions = 0;
    std::size_t state_budget = SIZE_MAX;  // this shard's share of the states' heap bytes
    std::size_t trim_cursor = 0;
    std::uint32_t touches = 0;  // stamp of the latest touch
    // Where the table's slots are, for `prefetch` outside the lock: written under it, read relaxed.
    std::atomic<std::uintptr_t> slots_at{0};
    std::atomic<std::size_t> slots_capacity{0};
  };

  /// Tables from this many slots (48 KiB of 48-byte slots, past a first-level cache) are prefetched.
  static constexpr std::size_t kPrefetchFromSlots = 1024;
  /// Slots from the home that `prefetch` loads. Slots (48 to 72 bytes) are not line-aligned, so the home slot
  /// itself often spans two lines, and at the table's load (0.7 to 0.875) a probe often reads the slots after
  /// it. With the home slot's first line alone, `allow_many` over 1,000,000 keys took 1.5 to 1.8 times as long
  /// (the other lines missed one after another); a fifth slot was slower again in one run (more bandwidth).
  static constexpr std::size_t kPrefetchSlots = 4;

  /// Records where the shard's slots are now (after an insertion or a sweep, which may move them).
  void publish_slots(Shard& shard) noexcept {
    const auto at = reinterpret_cast<std::uintptr_t>(shard.table.data());
    if (shard.slots_at.load(std::memory_order_relaxed) != at) shard.slots_at.store(at, std::memory_order_relaxed);
    if (shard.slots_capacity.load(std::memory_order_relaxed) != shard.table.capacity()) {
      shard.slots_capacity.store(shard.table.capacity(), std::memory_order_relaxed);
      if (shard.table.capacity() >= kPrefetchFromSlots && !prefetching()) {
        prefetching_.store(true, std::memory_order_relaxed);
      }
    }
  }

  /// The home of `hash` under the capacity last published for `shard` (read without its lock: it may be stale).
  static typename Table::Home published_home(const Shard& shard, std::uint64_t hash) noexcept {
    const std::size_t capacity = shard.slots_capacity.load(std::memory_order_relaxed);
    return {capacity, Table::home_in(hash, capacity)};
  }

  /// `update_locked` of a key that is not present: out of line, so that the check of a present key (the
  /// hot path, which the limiter flattens into one function) stays small.
  template <class Fn, class IsFull>
  [[gnu::noinline]] auto update_absent(Shard& shard, std::string_view key, std::uint64_t hash, Fn& fn,
                                       IsFull& is_full) {
    State fresh{};
    auto [result, keep] = fn(fresh, false);
    if (keep) {
      Slot* slot = nullptr;
      if (shard.table.size() < shard.table.max_size()) {
        if (shard.table.at_growth()) reclaim_before_growth(shard, is_full);
        slot = &shard.table.insert(hash, key, next_stamp(shard));
      } else {
        const std::size_t victim = lru_victim(shard, hash);
        const bool usage_lost = !is_full(std::as_const(shard.table.at(victim).state));
        slot = &shard.table.replace(victim, hash, key, next_stamp(shard));
        if (usage_lost) ++shard.evictions;
      }
      slot->state = std::move(fresh);
      publish_slots(shard);
      if constexpr (HeapState<State>) {
        shard.table.add_state_bytes(0, state_heap_bytes(std::as_const(slot->state)));
        if (shard.table.state_bytes() > shard.state_budget) [[unlikely]]
          trim_to_budget(shard, hash, key, is_full);
      }
    }
    return result;
  }

  /// Erases a present key that is full again (out of line, as `update_absent`).
  [[gnu::noinline]] static void erase_slot(Shard& shard, Slot& slot) noexcept { shard.table.erase(slot); }

  /// The stamp of a touch happening now: the shard's touch count, so that a later touch always has a
  /// larger stamp, whatever a clock says (many touches share one millisecond; clocks step back). When
  /// the count would pass 2^32 - 1 every stamp is halved, which keeps their order.
  static std::uint32_t next_stamp(Shard& shard) noexcept {
    if (shard.touches == UINT32_MAX) [[unlikely]] {
      shard.table.halve_stamps();
      shard.touches >>= 1;
    }
    return ++shard.touches;
  }

  Shard& shard_for(std::uint64_t hash) noexcept { return shards_[shard_index(hash)]; }

  template <class Field>
  std::size_t sum(Field field) const {
    std::size_t total = 0;
    for (std::size_t i = 0; i < shard_count_; ++i) {
      std::lock_guard guard(shards_[i].lock);
      total += field(shards_[i]);
    }
    return total;
  }

  /// Below the cap, before the table grows: erases every full key of the shard, and grows the table only if
  /// that left it more than 3/4 loaded. So memory follows the keys in use, a key that is full between two
  /// visits (a window rolled over) is updated in place rather than erased and inserted again, and erasures
  /// happen all over the table at once: reclaiming a few slots per insertion, in a band that walks the
  /// table, left it dense just ahead of the band (runs of hundreds of slots for every insertion and
  /// erasure). O(capacity) once per growth point, which lies at least capacity / 8 insertions ahead
  /// afterwards: a few sequential slot reads per insertion.
  template <class IsFull>
  static void reclaim_before_growth(Shard& shard, IsFull& is_full) {
    Table& table = shard.table;
    for (std::size_t j = 0; j < table.capacity();) {
      const Slot& slot = table.at(j);
      if (!slot.empty() && is_full(std::as_const(slot.state))) {
        table.erase(j);  // a later slot may shift into j: look at j again
      } else {
        ++j;
      }
    }
    if (table.size() * 4 > table.capacity() * 3) table.grow();
  }

  /// The least recently used of the first `kEvictionSamples` keys from the incoming key's home slot.
  ///
  /// The sample starts at a uniformly random place (the hash is keyed, so nobody who sends keys can aim
  /// it), next to the slots the failed lookup has just read and `replace` will move; it reads only their
  /// touch stamps (in the slots). A full key is the stale one LRU picks anyway, so the sample does not
  /// judge states.
  /// The smallest stamp is the least recent touch: the key touched last is evicted only from a shard
  /// that holds nothing else.
  static std::size_t lru_victim(Shard& shard, std::uint64_t hash) {
    const std::size_t capacity = shard.table.capacity();
    std::size_t j = shard.table.home_of(hash);
    std::size_t victim = capacity;
    std::uint32_t oldest = UINT32_MAX;
    for (int seen = 0; seen < kEvictionSamples && seen < static_cast<int>(shard.table.size());
         j = j + 1 == capacity ? 0 : j + 1) {
      const std::uint32_t used = shard.table.last_used(j);
      if (used == 0) continue;  // empty
      ++seen;
      if (victim == capacity || used < oldest) {
        victim = j;
        oldest = used;
      }
    }
    return victim;
  }

  /// Evicts keys until the shard's state bytes fit its budget again, never the key just updated (its own
  /// state fits a share by construction). Each victim is the least recently touched of `kEvictionSamples`
  /// keys that hold heap bytes, sampled from a cursor that walks the table; O(samples) per victim when
  /// most keys hold bytes (a held log key always does). Runs only over budget, so the usual check is one
  /// comparison more.
  template <class IsFull>
  [[gnu::noinline]] static void trim_to_budget(Shard& shard, std::uint64_t keep_hash, std::string_view keep_key,
                                               IsFull& is_full) {
    const std::size_t capacity = shard.table.capacity();
    if (shard.trim_cursor >= capacity) shard.trim_cursor = 0;
    while (shard.table.state_bytes() > shard.state_budget) {
      std::size_t victim = capacity;
      std::uint32_t oldest = UINT32_MAX;
      int seen = 0;
      for (std::size_t scanned = 0; scanned < capacity && seen < kEvictionSamples; ++scanned) {
        const std::size_t j = shard.trim_cursor;
        shard.trim_cursor = j + 1 == capacity ? 0 : j + 1;
        const std::uint32_t used = shard.table.last_used(j);
        if (used == 0) continue;  // empty
        const Slot& s = shard.table.at(j);
        if (state_heap_bytes(s.state) == 0 || (s.hash == keep_hash && s.key() == keep_key)) continue;
        ++seen;
        if (victim == capacity || used < oldest) {
          victim = j;
          oldest = used;
        }
      }
      if (victim == capacity) return;  // only the key just updated holds bytes
      if (!is_full(std::as_const(shard.table.at(victim).state))) ++shard.evictions;
      shard.table.erase(victim);
    }
  }

  std::size_t shard_count_;
  int shard_shift_;
  std::unique_ptr<Shard[]> shards_;
  HashSeed seed_;
  std::atomic<bool> prefetching_{false};  // see `prefetching`
};

}  // namespace ratelimit::detail
