// GCRA divides by the emission interval with a precomputed multiplier (detail::Divider) instead of a hardware
// division: `remaining` is still exactly (tau - backlog after the check) / T as C++ divides, truncated toward
// zero, and 0 for a backlog past tau (a debt, a booking ahead, or a state kept from rules of a larger
// tolerance: `Decision::remaining` is in [0, limit]), for emission intervals from 1 tick to near the horizon
// and bursts from 1 to 2^40.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>

#include <ratelimit/ratelimit.hpp>

namespace {
namespace gcra_arithmetic {  // named: the unity build joins this file with others

using State = ratelimit::Gcra::Rules::State;

// The remaining units as include/ratelimit/README.md "Policy formulas" states them, with a plain division.
std::int64_t reference_remaining(std::int64_t burst, std::int64_t interval, const State& s, std::int64_t t,
                                 std::int64_t cost) {
  const std::int64_t tau = burst * interval;
  const std::int64_t backlog = s.tat > t ? s.tat - t : 0;
  const bool fits = cost <= burst;
  const std::int64_t new_backlog = fits ? backlog + cost * interval : 0;
  const bool allowed = fits && new_backlog <= tau;
  const std::int64_t quotient = (tau - (allowed ? new_backlog : backlog)) / interval;
  return quotient > 0 ? quotient : 0;
}

TEST(GcraArithmetic, RemainingIsTheTruncatedQuotientForEveryBacklog) {
  std::mt19937_64 random(5);
  int past_tau = 0;
  for (int round = 0; round < 200; ++round) {
    const std::int64_t interval =
        1 + static_cast<std::int64_t>(random() % 4 == 0 ? random() % (1ULL << 40) : random() % 1000);
    const std::int64_t burst_bound = (std::int64_t{1} << 58) / interval;  // tau and 4 tau stay in range
    const std::int64_t burst =
        1 + static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(burst_bound < (std::int64_t{1} << 40)
                                                                                ? burst_bound
                                                                                : std::int64_t{1} << 40));
    const ratelimit::Gcra policy{.limit = 1, .period = std::chrono::nanoseconds(interval), .burst = burst};
    const auto rules = policy.rules(1);
    ASSERT_EQ(rules.emission_interval(), interval);
    const std::int64_t tau = rules.tolerance();
    const std::int64_t t = std::int64_t{1} << 60;
    for (int i = 0; i < 200; ++i) {
      // Backlogs from none to 4 tau (past tau only in a state kept from larger rules), around multiples of T.
      const std::int64_t backlog =
          i % 3 == 0 ? static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(4 * tau + 1))
                     : static_cast<std::int64_t>(random() % 9) * tau / 2 + static_cast<std::int64_t>(random() % 3) - 1;
      const State s{.tat = t + backlog, .written = t};
      const std::int64_t cost = static_cast<std::int64_t>(random() % 3);
      const ratelimit::TickDecision d = rules.evaluate(s, t, cost);
      ASSERT_EQ(d.remaining, reference_remaining(burst, interval, s, t, cost))
          << "T " << interval << ", burst " << burst << ", backlog " << backlog << ", cost " << cost;
      past_tau += backlog > tau + interval ? 1 : 0;
    }
  }
  EXPECT_GT(past_tau, 1000);  // backlogs past tau (remaining 0) were compared too
}

}  // namespace gcra_arithmetic
}  // namespace
