#pragma once

/// @file
/// A bounded, expiring cache of key -> value: plan indices for `TieredLimiter`, resolved overrides for
/// `QuotaOverrides`.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "ratelimit/detail/arithmetic.hpp"

namespace ratelimit::detail {

/// Least-recently-used cache with a time to live: at most `capacity` entries; an entry older than the
/// TTL is a miss. Thread-safe (one mutex; the resolver runs outside it). `V` is copied out under the lock.
template <class V>
class BasicPlanCache {
 public:
  BasicPlanCache(std::size_t capacity, std::int64_t ttl_ns) : capacity_(capacity), ttl_ns_(ttl_ns) {}

  /// The cached value for `key` at `now_ns`, if present and fresh.
  std::optional<V> get(std::string_view key, std::int64_t now_ns) {
    std::lock_guard lock(mutex_);
    auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    // Stale when the clock stepped back or the age reached the TTL. The age saturates (times may be
    // any int64, e.g. a jump from near INT64_MIN to near INT64_MAX), which keeps the comparison exact.
    if (now_ns < it->second.stored_ns || saturating_sub(now_ns, it->second.stored_ns) >= ttl_ns_) {
      const auto position = it->second.position;
      map_.erase(it);  // before the string its key views
      lru_.erase(position);
      return std::nullopt;
    }
    lru_.splice(lru_.begin(), lru_, it->second.position);
    return it->second.value;
  }

  /// How many `erase` calls this cache has seen: read it before resolving a missed key, and give it to `put`.
  [[nodiscard]] std::uint64_t erasures() const {
    std::lock_guard lock(mutex_);
    return erasures_;
  }

  /// Stores `value` for `key` at `now_ns`, evicting the least recently used entry at capacity. Holds
  /// one copy of the key per entry (in the LRU list; the map views it). With `erasures_seen` (what
  /// `erasures()` said before `value` was resolved), stores nothing when an `erase` came since: it may have
  /// been this key's, announcing a change that `value`, resolved before it, may not hold.
  void put(std::string_view key, V value, std::int64_t now_ns, std::optional<std::uint64_t> erasures_seen = {}) {
    std::lock_guard lock(mutex_);
    if (erasures_seen && *erasures_seen != erasures_) return;
    if (auto it = map_.find(key); it != map_.end()) {
      it->second.value = std::move(value);
      it->second.stored_ns = now_ns;
      lru_.splice(lru_.begin(), lru_, it->second.position);
      return;
    }
    if (map_.size() >= capacity_) {
      map_.erase(std::string_view(lru_.back()));  // the map's key views this string: erase it first
      lru_.pop_back();
    }
    lru_.emplace_front(key);
    // The map's key views the list's string (list nodes never move), so each entry holds one copy.
    map_.emplace(std::string_view(lru_.front()), Entry{std::move(value), now_ns, lru_.begin()});
  }

  /// Forgets `key`; a value for it resolved before and stored after is not stored (see `put`). Thread-safe.
  void erase(std::string_view key) {
    std::lock_guard lock(mutex_);
    ++erasures_;  // also when absent: the key's resolution may be under way
    if (auto it = map_.find(key); it != map_.end()) {
      const auto position = it->second.position;
      map_.erase(it);  // before the string its key views
      lru_.erase(position);
    }
  }

  /// Entries held. Thread-safe.
  [[nodiscard]] std::size_t size() const {
    std::lock_guard lock(mutex_);
    return map_.size();
  }

 private:
  struct Entry {
    V value;
    std::int64_t stored_ns;
    std::list<std::string>::iterator position;
  };

  std::size_t capacity_;
  std::int64_t ttl_ns_;
  mutable std::mutex mutex_;
  std::uint64_t erasures_ = 0;                       // erase calls so far (stale entries dropped by `get` do not count)
  std::list<std::string> lru_;                       // most recent first; owns the key strings
  std::unordered_map<std::string_view, Entry> map_;  // keys view the strings in lru_
};

/// The plan cache of `TieredLimiter`: key -> plan index.
using PlanCache = BasicPlanCache<std::size_t>;

}  // namespace ratelimit::detail
