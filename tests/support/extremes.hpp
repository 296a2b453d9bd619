#pragma once

// Values at the edges of the library's integer and duration ranges, and a uniform draw, shared by the
// tests that probe those edges (one definition: the test binaries may be built as unity builds).

#include <chrono>
#include <cstdint>
#include <limits>
#include <random>

namespace ratelimit_test {

inline constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
inline constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
inline constexpr auto kMaxNs = std::chrono::nanoseconds::max();
inline constexpr auto kMinNs = std::chrono::nanoseconds::min();

/// A value drawn uniformly from [lo, hi].
inline std::int64_t uniform(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

}  // namespace ratelimit_test
