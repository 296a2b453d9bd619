#pragma once

/// @file
/// `detail::EntryLog`: the sliding window log's queue of (time, cost) entries, two inline and the rest in one
/// heap ring.

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

#include "ratelimit/detail/arithmetic.hpp"

namespace ratelimit::detail {

/// One admitted request, or several admitted at the same tick (their costs summed).
struct LogEntry {
  std::int64_t at;    // ticks; never INT64_MIN (the clamped clock never reaches it), which marks an unused entry
  std::int64_t cost;  // units, >= 0
};

/// A queue of entries, oldest first, with the sum of their costs.
///
/// - Up to two entries live inline, in the object itself: a sparse key (one or two requests per window) owns
///   no heap block, so a check of it touches the store's slot only, and its second entry allocates nothing.
/// - From the third on, every entry lives in one heap block used as a ring of power-of-two capacity: a push at
///   the back and a drop at the front move no entry; a full ring doubles. Once allocated the block is kept
///   (a log that empties and grows again allocates nothing) until the log is destroyed or moved from.
/// - `heap_bytes()` is exactly the block's size (0 without one): what the store counts against its budget.
/// Moving leaves the source empty and without a block. Not thread-safe (the store serializes calls).
class EntryLog {
 public:
  EntryLog() noexcept = default;
  EntryLog(const EntryLog& other) : EntryLog() {
    if (other.ring_ == nullptr) {
      local_ = other.local_;
      return;
    }
    ring_ = new LogEntry[other.heap_.mask + 1];
    for (std::size_t i = 0; i < other.heap_.size; ++i) ring_[i] = other[i];
    heap_ = Ring{0, other.heap_.size, other.heap_.mask, other.heap_.total};
  }
  EntryLog(EntryLog&& other) noexcept : EntryLog() { take(other); }
  EntryLog& operator=(const EntryLog& other) {
    if (this != &other) *this = EntryLog(other);
    return *this;
  }
  EntryLog& operator=(EntryLog&& other) noexcept {
    if (this != &other) {
      delete[] ring_;
      ring_ = nullptr;
      take(other);
    }
    return *this;
  }
  ~EntryLog() { delete[] ring_; }

  [[nodiscard]] std::size_t size() const noexcept {
    if (ring_ != nullptr) return heap_.size;
    return static_cast<std::size_t>(local_.entry[0].at != kInt64Min) + (local_.entry[1].at != kInt64Min);
  }
  [[nodiscard]] bool empty() const noexcept {
    return ring_ != nullptr ? heap_.size == 0 : local_.entry[0].at == kInt64Min;
  }
  /// The `i`-th oldest entry; `i < size()`.
  [[nodiscard]] const LogEntry& operator[](std::size_t i) const noexcept {
    return ring_ != nullptr ? ring_[(heap_.head + i) & heap_.mask] : local_.entry[i];
  }
  /// The newest entry; not empty.
  [[nodiscard]] const LogEntry& back() const noexcept { return (*this)[size() - 1]; }
  /// The newest entry's time; `INT64_MIN` when empty.
  [[nodiscard]] std::int64_t newest_at() const noexcept {
    if (ring_ != nullptr) return heap_.size == 0 ? kInt64Min : ring_[(heap_.head + heap_.size - 1) & heap_.mask].at;
    return local_.entry[1].at != kInt64Min ? local_.entry[1].at : local_.entry[0].at;  // an unused one is INT64_MIN
  }

  /// The oldest entries whose time is at most `through`: how many, and the sum of their costs.
  struct Prefix {
    std::size_t count;
    std::int64_t cost;
  };
  [[nodiscard]] Prefix prefix_through(std::int64_t through) const noexcept {
    Prefix p{0, 0};
    if (ring_ != nullptr) {
      const std::size_t head = heap_.head, mask = heap_.mask, size = heap_.size;
      for (; p.count < size; ++p.count) {
        const LogEntry& e = ring_[(head + p.count) & mask];
        if (e.at > through) break;
        p.cost += e.cost;
      }
      return p;
    }
    for (; p.count < 2; ++p.count) {
      const LogEntry& e = local_.entry[p.count];
      if (e.at == kInt64Min || e.at > through) break;
      p.cost += e.cost;
    }
    return p;
  }
  /// The sum of every entry's cost.
  [[nodiscard]] std::int64_t total() const noexcept {
    return ring_ != nullptr ? heap_.total : local_.entry[0].cost + local_.entry[1].cost;
  }
  /// Bytes of the heap block (its whole capacity); 0 while the entries are inline.
  [[nodiscard]] std::size_t heap_bytes() const noexcept {
    return ring_ != nullptr ? (heap_.mask + 1) * sizeof(LogEntry) : 0;
  }

  /// Appends `e` (`e.at` not `INT64_MIN`). Throws `std::bad_alloc` when a block cannot be had; the log is
  /// unchanged then.
  void push_back(LogEntry e) {
    if (ring_ == nullptr) {
      if (local_.entry[0].at == kInt64Min) {
        local_.entry[0] = e;
        return;
      }
      if (local_.entry[1].at == kInt64Min) {
        local_.entry[1] = e;
        return;
      }
      auto* block = new LogEntry[kFirstCapacity]{local_.entry[0], local_.entry[1]};
      const std::int64_t total = local_.entry[0].cost + local_.entry[1].cost;
      ring_ = block;
      heap_ = Ring{0, 2, kFirstCapacity - 1, total};
    } else if (heap_.size > heap_.mask) {
      grow();
    }
    ring_[(heap_.head + heap_.size) & heap_.mask] = e;
    ++heap_.size;
    heap_.total += e.cost;
  }

  /// Takes `cost` (`0 <= cost <= back().cost`) from the newest entry, and drops it when nothing is left.
  void take_from_back(std::int64_t cost) noexcept {
    const std::size_t last = size() - 1;
    LogEntry& newest = mutable_at(last);
    newest.cost -= cost;
    if (ring_ != nullptr) {
      heap_.total -= cost;
      if (newest.cost == 0) --heap_.size;
    } else if (newest.cost == 0) {
      local_.entry[last] = kUnused;
    }
  }

  /// Drops the `count` oldest entries (`count <= size()`), whose costs sum to `cost`.
  void pop_front(std::size_t count, std::int64_t cost) noexcept {
    if (count == 0) return;
    if (ring_ != nullptr) {
      heap_.head = (heap_.head + count) & heap_.mask;
      heap_.size -= count;
      heap_.total -= cost;
    } else {
      local_.entry[0] = count == 1 ? local_.entry[1] : kUnused;
      local_.entry[1] = kUnused;
    }
  }

  /// Drops the `dropped` oldest entries (whose costs sum to `dropped_cost`), then adds `cost` at `at` (not
  /// before any entry's time): into the newest entry left when it is at `at` or holds no units (a cost-0 mark,
  /// which takes `at`), else as a new entry. Throws `std::bad_alloc` when a block cannot be had; the
  /// entries are dropped and nothing is added then.
  void advance(std::size_t dropped, std::int64_t dropped_cost, std::int64_t at, std::int64_t cost) {
    if (ring_ != nullptr) {  // the hot key's case, in one pass over the ring's fields
      Ring& r = heap_;
      if (dropped != 0) {
        r.head = (r.head + dropped) & r.mask;
        r.size -= dropped;
        r.total -= dropped_cost;
      }
      if (r.size != 0) {
        LogEntry& newest = ring_[(r.head + r.size - 1) & r.mask];
        if (newest.at == at || newest.cost == 0) {
          newest = LogEntry{at, newest.cost + cost};
          r.total += cost;
          return;
        }
      }
      if (r.size > r.mask) grow();
      ring_[(r.head + r.size) & r.mask] = LogEntry{at, cost};
      ++r.size;
      r.total += cost;
      return;
    }
    pop_front(dropped, dropped_cost);
    if (!empty()) {
      LogEntry& newest = mutable_at(size() - 1);
      if (newest.at == at || newest.cost == 0) {
        newest = LogEntry{at, newest.cost + cost};
        return;
      }
    }
    push_back(LogEntry{at, cost});
  }

  /// Adds `cost` to the newest entry (not empty) and moves it to `at` (not before its time).
  void add_to_back(std::int64_t at, std::int64_t cost) noexcept {
    LogEntry& newest = mutable_at(size() - 1);
    newest = LogEntry{at, newest.cost + cost};
    if (ring_ != nullptr) heap_.total += cost;
  }

  /// Moves the `i`-th oldest entry to time `at` (`i < size()`; the order of the entries must stay).
  void set_at(std::size_t i, std::int64_t at) noexcept { mutable_at(i).at = at; }

 private:
  static constexpr std::size_t kFirstCapacity = 4;
  static constexpr LogEntry kUnused{kInt64Min, 0};

  struct Local {
    LogEntry entry[2] = {kUnused, kUnused};  // the oldest first; an unused one only after the used ones
  };
  struct Ring {
    std::size_t head;    // index of the oldest entry
    std::size_t size;    // entries held
    std::size_t mask;    // capacity - 1 (a power of two)
    std::int64_t total;  // sum of their costs
  };

  LogEntry& mutable_at(std::size_t i) noexcept {
    return ring_ != nullptr ? ring_[(heap_.head + i) & heap_.mask] : local_.entry[i];
  }

  /// Doubles a full ring, its entries moved to the front of the new block in order.
  void grow() {
    const std::size_t capacity = heap_.mask + 1;
    auto* block = new LogEntry[2 * capacity];
    for (std::size_t i = 0; i < heap_.size; ++i) block[i] = ring_[(heap_.head + i) & heap_.mask];
    delete[] ring_;
    ring_ = block;
    heap_.head = 0;
    heap_.mask = 2 * capacity - 1;
  }

  /// Takes `other`'s entries (and block) into this log, which holds no block; `other` is left empty.
  void take(EntryLog& other) noexcept {
    ring_ = std::exchange(other.ring_, nullptr);
    if (ring_ != nullptr) {
      heap_ = other.heap_;
    } else {
      local_ = other.local_;
    }
    other.local_ = Local{};
  }

  LogEntry* ring_ = nullptr;  // the heap block, or null while the entries are inline
  union {
    Local local_{};  // while ring_ is null
    Ring heap_;      // while ring_ is not
  };
};

}  // namespace ratelimit::detail
