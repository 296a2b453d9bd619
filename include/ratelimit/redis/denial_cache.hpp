#pragma once

/// @file
/// The local denial cache of the Redis limiters (README "Denial cache"): after Redis denies cost n with
/// retry_after R, requests of that key with cost >= n are denied in process memory until R has passed, counted
/// from the send (so never longer than Redis would). `Denial` is the rule, kept per key by `LeasedLimiter`
/// beside its lease; `DenialCache` is a bounded, sharded table of them for `RedisLimiter`.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ratelimit/decision.hpp"
#include "ratelimit/detail/siphash.hpp"
#include "ratelimit/redis/abi.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace detail {

/// One key's cached denial: deny cost >= `cost` while the monotonic time is before `until` (ns;
/// `INT64_MAX`: a cost that can never fit). Not thread-safe: its owner's lock guards it.
struct Denial {
  static constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

  std::int64_t until = 0;
  std::int64_t cost = 0;

  /// True when a request of `c` units at `now` is denied by this entry.
  [[nodiscard]] bool denies(std::int64_t c, std::int64_t now) const noexcept {
    return c > 0 && now < until && c >= cost;
  }
  /// True while it denies anything (an idle entry may be dropped otherwise).
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

/// A bounded table of `Denial`s with the decision to repeat, for `RedisLimiter`. At most `max_keys` keys (split
/// over 16 shards); a full shard drops expired entries first, then any one (a dropped denial costs one Redis
/// call, never a wrong answer). Thread-safe: every method may be called from any thread.
class DenialCache {
 public:
  /// `max_keys` >= 1 (validated by the limiter).
  explicit DenialCache(std::size_t max_keys) : per_shard_(max_keys / kShards > 0 ? max_keys / kShards : 1) {
    // Keys come from requests: a keyed hash, seeded per cache, so nobody can aim keys at one bucket or shard.
    std::random_device entropy;
    for (std::uint64_t& k : seed_) k = (std::uint64_t{entropy()} << 32) | entropy();
    for (Shard& s : shards_) s.entries = Map(16, Hash{seed_[0], seed_[1]});
  }

  /// The cached denial of `cost` units of `key` at monotonic `now` (ns), if any: Redis's decision with
  /// `retry_after` the rest of the wait and `reset_after` less the time since Redis answered. `policy` names
  /// the caller's policy now (an id no other policy of the process has): a denial remembered under another
  /// one is void (the limits changed).
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

  /// Remembers Redis's denial `d` of `cost` (>= 1) units of `key`, for a call sent at monotonic `sent` under
  /// `policy` and answered at `now` (ns).
  void remember(std::string_view key, std::int64_t cost, const Decision& d, std::int64_t sent, std::int64_t now,
                std::uint64_t policy = 0) {
    Shard& s = shard_of(key);
    const std::lock_guard lock(s.mutex);
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

  /// Drops `key`'s denial (Redis admitted it, or units came back through this limiter).
  void forget(std::string_view key) {
    if (size_.load(std::memory_order_relaxed) == 0) return;
    Shard& s = shard_of(key);
    const std::lock_guard lock(s.mutex);
    const auto it = s.entries.find(key);
    if (it == s.entries.end()) return;
    s.entries.erase(it);
    size_.fetch_sub(1, std::memory_order_relaxed);
  }

  /// Keys held (a snapshot).
  [[nodiscard]] std::size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::size_t kShards = 16;
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
  };

  Shard& shard_of(std::string_view key) {
    return shards_[(ratelimit::detail::siphash<1, 3>(seed_[1], seed_[0], key) >> 7) % kShards];
  }

  /// Frees at least one slot of a full shard (lock held): expired entries among the first 64, else the first.
  void make_room(Shard& s, std::int64_t now) {
    std::size_t scanned = 0;
    for (auto it = s.entries.begin(); it != s.entries.end() && scanned < 64; ++scanned) {
      if (!it->second.denial.live(now)) {
        it = s.entries.erase(it);
        size_.fetch_sub(1, std::memory_order_relaxed);
      } else {
        ++it;
      }
    }
    if (s.entries.size() >= per_shard_ && !s.entries.empty()) {
      s.entries.erase(s.entries.begin());
      size_.fetch_sub(1, std::memory_order_relaxed);
    }
  }

  std::size_t per_shard_;
  std::uint64_t seed_[2] = {};
  std::array<Shard, kShards> shards_;
  std::atomic<std::size_t> size_{0};
};

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
