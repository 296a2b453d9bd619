// The fleet simulation at a small size (include/ratelimit/redis/README.md "Budget leases", sizing): no interval over
// the bound.
#include <gtest/gtest.h>

#include "lease_simulation.hpp"

TEST(LeaseSimulation, SmallFleetNeverExceedsTheBound) {
  const auto r = ratelimit_test::simulate(10, 10'000, 2000, 3, 1);
  EXPECT_EQ(r.over_bound_intervals, 0u);
  EXPECT_LE(r.admitted, r.exact_admitted + 20u * 100u);  // never more than the bound allows
  EXPECT_GE(static_cast<double>(r.admitted), 0.8 * static_cast<double>(r.exact_admitted));
  EXPECT_LT(static_cast<double>(r.redis_calls) / static_cast<double>(r.checks), 1.0);
  EXPECT_GT(r.checks, 5000u);
}
