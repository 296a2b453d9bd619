#pragma once

/// @file
/// The flat, open-addressing hash table that holds one shard's keys and states.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <utility>

namespace ratelimit::detail {

/// A Robin Hood hash table of (key, state) slots with backward-shift deletion (no tombstones).
///
/// - Keys of up to 16 bytes live inside the slot, longer ones in one heap block, so a lookup of a short
///   key touches one slot (two adjacent at most) and no other memory.
/// - Robin Hood probing keeps probe sequences short at a high load factor (up to 7/8), and lets a
///   lookup of an absent key stop early: a key flood costs few probes.
/// - Capacity grows by a quarter, not by doubling, and slots map to positions by multiply-shift, so any
///   capacity works: the load stays between 0.7 and 0.875 and memory per key stays close to the slot size.
///
/// Not thread-safe: the shard's lock guards it. `hash` must not be 0 (0 marks an empty slot); the store
/// guarantees that.
template <class State>
class KeyTable {
 public:
  static constexpr std::size_t kInlineKeyBytes = 16;

  struct Slot {
    std::uint64_t hash = 0;
    std::uint32_t key_size = 0;
    /// Coarse time of the latest touch (about milliseconds, modulo 2^32), for LRU eviction.
    std::uint32_t last_used = 0;
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
  /// Bytes held by slots and long keys (for memory accounting in tests and benchmarks).
  [[nodiscard]] std::size_t bytes() const noexcept { return capacity_ * sizeof(Slot) + heap_key_bytes_; }

  [[nodiscard]] Slot* find(std::uint64_t hash, std::string_view key) noexcept {
    if (size_ == 0) return nullptr;
    std::size_t i = home(hash);
    for (std::size_t distance = 0;; ++distance) {
      Slot& s = slots_[i];
      // Robin Hood invariant: a resident closer to its home than we are to ours ends our probe.
      if (s.empty() || distance_of(s, i) < distance) return nullptr;
      if (s.hash == hash && s.key() == key) return &s;
      i = next(i);
    }
  }

  /// Inserts a key that is not present; the caller keeps `size() < max_size()`. Allocates.
  Slot& insert(std::uint64_t hash, std::string_view key) {
    if ((size_ + 1) * 8 > capacity_ * 7) rehash(capacity_ < 8 ? 8 : capacity_ + capacity_ / 4);
    Slot incoming;
    if (key.size() > kInlineKeyBytes) {
      incoming.heap_key = new char[key.size()];
      heap_key_bytes_ += key.size();
    }
    std::memcpy(key.size() > kInlineKeyBytes ? incoming.heap_key : incoming.inline_key, key.data(), key.size());
    incoming.key_size = static_cast<std::uint32_t>(key.size());
    incoming.hash = hash;
    ++size_;
    return place(incoming);
  }

  /// Removes the slot at `index` and shifts the following run back, so probes never need tombstones.
  void erase(std::size_t index) noexcept {
    if (slots_[index].key_size > kInlineKeyBytes) heap_key_bytes_ -= slots_[index].key_size;
    clear_slot(slots_[index]);
    --size_;
    std::size_t hole = index;
    for (std::size_t j = next(hole); !slots_[j].empty() && distance_of(slots_[j], j) > 0; j = next(j)) {
      move_slot(slots_[hole], slots_[j]);
      hole = j;
    }
  }

  void erase(Slot& slot) noexcept { erase(static_cast<std::size_t>(&slot - slots_.get())); }

  [[nodiscard]] Slot& at(std::size_t index) noexcept { return slots_[index]; }

  /// Shrinks the table when it is mostly empty (after sweeps), keeping memory bounded by live keys.
  void shrink_to_fit() {
    if (size_ == 0) {
      rehash(0);
    } else if (capacity_ > 8 && size_ * 4 < capacity_) {
      rehash(size_ * 8 / 7 + 1 + size_ / 4);
    }
  }

 private:
  /// Multiply-shift: maps the hash onto [0, capacity) using all of its bits, for any capacity.
  [[nodiscard]] std::size_t home(std::uint64_t hash) const noexcept {
    __extension__ using u128 = unsigned __int128;
    return static_cast<std::size_t>((u128{hash * 0x9E3779B97F4A7C15ULL} * capacity_) >> 64);
  }
  [[nodiscard]] std::size_t next(std::size_t i) const noexcept { return i + 1 == capacity_ ? 0 : i + 1; }
  [[nodiscard]] std::size_t distance_of(const Slot& s, std::size_t i) const noexcept {
    const std::size_t h = home(s.hash);
    return i >= h ? i - h : i + capacity_ - h;
  }

  /// Robin Hood insertion of an entry that owns its key; returns the slot where that entry ended up.
  Slot& place(Slot& incoming) noexcept {
    std::size_t i = home(incoming.hash);
    Slot* placed = nullptr;
    for (std::size_t distance = 0;; ++distance, i = next(i)) {
      Slot& s = slots_[i];
      if (s.empty()) {
        move_slot(s, incoming);
        return placed != nullptr ? *placed : s;
      }
      const std::size_t resident = distance_of(s, i);
      if (resident < distance) {  // take from the rich: the resident continues the probe
        Slot carried;
        move_slot(carried, s);
        move_slot(s, incoming);
        move_slot(incoming, carried);
        if (placed == nullptr) placed = &s;
        distance = resident;
      }
    }
  }

  static void clear_slot(Slot& s) noexcept {
    s.release_key();
    s.hash = 0;
    s.last_used = 0;
    s.state = State{};
  }

  /// Moves `from` into the empty `to` and leaves `from` empty.
  static void move_slot(Slot& to, Slot& from) noexcept {
    to.hash = from.hash;
    to.key_size = from.key_size;
    to.last_used = from.last_used;
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
      if (!old[i].empty()) place(old[i]);
    }
  }

  std::unique_ptr<Slot[]> slots_;
  std::size_t capacity_ = 0;
  std::size_t size_ = 0;
  std::size_t max_size_ = 0;
  std::size_t heap_key_bytes_ = 0;
};

}  // namespace ratelimit::detail
