#pragma once

/// @file
/// Block-after-exceed: keys that exceeded a limit are denied for a set time, answered from memory.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/detail/key_length.hpp"
#include "ratelimit/memory/sharded_store.hpp"

namespace ratelimit {

/// Keys in a penalty and until when. In process memory even when the limiter is on Redis, so a
/// blocked client costs no backend round trip.
///
/// Bounded like `MemoryLimiter` (a key whose penalty is over is reclaimed; at `max_keys` an
/// approximately least recently blocked key is released early). Thread-safe.
class PenaltyBox {
 public:
  /// `max_keys >= 1`: most keys blocked at once; `max_key_bytes`: longest key. Throws
  /// `std::invalid_argument` naming `PenaltyBox.max_keys` when it is 0.
  explicit PenaltyBox(std::size_t max_keys = 100'000, std::size_t max_key_bytes = 512)
      : max_key_bytes_(max_key_bytes), store_(checked(max_keys), shards(max_keys)) {}

  /// How long `key` stays blocked after `now_ns` (nanoseconds since the clock's epoch); 0 when it is
  /// not blocked; INT64_MAX when the rest of the penalty is longer than that. Thread-safe. Throws
  /// `std::invalid_argument` ("key: ...") for a key longer than `max_key_bytes`.
  [[nodiscard]] std::int64_t blocked_for(std::string_view key, std::int64_t now_ns) {
    check_key(key);
    // Saturating: a penalty until INT64_MAX seen from a negative time is longer than int64 can say.
    return store_.read(key, store_.hash(key), [&](const State& s) {
      return s.until_ns > now_ns ? detail::saturating_sub(s.until_ns, now_ns) : std::int64_t{0};
    });
  }

  /// Blocks `key` until `now_ns + duration_ns`, at most INT64_MAX (extends, never shortens, a running penalty).
  /// `duration_ns >= 1`. Thread-safe. Throws `std::invalid_argument` for a key longer than `max_key_bytes`.
  void block(std::string_view key, std::int64_t now_ns, std::int64_t duration_ns) {
    check_key(key);
    const std::int64_t until = detail::saturating_add(now_ns, duration_ns);
    store_.update(
        key, store_.hash(key),
        [&](State& s, bool) {
          if (until > s.until_ns) s.until_ns = until;
          return std::pair{0, true};
        },
        [&](const State& s) { return s.until_ns <= now_ns; });
  }

  /// Ends `key`'s penalty now. Thread-safe.
  void release(std::string_view key) {
    check_key(key);
    store_.erase(key, store_.hash(key));
  }

  /// Keys held (blocked, or expired and not yet reclaimed). Thread-safe snapshot.
  [[nodiscard]] std::size_t size() const { return store_.size(); }

 private:
  struct State {
    std::int64_t until_ns = detail::kInt64Min;
  };

  static std::size_t checked(std::size_t max_keys) {
    if (max_keys < 1) detail::invalid("PenaltyBox.max_keys", "must be >= 1");
    return max_keys;
  }
  static std::size_t shards(std::size_t max_keys) {
    std::size_t n = 16;
    while (n > 1 && n * 16 > max_keys) n /= 2;
    return n;
  }
  void check_key(std::string_view key) const { detail::check_key_length(key, max_key_bytes_); }

  std::size_t max_key_bytes_;
  detail::ShardedStore<State> store_;
};

}  // namespace ratelimit
