// The arithmetic of the comparison table: the traces the policies are fed and what is counted from their
// decisions. Pure functions of integer nanoseconds, so tests can check them against a brute force.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace bench::compare {

__extension__ typedef __int128 i128;  // GCC and Clang on 64-bit targets

/// `floor(a * b / c)` for `a, b, c >= 0`, `c > 0`, without the product's overflow.
inline std::int64_t mul_div(std::int64_t a, std::int64_t b, std::int64_t c) {
  return static_cast<std::int64_t>(static_cast<i128>(a) * b / c);
}

/// Most of the ascending `times` (ns) within any interval `(t - window, t]`: the sliding-interval maximum.
/// Two pointers, O(n). `window > 0`.
inline std::int64_t max_in_interval(const std::vector<std::int64_t>& times, std::int64_t window) {
  std::int64_t best = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < times.size(); ++i) {
    while (times[first] <= times[i] - window) ++first;
    best = std::max(best, static_cast<std::int64_t>(i - first + 1));
  }
  return best;
}

/// `part / whole`, 0 when `whole` is 0.
inline double fraction(std::int64_t part, std::int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

/// The share of `decisions` that admitted.
inline double admitted_fraction(const std::vector<bool>& decisions) {
  return fraction(std::count(decisions.begin(), decisions.end(), true), static_cast<std::int64_t>(decisions.size()));
}

/// The times of the admitted requests of `times` (same length as `decisions`).
inline std::vector<std::int64_t> admitted_times(const std::vector<std::int64_t>& times,
                                                const std::vector<bool>& decisions) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < times.size(); ++i) {
    if (decisions[i]) out.push_back(times[i]);
  }
  return out;
}

/// A client at exactly `limit` per `window` for `windows` windows from `start`: request `i` at
/// `start + floor(i * window / limit)`, so requests `i` and `i + limit` are exactly one window apart and
/// no interval `(t - window, t]` holds more than `limit` of them.
inline std::vector<std::int64_t> steady_trace(std::int64_t limit, std::int64_t window, std::int64_t start,
                                              std::int64_t windows) {
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(limit * windows));
  for (std::int64_t k = 0; k < windows; ++k) {
    for (std::int64_t i = 0; i < limit; ++i) {
      // floor((k*limit + i) * window / limit) without the product's overflow: k*window + floor(i*window/limit).
      out.push_back(start + k * window + mul_div(i, window, limit));
    }
  }
  return out;
}

/// The boundary burst: `count` requests spread over the last 1/100 of the window that ends at `edge`, and
/// `count` more over the first 1/100 of the next; then a flood at 10 times `limit` per window for two
/// windows, from two windows after `edge` (a full state refilled by then).
inline std::vector<std::int64_t> boundary_burst_trace(std::int64_t count, std::int64_t limit, std::int64_t window,
                                                      std::int64_t edge) {
  std::vector<std::int64_t> out;
  const std::int64_t spread = std::max<std::int64_t>(window / 100, 1);
  for (std::int64_t i = 0; i < count; ++i) out.push_back(edge - spread + mul_div(i, spread, count));
  for (std::int64_t i = 0; i < count; ++i) out.push_back(edge + mul_div(i, spread, count));
  const std::int64_t flood_start = edge + 3 * window + window / 2;
  const std::int64_t flood = 20 * limit;
  for (std::int64_t i = 0; i < flood; ++i) {
    out.push_back(flood_start + mul_div(i, 2 * window, flood));
  }
  return out;
}

/// Jain's fairness index of `shares`: `(sum x)^2 / (n * sum x^2)`, 1 when all are equal, 1/n when one
/// takes everything; 1 for no shares or all zero.
inline double jain_index(const std::vector<double>& shares) {
  double sum = 0;
  double squares = 0;
  for (const double x : shares) {
    sum += x;
    squares += x * x;
  }
  return squares > 0 ? sum * sum / (static_cast<double>(shares.size()) * squares) : 1.0;
}

/// One request of a shared-key trace.
struct Arrival {
  std::int64_t at = 0;
  std::uint32_t client = 0;
};

/// `clients` clients, each Poisson at `times_limit * limit / clients` per `window` for `windows` windows
/// (seeded, so every policy sees the same arrivals), in time order.
inline std::vector<Arrival> shared_trace(std::uint32_t clients, double times_limit, std::int64_t limit,
                                         std::int64_t window, std::int64_t windows, std::uint64_t seed) {
  std::vector<Arrival> out;
  const double rate = times_limit * static_cast<double>(limit) / clients / static_cast<double>(window);  // per ns
  const double end = static_cast<double>(window) * static_cast<double>(windows);
  for (std::uint32_t c = 0; c < clients; ++c) {
    std::mt19937_64 random(seed + c);
    std::exponential_distribution<double> gap(rate);
    for (double t = gap(random); t < end; t += gap(random)) out.push_back({static_cast<std::int64_t>(t), c});
  }
  std::stable_sort(out.begin(), out.end(), [](const Arrival& a, const Arrival& b) { return a.at < b.at; });
  return out;
}

}  // namespace bench::compare
