#pragma once

/// @file
/// The local denial cache of the Redis limiters (include/ratelimit/redis/README.md "Denial cache"): `Denial` is the
/// rule (kept per key by `LeasedLimiter` beside its lease), `DenialCache` a bounded table of them for `RedisLimiter`.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ratelimit/decision.hpp"
#include "ratelimit/detail/entropy.hpp"
#include "ratelimit/detail/siphash.hpp"
#include "ratelimit/redis/abi.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace detail {

/// One key's cached denial: deny cost >= `cost` while the monotonic time is before `until` (ns; `INT64_MAX`: a cost
/// that never fits), counted from the send (never longer than Redis would). Guarded by its owner's lock.
struct Denial {
  static constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

  std::int64_t until = 0;
  std::int64_t cost = 0;

  [[nodiscard]] bool denies(std::int64_t c, std::int64_t now) const noexcept {
    return c > 0 && now < until && c >= cost;
  }
  /// False once it denies nothing (the entry may then be dropped).
  [[nodiscard]] bool live(std::int64_t now) const noexcept { return now < until; }
  /// Remembers Redis's denial of `c` units with wait `wait_ns` (`kNever` for `never`), sent at `sent`.
  void set(std::int64_t c, std::int64_t wait_ns, std::int64_t sent) noexcept {
    cost = c;
    until = wait_ns == kNever || sent > kNever - wait_ns ? kNever : sent + wait_ns;
  }
  /// The rest of the wait at `now`: `Decision::never` for a cost that never fits.
  [[nodiscard]] std::chrono::nanoseconds retry_after(std::int64_t now) const noexcept {
    return until == kNever ? Decision::never : std::chrono::nanoseconds(until - now);
  }
  void clear() noexcept { until = 0; }
};

/// Erases the entries of a full `map` (lock held) for which `idle(entry)` holds, among its first 64, until fewer
/// than `cap` are left: bounded work per insertion.
template <class Map, class Idle>
void drop_idle(Map& map, std::size_t cap, Idle&& idle) {
  std::size_t scanned = 0;
  for (auto it = map.begin(); it != map.end() && scanned < 64 && map.size() >= cap; ++scanned) {
    it = idle(it->second) ? map.erase(it) : std::next(it);
  }
}

/// A bounded table of `Denial`s with the decision to repeat, for `RedisLimiter`: at most `max_keys` keys over 16
/// shards; a full shard drops an expired entry, else any one (a dropped denial costs a Redis call, never a wrong
/// answer). A call takes its key's `stamp` before it is sent; `invalidate` (a refund or reset returned) moves it
/// on, so a denial sent before is not remembered, whatever order replies come in. Stamps are per hash slot (1,024),
/// so a refund of another key of the slot drops a denial too. Thread-safe.
class DenialCache {
 public:
  using Stamp = std::uint64_t;

  /// `max_keys` >= 1 (validated by the limiter).
  explicit DenialCache(std::size_t max_keys) : per_shard_(max_keys / kShards > 0 ? max_keys / kShards : 1) {
    ratelimit::detail::fill_with_entropy(seed_, 2);  // keys come from requests: nobody may aim them at one shard
    for (Shard& s : shards_) s.entries = Map(16, Hash{seed_[0], seed_[1]});
  }

  /// The cached denial of `cost` units of `key` at monotonic `now` (ns) into `out`, its waits less the time since
  /// Redis answered. A denial remembered under another `policy` id than the caller's is void (the limits changed).
  [[nodiscard]] bool lookup(std::string_view key, std::int64_t cost, std::int64_t now, Decision& out,
                            std::uint64_t policy = 0) {
    if (size_.load(std::memory_order_relaxed) == 0) return false;
    Shard& s = shard_of(key);
    const std::lock_guard lock(s.mutex);
    const auto it = s.entries.find(key);
    if (it == s.entries.end() || it->second.policy != policy || !it->second.denial.denies(cost, now)) return false;
    const Entry& e = it->second;
    out = e.decision;
    out.retry_after = cost > e.decision.limit ? Decision::never : e.denial.retry_after(now);  // never fits
    const auto since = std::chrono::nanoseconds(now - e.at);
    out.reset_after = e.decision.reset_after > since ? e.decision.reset_after - since : std::chrono::nanoseconds(0);
    return true;
  }

  /// `key`'s stamp now: taken before a call of it is sent, given back to `remember`. Lock-free.
  [[nodiscard]] Stamp stamp(std::string_view key) const noexcept {
    const std::uint64_t h = hash_of(key);
    return shards_[shard_index(h)].stamps[stamp_index(h)].load(std::memory_order_acquire);
  }

  /// Remembers Redis's denial `d` of `cost` (>= 1) units of `key`, sent at monotonic `sent` under `policy` with
  /// stamp `sent_stamp`, answered at `now` (ns); nothing when the key was invalidated since the send.
  void remember(std::string_view key, std::int64_t cost, const Decision& d, std::int64_t sent, std::int64_t now,
                std::uint64_t policy = 0, Stamp sent_stamp = 0) {
    const std::uint64_t h = hash_of(key);
    Shard& s = shards_[shard_index(h)];
    const std::lock_guard lock(s.mutex);
    if (s.stamps[stamp_index(h)].load(std::memory_order_relaxed) != sent_stamp) return;
    auto it = s.entries.find(key);
    if (it == s.entries.end()) {
      if (s.entries.size() >= per_shard_) make_room(s, now);
      it = s.entries.emplace(std::string(key), Entry{}).first;
      size_.fetch_add(1, std::memory_order_relaxed);
    }
    Entry& e = it->second;
    e.denial.set(cost, d.retry_after == Decision::never ? Denial::kNever : d.retry_after.count(), sent);
    e.decision = d;
    e.at = now;
    e.policy = policy;
  }

  /// Drops `key`'s denial (Redis admitted it: a denial of a call sent before stays true).
  void forget(std::string_view key) {
    if (size_.load(std::memory_order_relaxed) == 0) return;
    Shard& s = shard_of(key);
    const std::lock_guard lock(s.mutex);
    erase(s, key);
  }

  /// Drops `key`'s denial and every one of a call sent before now (a refund or reset of the key returned).
  void invalidate(std::string_view key) {
    const std::uint64_t h = hash_of(key);
    Shard& s = shards_[shard_index(h)];
    const std::lock_guard lock(s.mutex);
    s.stamps[stamp_index(h)].fetch_add(1, std::memory_order_release);
    erase(s, key);
  }

  /// `invalidate` for every key (the policy changed).
  void invalidate_all() {
    for (Shard& s : shards_) {
      const std::lock_guard lock(s.mutex);
      for (std::atomic<Stamp>& stamp : s.stamps) stamp.fetch_add(1, std::memory_order_release);
      size_.fetch_sub(s.entries.size(), std::memory_order_relaxed);
      s.entries.clear();
    }
  }

  /// Keys held (a snapshot).
  [[nodiscard]] std::size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::size_t kShards = 16;
  static constexpr std::size_t kStampsPerShard = 64;
  struct Entry {
    Denial denial;
    Decision decision{};
    std::int64_t at = 0;       // monotonic ns of Redis's answer
    std::uint64_t policy = 0;  // what the call was sent under (a lookup under another policy misses)
  };
  struct Hash {
    using is_transparent = void;
    Hash() noexcept : Hash(0, 0) {}
    Hash(std::uint64_t a, std::uint64_t b) noexcept : k0(a), k1(b) {}
    std::uint64_t k0, k1;
    std::size_t operator()(std::string_view k) const noexcept {
      return static_cast<std::size_t>(ratelimit::detail::siphash<1, 3>(k0, k1, k));
    }
  };
  using Map = std::unordered_map<std::string, Entry, Hash, std::equal_to<>>;
  struct Shard {
    std::mutex mutex;
    Map entries;
    std::array<std::atomic<Stamp>, kStampsPerShard> stamps{};  // moved on under mutex
  };

  [[nodiscard]] std::uint64_t hash_of(std::string_view key) const noexcept {
    return ratelimit::detail::siphash<1, 3>(seed_[1], seed_[0], key);
  }
  static std::size_t shard_index(std::uint64_t h) noexcept { return (h >> 7) % kShards; }
  static std::size_t stamp_index(std::uint64_t h) noexcept { return (h >> 11) % kStampsPerShard; }
  Shard& shard_of(std::string_view key) { return shards_[shard_index(hash_of(key))]; }

  /// Drops `key`'s entry (lock held).
  void erase(Shard& s, std::string_view key) {
    const auto it = s.entries.find(key);
    if (it == s.entries.end()) return;
    s.entries.erase(it);
    size_.fetch_sub(1, std::memory_order_relaxed);
  }

  /// Frees a slot of a full shard (lock held): an expired entry, else the first.
  void make_room(Shard& s, std::int64_t now) {
    const std::size_t before = s.entries.size();
    drop_idle(s.entries, per_shard_, [now](const Entry& e) { return !e.denial.live(now); });
    if (s.entries.size() >= per_shard_ && !s.entries.empty()) s.entries.erase(s.entries.begin());
    size_.fetch_sub(before - s.entries.size(), std::memory_order_relaxed);
  }

  std::size_t per_shard_;
  std::uint64_t seed_[2] = {};
  std::array<Shard, kShards> shards_;
  std::atomic<std::size_t> size_{0};
};

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
