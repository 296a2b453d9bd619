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

/// A linear-probing table of (key, state) slots with backward-shift deletion (no tombstones).
///
/// Keys of up to 16 bytes live inside the slot, longer ones in one heap block, so a lookup of a short
/// key touches one slot and no other memory. Not thread-safe: the shard's lock guards it.
/// `hash` must not be 0 (0 marks an empty slot); the store guarantees that.
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
  [[nodiscard]] std::size_t capacity() const noexcept { return mask_ + (slots_ ? 1 : 0); }
  /// Bytes held by slots and long keys (for memory accounting in tests and benchmarks).
  [[nodiscard]] std::size_t bytes() const noexcept { return capacity() * sizeof(Slot) + heap_key_bytes_; }

  [[nodiscard]] Slot* find(std::uint64_t hash, std::string_view key) noexcept {
    if (!slots_) return nullptr;
    for (std::size_t i = hash & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.hash == hash && s.key() == key) return &s;
      if (s.empty()) return nullptr;
    }
  }

  /// Inserts a key that is not present; the caller keeps `size() < max_size()`. Allocates.
  Slot& insert(std::uint64_t hash, std::string_view key) {
    if ((size_ + 1) * 4 > capacity() * 3) rehash(capacity() == 0 ? 8 : capacity() * 2);
    std::size_t i = hash & mask_;
    while (!slots_[i].empty()) i = (i + 1) & mask_;
    Slot& s = slots_[i];
    if (key.size() > kInlineKeyBytes) {
      s.heap_key = new char[key.size()];
      heap_key_bytes_ += key.size();
    }
    std::memcpy(key.size() > kInlineKeyBytes ? s.heap_key : s.inline_key, key.data(), key.size());
    s.key_size = static_cast<std::uint32_t>(key.size());
    s.hash = hash;
    ++size_;
    return s;
  }

  /// Removes the slot at `index` and closes the gap, so probes never need tombstones.
  void erase(std::size_t index) noexcept {
    if (slots_[index].key_size > kInlineKeyBytes) heap_key_bytes_ -= slots_[index].key_size;
    clear_slot(slots_[index]);
    --size_;
    std::size_t hole = index;
    for (std::size_t j = (index + 1) & mask_; !slots_[j].empty(); j = (j + 1) & mask_) {
      const std::size_t home = slots_[j].hash & mask_;
      // Move j into the hole unless its home lies cyclically in (hole, j].
      if (((j - home) & mask_) >= ((j - hole) & mask_)) {
        move_slot(slots_[hole], slots_[j]);
        hole = j;
      }
    }
  }

  void erase(Slot& slot) noexcept { erase(static_cast<std::size_t>(&slot - slots_.get())); }

  [[nodiscard]] Slot& at(std::size_t index) noexcept { return slots_[index]; }

  /// Shrinks the table when it is mostly empty (after sweeps), keeping lookups short and memory bounded.
  void shrink_to_fit() {
    std::size_t target = capacity();
    while (target > 8 && size_ * 8 < target) target /= 2;
    if (target < capacity()) rehash(size_ == 0 ? 0 : target);
  }

 private:
  static void clear_slot(Slot& s) noexcept {
    s.release_key();
    s.hash = 0;
    s.last_used = 0;
    s.state = State{};
  }

  static void move_slot(Slot& to, Slot& from) noexcept {
    to.hash = from.hash;
    to.key_size = from.key_size;
    to.last_used = from.last_used;
    std::memcpy(to.inline_key, from.inline_key, kInlineKeyBytes);  // also copies heap_key
    to.state = std::move(from.state);
    from.key_size = 0;  // ownership of a heap key moved
    clear_slot(from);
  }

  void rehash(std::size_t new_capacity) {
    const std::size_t old_capacity = capacity();
    std::unique_ptr<Slot[]> old = std::move(slots_);
    slots_ = new_capacity == 0 ? nullptr : std::make_unique<Slot[]>(new_capacity);
    mask_ = new_capacity == 0 ? 0 : new_capacity - 1;
    for (std::size_t i = 0; i < old_capacity; ++i) {
      if (old[i].empty()) continue;
      std::size_t j = old[i].hash & mask_;
      while (!slots_[j].empty()) j = (j + 1) & mask_;
      move_slot(slots_[j], old[i]);
    }
  }

  std::unique_ptr<Slot[]> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
  std::size_t max_size_ = 0;
  std::size_t heap_key_bytes_ = 0;
};

}  // namespace ratelimit::detail
