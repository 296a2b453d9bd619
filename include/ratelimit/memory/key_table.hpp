#pragma once

/// @file
/// The flat, open-addressing hash table that holds one shard's keys and states.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <utility>

namespace ratelimit::detail {

/// Whether a policy's state allocates on its own (a sliding window log), reported by `heap_bytes()`.
template <class State>
concept HeapState = requires(const State& s) {
  { s.heap_bytes() } -> std::convertible_to<std::size_t>;
};

/// Heap bytes a state holds beyond its slot; 0 for fixed-size states (checked at compile time).
template <class State>
[[nodiscard]] std::size_t state_heap_bytes(const State& s) noexcept {
  if constexpr (HeapState<State>) {
    return s.heap_bytes();
  } else {
    return 0;
  }
}

/// A Robin Hood hash table of (key, state) slots with backward-shift deletion (no tombstones).
///
/// - Keys of up to 16 bytes live inside the slot, longer ones in one heap block, so a lookup of a short
///   key touches one slot (two adjacent at most) and no other memory.
/// - Robin Hood probing keeps probe sequences short at a high load factor (up to 7/8), and lets a
///   lookup of an absent key stop early: a key flood costs few probes.
/// - Capacity grows by a quarter, not by doubling, and slots map to positions by multiply-shift, so any
///   capacity works: the load stays between 0.7 and 0.875 and memory per key stays close to the slot size.
/// - The stamp of each slot's latest touch (the store's per-shard touch sequence, 0 when empty) lives in the
///   slot's padding: a check of a present key touches the slot's memory only (a separate array of stamps
///   cost one more cache miss per check over many keys), and sampling neighbours for LRU eviction reads the
///   slots the failed lookup has just walked.
/// - Heap bytes of states that allocate (sliding window logs) are kept as a running count: the store adds
///   the change an update makes (`add_state_bytes`), and dropping a slot subtracts its state's bytes.
/// - `replace` evicts one key and inserts another in one step, moving only the slots between the two.
///
/// Not thread-safe: the shard's lock guards it. `hash` and `stamp` must not be 0 (0 marks an empty slot);
/// the store guarantees that.
template <class State>
class KeyTable {
 public:
  static constexpr std::size_t kInlineKeyBytes = 16;

  struct Slot {
    std::uint64_t hash = 0;
    std::uint32_t key_size = 0;
    /// The stamp of the latest touch, 0 when empty; in the slot's padding, so a touch writes the line the
    /// lookup read. Moving a slot's entry leaves it behind: the table moves stamps itself.
    std::uint32_t stamp = 0;
    union {
      char inline_key[kInlineKeyBytes];
      char* heap_key;
    };
    State state{};

    Slot() noexcept : inline_key{} {}
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { release_key(); }

    [[nodiscard]] std::string_view key() const noexcept {
      return {key_size <= kInlineKeyBytes ? inline_key : heap_key, key_size};
    }
    [[nodiscard]] bool empty() const noexcept { return hash == 0; }

    void release_key() noexcept {
      if (key_size > kInlineKeyBytes) delete[] heap_key;
      key_size = 0;
    }
  };

  KeyTable() = default;
  explicit KeyTable(std::size_t max_size) : max_size_(max_size) {}

  /// Most keys this table may hold; the store evicts before inserting past it.
  void set_max_size(std::size_t max_size) noexcept { max_size_ = max_size; }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t max_size() const noexcept { return max_size_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  /// Bytes held by slots (with their touch stamps), long keys and the states' own heap blocks. O(1).
  [[nodiscard]] std::size_t bytes() const noexcept { return capacity_ * sizeof(Slot) + heap_key_bytes_ + state_bytes_; }
  /// Heap bytes held by the states themselves (0 unless `HeapState<State>`). O(1).
  [[nodiscard]] std::size_t state_bytes() const noexcept { return state_bytes_; }
  /// Records that an update changed a held state's heap bytes from `before` to `after`.
  void add_state_bytes(std::size_t before, std::size_t after) noexcept { state_bytes_ = state_bytes_ - before + after; }
  /// `bytes()` recomputed from every slot, O(capacity): a check of the running count.
  [[nodiscard]] std::size_t recount_bytes() const noexcept {
    std::size_t total = capacity_ * sizeof(Slot);
    for (std::size_t i = 0; i < capacity_; ++i) {
      const Slot& s = slots_[i];
      if (s.empty()) continue;
      if (s.key_size > kInlineKeyBytes) total += s.key_size;
      total += state_heap_bytes(s.state);
    }
    return total;
  }

  [[nodiscard]] Slot* find(std::uint64_t hash, std::string_view key) noexcept {
    if (size_ == 0) return nullptr;
    return probe(hash, key, home(hash));
  }

  /// Where a lookup of a hash starts in a table of `capacity` slots: computed ahead, outside the lock, from the
  /// capacity the store published then (`ShardedStore::update`). `Home{}` (capacity 0) never holds.
  struct Home {
    std::size_t capacity = 0;
    std::size_t index = 0;
  };

  /// `find(hash, key)` starting at `at.index` when `at.capacity` is the table's capacity now (the home depends
  /// on the hash and the capacity alone), so that the probe's first load waits for nothing computed under the
  /// lock; otherwise (the table grew or shrank since, or `Home{}`) from the home computed now.
  [[nodiscard]] Slot* find(std::uint64_t hash, std::string_view key, Home at) noexcept {
    if (at.capacity == 0 || at.capacity != capacity_) [[unlikely]]
      return find(hash, key);
    return probe(hash, key, at.index);  // a table that holds no key has only empty slots: the probe stops at once
  }

  /// Whether the next `insert` grows the table (its load would pass 7/8).
  [[nodiscard]] bool at_growth() const noexcept { return (size_ + 1) * 8 > capacity_ * 7; }
  /// Grows the capacity by a quarter (to 8 from empty). Allocates; strong guarantee.
  void grow() { rehash(capacity_ < 8 ? 8 : capacity_ + capacity_ / 4); }

  /// Inserts a key that is not present, touched at `stamp`; the caller keeps `size() < max_size()`.
  /// Allocates (growth, long keys).
  Slot& insert(std::uint64_t hash, std::string_view key, std::uint32_t stamp) {
    if (at_growth()) grow();
    Slot incoming;
    own_key(incoming, hash, key);
    ++size_;
    return slots_[place(incoming, occupied_stamp(stamp))];
  }

  /// Erases the slot at `victim` and inserts a key that is not present, touched at `stamp`: the same
  /// result as `erase(victim)` then `insert`, but when `victim` lies in the run that the new key's probe
  /// walks (eviction samples from the new key's home), only the slots between the two move: no growth,
  /// no shift of the rest of the run. Allocates only for a long key.
  Slot& replace(std::size_t victim, std::uint64_t hash, std::string_view key, std::uint32_t stamp) {
    Slot incoming;
    own_key(incoming, hash, key);
    const std::size_t h = home(hash);
    auto offset = [&](std::size_t i) { return i >= h ? i - h : i + capacity_ - h; };
    // p: where Robin Hood insertion would put the new key, with the victim still present.
    std::size_t p = h;
    for (std::size_t distance = 0; !slots_[p].empty() && distance_of(slots_[p], p) >= distance; ++distance) {
      p = next(p);
    }
    const std::size_t vo = offset(victim), po = offset(p);
    if (vo < po) {
      // The victim comes before p: the slots after it move back one, the new key goes just before p.
      release(victim);
      std::size_t i = victim;
      for (std::size_t j = next(i); j != p; i = j, j = next(j)) move_entry(i, j);
      move_into(i, incoming, occupied_stamp(stamp));
      return slots_[i];
    }
    bool run_unbroken = true;  // no empty slot in [p, victim)
    for (std::size_t i = p; i != victim && run_unbroken; i = next(i)) run_unbroken = !slots_[i].empty();
    if (!run_unbroken) {
      erase(victim);
      ++size_;
      return slots_[place(incoming, occupied_stamp(stamp))];
    }
    // p up to the victim: the slots from p move forward one over the victim, the new key takes p.
    release(victim);
    for (std::size_t i = victim; i != p;) {
      const std::size_t before = i == 0 ? capacity_ - 1 : i - 1;
      move_entry(i, before);
      i = before;
    }
    move_into(p, incoming, occupied_stamp(stamp));
    return slots_[p];
  }

  /// Removes the slot at `index` and shifts the following run back, so probes never need tombstones.
  void erase(std::size_t index) noexcept {
    release(index);
    --size_;
    std::size_t hole = index;
    for (std::size_t j = next(hole); !slots_[j].empty() && distance_of(slots_[j], j) > 0; j = next(j)) {
      move_entry(hole, j);
      hole = j;
    }
  }

  void erase(Slot& slot) noexcept { erase(index_of(slot)); }

  [[nodiscard]] Slot& at(std::size_t index) noexcept { return slots_[index]; }
  [[nodiscard]] std::size_t index_of(const Slot& slot) const noexcept {
    return static_cast<std::size_t>(&slot - slots_.get());
  }

  /// The stamp of the latest touch of slot `index` (as given, >= 1), or 0 when the slot is empty.
  [[nodiscard]] std::uint32_t last_used(std::size_t index) const noexcept { return slots_[index].stamp; }
  /// Records a touch of an occupied slot at `stamp`.
  void touch(Slot& slot, std::uint32_t stamp) noexcept { slot.stamp = occupied_stamp(stamp); }

  /// Halves every stamp (an occupied one stays >= 1): the store's touch sequence wraps around this way,
  /// keeping the order of touches (neighbours may become equal). O(capacity).
  [[gnu::noinline]] void halve_stamps() noexcept {
    for (std::size_t i = 0; i < capacity_; ++i) {
      std::uint32_t& stamp = slots_[i].stamp;
      if (stamp != 0) stamp = stamp > 1 ? stamp >> 1 : 1U;
    }
  }

  /// The mean distance of the keys from their home slots (0 when empty): how long probes are. O(capacity),
  /// for tests and diagnostics.
  [[nodiscard]] double mean_displacement() const noexcept {
    std::size_t total = 0;
    for (std::size_t i = 0; i < capacity_; ++i) {
      if (!slots_[i].empty()) total += distance_of(slots_[i], i);
    }
    return size_ == 0 ? 0.0 : static_cast<double>(total) / static_cast<double>(size_);
  }

  /// The slot where a probe for `hash` starts (its home); capacity() must be > 0.
  [[nodiscard]] std::size_t home_of(std::uint64_t hash) const noexcept { return home(hash); }
  /// The home of `hash` in a table of `capacity` slots (`home_of` without the table).
  [[nodiscard]] static std::size_t home_in(std::uint64_t hash, std::size_t capacity) noexcept {
    __extension__ using u128 = unsigned __int128;
    return static_cast<std::size_t>((u128{hash * 0x9E3779B97F4A7C15ULL} * capacity) >> 64);
  }
  /// The slot array (null when the capacity is 0); it moves when the table grows or shrinks.
  [[nodiscard]] const Slot* data() const noexcept { return slots_.get(); }

  /// Shrinks the table when it is mostly empty (after sweeps), keeping memory bounded by live keys.
  void shrink_to_fit() {
    if (size_ == 0) {
      rehash(0);
    } else if (capacity_ > 8 && size_ * 4 < capacity_) {
      rehash(size_ * 8 / 7 + 1 + size_ / 4);
    }
  }

 private:
  /// The lookup of `find` from slot `i`, the key's home.
  [[nodiscard]] Slot* probe(std::uint64_t hash, std::string_view key, std::size_t i) noexcept {
    for (std::size_t distance = 0;; ++distance) {
      Slot& s = slots_[i];
      // The hash first: it is never 0, so it matches no empty slot, and a present key (the usual
      // check) is found without computing its neighbours' homes.
      if (s.hash == hash && s.key_size == key.size() && same_key(s, key)) return &s;
      // Robin Hood invariant: a resident closer to its home than we are to ours ends our probe.
      if (s.empty() || distance_of(s, i) < distance) return nullptr;
      i = next(i);
    }
  }

  /// Multiply-shift: maps the hash onto [0, capacity) using all of its bits, for any capacity.
  [[nodiscard]] std::size_t home(std::uint64_t hash) const noexcept { return home_in(hash, capacity_); }
  [[nodiscard]] std::size_t next(std::size_t i) const noexcept { return i + 1 == capacity_ ? 0 : i + 1; }
  [[nodiscard]] std::size_t distance_of(const Slot& s, std::size_t i) const noexcept {
    const std::size_t h = home(s.hash);
    return i >= h ? i - h : i + capacity_ - h;
  }

  /// Whether `s` (of `key.size()` bytes) holds `key`; an inline key is compared by fixed-size loads (no
  /// call to memcmp), the two words that cover it overlapping.
  static bool same_key(const Slot& s, std::string_view key) noexcept {
    const std::size_t n = key.size();
    if (n > kInlineKeyBytes) return std::memcmp(s.heap_key, key.data(), n) == 0;
    if (n == 0) return true;  // a default string_view has a null pointer: never read it
    const char* a = s.inline_key;
    const char* b = key.data();
    if (n >= 8)
      return word<std::uint64_t>(a) == word<std::uint64_t>(b) &&
             word<std::uint64_t>(a + n - 8) == word<std::uint64_t>(b + n - 8);
    if (n >= 4)
      return word<std::uint32_t>(a) == word<std::uint32_t>(b) &&
             word<std::uint32_t>(a + n - 4) == word<std::uint32_t>(b + n - 4);
    return a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1];
  }
  template <class Word>
  static Word word(const char* p) noexcept {
    Word w;
    std::memcpy(&w, p, sizeof w);
    return w;
  }

  /// Never 0, which marks an empty slot (the store never passes 0; a stray 0 would lose the slot).
  static constexpr std::uint32_t occupied_stamp(std::uint32_t stamp) noexcept { return stamp == 0 ? 1U : stamp; }

  void own_key(Slot& incoming, std::uint64_t hash, std::string_view key) {
    if (key.size() > kInlineKeyBytes) {
      incoming.heap_key = new char[key.size()];
      heap_key_bytes_ += key.size();
    }
    if (!key.empty()) {  // a default string_view (the empty key) has a null pointer: never read it
      std::memcpy(key.size() > kInlineKeyBytes ? incoming.heap_key : incoming.inline_key, key.data(), key.size());
    }
    incoming.key_size = static_cast<std::uint32_t>(key.size());
    incoming.hash = hash;
  }

  /// Empties slot `index` (its key and state are dropped; the size is the caller's business).
  void release(std::size_t index) noexcept {
    if (slots_[index].key_size > kInlineKeyBytes) heap_key_bytes_ -= slots_[index].key_size;
    if constexpr (HeapState<State>) state_bytes_ -= state_heap_bytes(slots_[index].state);
    clear_slot(slots_[index]);
    slots_[index].stamp = 0;
  }

  /// Moves entry `from` into the empty slot `to`; `from` is left empty.
  void move_entry(std::size_t to, std::size_t from) noexcept {
    move_slot(slots_[to], slots_[from]);
    slots_[to].stamp = std::exchange(slots_[from].stamp, 0U);
  }
  /// Moves an entry held outside the table into the empty slot `to`.
  void move_into(std::size_t to, Slot& from, std::uint32_t stamp) noexcept {
    move_slot(slots_[to], from);
    slots_[to].stamp = stamp;
  }

  /// Robin Hood insertion of an entry that owns its key; returns the index where that entry ended up.
  std::size_t place(Slot& incoming, std::uint32_t stamp) noexcept {
    std::size_t i = home(incoming.hash);
    std::size_t placed = capacity_;
    for (std::size_t distance = 0;; ++distance, i = next(i)) {
      Slot& s = slots_[i];
      if (s.empty()) {
        move_into(i, incoming, stamp);
        return placed != capacity_ ? placed : i;
      }
      const std::size_t resident = distance_of(s, i);
      if (resident < distance) {  // take from the rich: the resident continues the probe
        Slot carried;
        move_slot(carried, s);
        move_slot(s, incoming);
        move_slot(incoming, carried);
        stamp = std::exchange(s.stamp, stamp);
        if (placed == capacity_) placed = i;
        distance = resident;
      }
    }
  }

  static void clear_slot(Slot& s) noexcept {
    s.release_key();
    s.hash = 0;
    s.state = State{};
  }

  /// Moves `from` into the empty `to` and leaves `from` empty.
  static void move_slot(Slot& to, Slot& from) noexcept {
    to.hash = from.hash;
    to.key_size = from.key_size;
    std::memcpy(to.inline_key, from.inline_key, kInlineKeyBytes);  // also copies heap_key
    to.state = std::move(from.state);
    from.key_size = 0;  // ownership of a heap key moved
    clear_slot(from);
  }

  /// Strong guarantee: if the new array cannot be allocated, the table is unchanged.
  void rehash(std::size_t new_capacity) {
    std::unique_ptr<Slot[]> fresh = new_capacity == 0 ? nullptr : std::make_unique<Slot[]>(new_capacity);
    std::unique_ptr<Slot[]> old = std::exchange(slots_, std::move(fresh));
    const std::size_t old_capacity = std::exchange(capacity_, new_capacity);
    for (std::size_t i = 0; i < old_capacity; ++i) {
      if (!old[i].empty()) place(old[i], old[i].stamp);
    }
  }

  std::unique_ptr<Slot[]> slots_;
  std::size_t capacity_ = 0;
  std::size_t size_ = 0;
  std::size_t max_size_ = 0;
  std::size_t heap_key_bytes_ = 0;
  std::size_t state_bytes_ = 0;
};

}  // namespace ratelimit::detail
