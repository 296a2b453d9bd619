// What bench_memory and bench_instructions share: the key stream and the policies' parameters of each case.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <ratelimit/ratelimit.hpp>

namespace bench {

using namespace std::chrono_literals;

inline constexpr std::size_t kManyKeys = 1'000'000;
inline constexpr std::size_t kKeyBytes = 16;

/// `count` distinct 16-byte keys, stored in a shuffled visiting order: the stream a server sees, one key
/// after another, each read from memory that was just written (a request buffer), not looked up at random.
/// Every pass visits every key once, in the same order.
struct KeyStream {
  std::string bytes;

  explicit KeyStream(std::size_t count, std::uint64_t seed = 1) : bytes(count * kKeyBytes, '\0') {
    std::mt19937_64 random(seed);
    std::vector<std::uint32_t> order(count);
    for (std::size_t i = 0; i < count; ++i) order[i] = static_cast<std::uint32_t>(i);
    std::shuffle(order.begin(), order.end(), random);
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint64_t tail = random();
      std::memcpy(&bytes[i * kKeyBytes], &order[i], sizeof order[i]);  // the index keeps every key distinct
      std::memcpy(&bytes[i * kKeyBytes + sizeof order[i]], &tail, sizeof tail);
      std::memcpy(&bytes[i * kKeyBytes + sizeof order[i] + sizeof tail], "-key", 4);
    }
  }
  [[nodiscard]] std::size_t size() const { return bytes.size() / kKeyBytes; }
  [[nodiscard]] std::string_view key(std::size_t i) const { return {bytes.data() + i * kKeyBytes, kKeyBytes}; }
  /// The key at position `i` of the endless stream; advances `i`.
  [[nodiscard]] std::string_view next(std::size_t& i) const {
    if (i == size()) i = 0;
    return key(i++);
  }
};

/// Parameters that admit every check at full speed (so the admitting path is measured).
template <class P>
P generous();
template <>
inline ratelimit::Gcra generous() {
  return {.limit = 1'000'000'000, .period = 1s, .burst = 1'000'000'000};
}
template <>
inline ratelimit::TokenBucket generous() {
  return {.capacity = 1'000'000'000, .refill_tokens = 1'000'000'000, .refill_period = 1s};
}
template <>
inline ratelimit::FixedWindow generous() {
  return {.limit = 1'000'000'000'000, .window = 1s};
}
template <>
inline ratelimit::SlidingWindowCounter generous() {
  return {.limit = 1'000'000'000'000, .window = 1s};
}
// A log keeps one entry per admitted tick; a short window keeps it bounded at full speed.
template <>
inline ratelimit::SlidingWindowLog generous() {
  return {.limit = 1'000'000, .window = 10us};
}

/// Parameters under which each of 1,000,000 keys stays present (not full, so not reclaimed) for a day after a
/// check and is never denied within a benchmark: what is measured is a check of a present key. GCRA and the
/// bucket take a day to give back one unit (with 1000 per day a key was full again 86.4 s after its check, so
/// a refunded key of a run longer than that was erased). The windows are 1000 days long: they are aligned to
/// the clock's epoch (boot, for `steady_clock`), and a 24 h window rolled over at every day of uptime, in the
/// middle of whatever run was going on then.
template <class P>
P many_key_policy();
template <>
inline ratelimit::Gcra many_key_policy() {
  return {.limit = 1, .period = 24h, .burst = 1000};
}
template <>
inline ratelimit::TokenBucket many_key_policy() {
  return {.capacity = 1000, .refill_tokens = 1, .refill_period = 24h};
}
template <>
inline ratelimit::FixedWindow many_key_policy() {
  return {.limit = 1000, .window = 1000 * 24h};
}
template <>
inline ratelimit::SlidingWindowCounter many_key_policy() {
  return {.limit = 1000, .window = 1000 * 24h};
}
template <>
inline ratelimit::SlidingWindowLog many_key_policy() {
  return {.limit = 1000, .window = 24h};
}

}  // namespace bench
