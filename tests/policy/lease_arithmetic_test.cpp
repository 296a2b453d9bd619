// The lease arithmetic (include/ratelimit/redis/README.md "Budget leases"): the two traps, the worked examples, and a
// randomized fleet whose served units are checked against the policy's bound in every interval.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include <ratelimit/policy/lease.hpp>

using namespace std::chrono_literals;
using ratelimit::lease::FixedWindowLease;
using ratelimit::lease::GcraLease;

namespace {

// T = 100, B = 10 (tau = 1000), in 1 ns ticks for readability of the numbers.
ratelimit::Gcra::Rules rules_t100_b10() { return ratelimit::Gcra{.limit = 1, .period = 100ns, .burst = 10}.rules(1); }

// The most units served in any closed interval [a, a + d] must be <= B + floor(d / T); returns the worst excess.
std::int64_t worst_excess(std::vector<std::int64_t> served, std::int64_t B, std::int64_t T) {
  std::sort(served.begin(), served.end());
  std::int64_t worst = -B;
  for (std::size_t i = 0; i < served.size(); ++i) {
    for (std::size_t j = i; j < served.size(); ++j) {
      const auto count = static_cast<std::int64_t>(j - i + 1);
      worst = std::max(worst, count - (B + (served[j] - served[i]) / T));
    }
  }
  return worst;
}

}  // namespace

TEST(LeaseArithmetic, ReducedToleranceAndLimit) {
  const GcraLease lease(rules_t100_b10(), 400);
  EXPECT_TRUE(lease.leasable());
  EXPECT_EQ(lease.tolerance(), 600);
  EXPECT_EQ(lease.limit(), 6);
}

TEST(LeaseArithmetic, BurstThatCannotCoverALeaseFallsBackToPerRequestChecks) {
  for (const std::int64_t L : {1000, 5000}) {
    const GcraLease lease(rules_t100_b10(), L);
    EXPECT_FALSE(lease.leasable()) << L;
    EXPECT_EQ(lease.lifetime(), 0);
    EXPECT_EQ(lease.tolerance(), 1000);  // the full tolerance: nothing is served late
    EXPECT_EQ(lease.limit(), 10);
  }
}

// Trap (a): with leases outstanding, a per-request check with the full tolerance admits past the bound.
TEST(LeaseArithmetic, TrapA_EveryCheckOfALeasedKeyUsesTheReducedTolerance) {
  const auto rules = rules_t100_b10();
  const GcraLease lease(rules, 400);
  GcraLease::State s;
  const auto p1 = lease.grant(s, 0, 6, 6);  // served at 400
  ASSERT_TRUE(p1.decision.allowed);
  ASSERT_EQ(p1.units, 6);
  // The exact policy's check at 400 on the same TAT: backlog 200, full tolerance: 8 more at 400 -> 14 > 10.
  ratelimit::Gcra::Rules::State full{.tat = s.tat, .written = s.written};
  std::int64_t naive = 0;
  while (rules.decide(full, 400, 1).allowed) ++naive;
  EXPECT_EQ(6 + naive, 14) << "the trap is real";
  // Ours: every check uses tau - L: 4 more, 10 at 400.
  std::int64_t ours = 0;
  while (lease.grant(s, 400, 1, 1).decision.allowed) ++ours;
  EXPECT_EQ(6 + ours, 10);
}

// Trap (b), the worked example: T = 100, B = 10, L = 400. P1 leases 3 at 0, P2 leases 6 at 350 and serves
// them at 740, P1 returns its 3 at 400, P3 leases 6 at 740. A naive refund (TAT -= 3T) admits 12 at 740.
TEST(LeaseArithmetic, TrapB_ReturnsNeverGiveBackBudgetTimeAlreadyRefilled) {
  const GcraLease lease(rules_t100_b10(), 400);
  // Naive: the refund formula of include/ratelimit/README.md "Refunds" applied to the returned units.
  {
    GcraLease::State s;
    ASSERT_EQ(lease.grant(s, 0, 3, 3).units, 3);
    ASSERT_EQ(lease.grant(s, 350, 6, 6).units, 6);
    s.tat = std::max<std::int64_t>(s.tat - 3 * 100, 400);  // TAT = max(TAT - n*T, t)
    EXPECT_EQ(6 + lease.grant(s, 740, 1, 6).units, 12) << "the naive refund admits 12 against a bound of 10";
  }
  GcraLease::State s;
  const auto p1 = lease.grant(s, 0, 3, 3);
  const auto p2 = lease.grant(s, 350, 6, 6);
  ASSERT_EQ(p2.units, 6);
  lease.give_back(s, 400, 3, p1.mark, p1.granted_after);  // P1's slots [0, 300] are in the past: nothing back
  const auto p3 = lease.grant(s, 740, 1, 6);
  std::vector<std::int64_t> served(6, 740);
  served.insert(served.end(), static_cast<std::size_t>(p3.units), 740);
  EXPECT_EQ(p3.units, 3);
  EXPECT_LE(worst_excess(served, 10, 100), 0);
}

// The cap of the trap (b) alone (lower by at most max(0, tat_after_grant - now)) is not enough once two
// leases return: the first return shifts the second lease's slots into the past, and the second then gives back
// budget the time has refilled. 12 served at 600 against a bound of 10 with the cap alone; ours stays exact.
TEST(LeaseArithmetic, TrapB_TwoReturnsCannotShiftLaterGrantsIntoThePast) {
  const GcraLease lease(rules_t100_b10(), 400);
  auto cap_only = [](GcraLease::State& s, std::int64_t t, std::int64_t unused, std::int64_t mark) {
    const std::int64_t a = std::max(s.tat, t);
    const std::int64_t delta = std::min(unused * 100, std::max<std::int64_t>(0, mark - t));
    s.tat = std::max(a - delta, t);
  };
  for (const bool ours : {false, true}) {
    GcraLease::State s;
    const auto p1 = lease.grant(s, 0, 3, 3);
    const auto p2 = lease.grant(s, 0, 3, 3);
    if (ours) lease.give_back(s, 0, 3, p1.mark, p1.granted_after);
    else cap_only(s, 0, 3, p1.mark);
    const auto p3 = lease.grant(s, 200, 1, 6);  // served at 600
    if (ours) lease.give_back(s, 250, 3, p2.mark, p2.granted_after);
    else cap_only(s, 250, 3, p2.mark);
    const auto p4 = lease.grant(s, 250, 1, 6);  // served at 600
    const auto p6 = lease.grant(s, 600, 1, 6);  // served at 600
    const std::int64_t at_600 = p3.units + p4.units + p6.units;
    if (ours) {
      EXPECT_LE(at_600, 10);
    } else {
      EXPECT_EQ(at_600, 12) << "the cap alone over-admits";
    }
  }
}

TEST(LeaseArithmetic, ReturnRightAfterTheGrantRestoresTheState) {
  const GcraLease lease(rules_t100_b10(), 400);
  GcraLease::State s;
  ASSERT_TRUE(lease.grant(s, 0, 1, 1).decision.allowed);
  const auto before = lease.peek(s, 50);
  const auto g = lease.grant(s, 50, 1, 5);
  ASSERT_EQ(g.units, 5);
  lease.give_back(s, 50, 5, g.mark, g.granted_after);
  EXPECT_EQ(lease.peek(s, 50), before);
}

TEST(LeaseArithmetic, DenialNamesTheWaitUntilNeedFits) {
  const GcraLease lease(rules_t100_b10(), 400);
  GcraLease::State s;
  ASSERT_EQ(lease.grant(s, 0, 6, 6).units, 6);
  const auto d = lease.grant(s, 0, 2, 4);
  EXPECT_FALSE(d.decision.allowed);
  EXPECT_EQ(d.units, 0);
  EXPECT_EQ(d.decision.retry_after, 200);
  EXPECT_TRUE(lease.grant(s, 200, 2, 4).decision.allowed);
  const auto never = lease.grant(s, 10'000, 7, 7);
  EXPECT_EQ(never.decision.retry_after, ratelimit::TickDecision::never);
}

// A fleet of processes leasing, serving at random times within the lifetime, returning the rest at random times
// (also late); every served unit is checked against B + floor(d / T) in every interval. Returns the worst excess
// over all seeds; `naive` grants with the full tolerance and returns with the plain refund formula (both traps),
// to show that the check can fail.
std::int64_t random_fleet_excess(bool naive) {
  const auto rules = ratelimit::Gcra{.limit = 1, .period = 10ns, .burst = 40}.rules(1);
  std::int64_t worst = -1'000'000;
  for (std::uint32_t seed = 1; seed <= 30; ++seed) {
    std::mt19937_64 rng(seed);
    const std::int64_t L = 50 + static_cast<std::int64_t>(rng() % 300);
    const GcraLease lease(rules, naive ? 0 : L);
    GcraLease::State s;
    struct Pending {
      std::int64_t due, unused, mark, granted_after;
    };
    std::vector<Pending> returns;
    std::vector<std::int64_t> served;
    std::int64_t now = 0;
    for (int step = 0; step < 400; ++step) {
      now += static_cast<std::int64_t>(rng() % 12);
      std::sort(returns.begin(), returns.end(), [](const Pending& a, const Pending& b) { return a.due < b.due; });
      while (!returns.empty() && returns.front().due <= now) {
        const Pending p = returns.front();
        returns.erase(returns.begin());
        if (naive) {
          const std::int64_t t = std::max(now, s.written);
          if (s.tat > t) s.tat = std::max(s.tat - p.unused * 10, t);
        } else {
          lease.give_back(s, now, p.unused, p.mark, p.granted_after);
        }
      }
      const std::int64_t need = 1 + static_cast<std::int64_t>(rng() % 2);
      const std::int64_t want = need + static_cast<std::int64_t>(rng() % 8);
      const auto g = lease.grant(s, now, need, want);
      if (!g.decision.allowed || g.units == 0) continue;
      const std::int64_t used = need + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(g.units - need + 1));
      // Half the leases serve at the last moment (the worst case of the proof), the others at random times.
      const bool late = rng() % 2 == 0;
      for (std::int64_t u = 0; u < used; ++u) {
        served.push_back(now + (late ? L : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(L + 1))));
      }
      if (used < g.units) {
        const auto due = now + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(2 * L));
        returns.push_back({due, g.units - used, g.mark, g.granted_after});
      }
    }
    const std::int64_t excess = worst_excess(served, 40, 10);
    EXPECT_TRUE(naive || excess <= 0) << "seed " << seed << ", L " << L << ": " << excess << " over the bound";
    // The fleet was limited, not idle: at least half of what the bound allows over the run was served.
    EXPECT_GT(static_cast<std::int64_t>(served.size()) * 2, 40 + now / 10) << "seed " << seed;
    worst = std::max(worst, excess);
  }
  return worst;
}

TEST(LeaseArithmetic, RandomFleetNeverExceedsTheGcraBound) {
  EXPECT_LE(random_fleet_excess(false), 0);
  EXPECT_GT(random_fleet_excess(true), 0) << "naive returns must show up as over the bound here";
}

TEST(LeaseArithmetic, FixedWindowLeaseEndsWithItsWindow) {
  const auto rules = ratelimit::FixedWindow{.limit = 10, .window = 1000ns}.rules(1);
  const FixedWindowLease lease(rules);
  FixedWindowLease::State s;
  const auto g = lease.grant(s, 900, 1, 8);
  EXPECT_EQ(g.units, 8);
  EXPECT_EQ(g.serve_for, 100);
  EXPECT_EQ(g.mark, 0);
  // Returned in the next window: its units are gone with their window; nothing is given to the new window.
  lease.give_back(s, 1000, 8, g.mark);
  EXPECT_EQ(lease.peek(s, 1000).remaining, 10);
  const auto g2 = lease.grant(s, 1000, 1, 10);
  EXPECT_EQ(g2.units, 10);
  lease.give_back(s, 1500, 4, g2.mark);
  EXPECT_EQ(lease.peek(s, 1500).remaining, 4);
  EXPECT_FALSE(lease.grant(s, 1500, 5, 5).decision.allowed);
  EXPECT_EQ(lease.grant(s, 1500, 5, 5).decision.retry_after, 500);
}

TEST(LeaseArithmetic, RandomFleetNeverExceedsTheFixedWindowLimit) {
  const std::int64_t W = 1000;
  const auto rules = ratelimit::FixedWindow{.limit = 25, .window = 1000ns}.rules(1);
  const FixedWindowLease lease(rules);
  std::mt19937_64 rng(7);
  FixedWindowLease::State s;
  std::vector<std::int64_t> served;
  struct Pending {
    std::int64_t due, unused, mark;
  };
  std::vector<Pending> returns;
  std::int64_t now = 0;
  const std::int64_t L = 300;
  for (int step = 0; step < 3000; ++step) {
    now += static_cast<std::int64_t>(rng() % 20);
    for (auto it = returns.begin(); it != returns.end();) {
      if (it->due <= now) {
        lease.give_back(s, now, it->unused, it->mark);
        it = returns.erase(it);
      } else {
        ++it;
      }
    }
    const auto g = lease.grant(s, now, 1, 1 + static_cast<std::int64_t>(rng() % 6));
    if (!g.decision.allowed) continue;
    const std::int64_t until = now + std::min(L, g.serve_for - 1);
    const std::int64_t used = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(g.units));
    for (std::int64_t u = 0; u < used; ++u) {
      served.push_back(now + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(until - now + 1)));
    }
    if (used < g.units) returns.push_back({now + static_cast<std::int64_t>(rng() % 600), g.units - used, g.mark});
  }
  std::vector<std::int64_t> per_window(static_cast<std::size_t>(now / W + 2), 0);
  for (const std::int64_t t : served) ++per_window[static_cast<std::size_t>(t / W)];
  EXPECT_LE(*std::max_element(per_window.begin(), per_window.end()), 25);
  EXPECT_GE(per_window[1], 20);  // busy enough to be limited
}
