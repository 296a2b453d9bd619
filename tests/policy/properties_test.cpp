// Properties every decision must have (include/ratelimit/README.md "Decisions", "Policy formulas" and "Guarantees"),
// checked on random traffic: no drift, token bucket == GCRA, rate bounds, and the meaning of each Decision field
// (remaining, retry_after and reset_after are exact: the shortest wait, the largest count).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <ratelimit/ratelimit.hpp>

#include "../support/extremes.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;
using ratelimit::TickDecision;
__extension__ typedef __int128 i128;

using ratelimit_test::uniform;

ManualClock::time_point at(std::int64_t ns) { return ManualClock::time_point(std::chrono::nanoseconds(ns)); }

/// Takes every request `limiter` admits now (cost 1 until denied); returns how many.
template <class L>
std::int64_t drain(L& limiter, std::string_view key) {
  std::int64_t taken = 0;
  while (limiter.allow(key).allowed) ++taken;
  return taken;
}

// ---------------------------------------------------------------------------------------------------
// No drift (include/ratelimit/README.md "Guarantees"): polled every few ns or once in a long while, a bucket admits the
// same, and exactly C + floor(t / T) by time t when it is drained from t = 0 and never refills to full.

template <ratelimit::Policy P>
void expect_no_drift(P policy, std::int64_t capacity, std::int64_t T, std::int64_t fine_step, std::int64_t coarse_step,
                     std::int64_t end) {
  ASSERT_EQ(end % fine_step, 0);
  ASSERT_EQ(end % coarse_step, 0);
  ASSERT_LT(coarse_step / T, capacity) << "the coarse poller must never find the bucket full";
  ManualClock fine_clock, coarse_clock;
  MemoryLimiter<P, ManualClock> fine(policy, {}, fine_clock);
  MemoryLimiter<P, ManualClock> coarse(policy, {}, coarse_clock);
  std::int64_t fine_total = 0, coarse_total = 0;
  for (std::int64_t t = 0; t <= end; t += fine_step) {
    fine_clock.set(at(t));
    fine_total += drain(fine, "k");
  }
  for (std::int64_t t = 0; t <= end; t += coarse_step) {
    coarse_clock.set(at(t));
    coarse_total += drain(coarse, "k");
  }
  EXPECT_EQ(fine_total, capacity + end / T);
  EXPECT_EQ(coarse_total, capacity + end / T);
}

TEST(NoDrift, TokenBucketPolledEveryFewNanosecondsOrRarely) {
  // T = 1000 ns: 3 ms polled every 7 ns (~430k polls) or every 30 us.
  expect_no_drift(ratelimit::TokenBucket{.capacity = 100, .refill_tokens = 1, .refill_period = 1000ns}, 100, 1000, 7,
                  30'000, 3'150'000);
  // T = ceil(1000/3) = 334 ns: ceil matters, a float bucket would drift here.
  expect_no_drift(ratelimit::TokenBucket{.capacity = 100, .refill_tokens = 3, .refill_period = 1000ns}, 100, 334, 7,
                  30'000, 3'150'000);
}

TEST(NoDrift, TokenBucketPolledEveryNanosecond) {
  expect_no_drift(ratelimit::TokenBucket{.capacity = 10, .refill_tokens = 7, .refill_period = 1000ns}, 10, 143, 1,
                  1'000, 200'000);
}

TEST(NoDrift, GcraPolledEveryFewNanosecondsOrRarely) {
  expect_no_drift(ratelimit::Gcra{.limit = 3, .period = 1000ns, .burst = 50}, 50, 334, 7, 14'000, 2'100'000);
}

// T = ceil(P / L) (include/ratelimit/README.md "Policy formulas"): 3 per 10 ns is T = 4 ns, never 3 ns (which would
// exceed the rate). Hand-worked: B = 2 at t = 0 (TAT 8), then one at t = 4 and t = 8: 4 admitted in [0, 10].
TEST(Ceiling, EmissionIntervalIsRoundedUp) {
  ManualClock clock;
  MemoryLimiter<ratelimit::Gcra, ManualClock> gcra({.limit = 3, .period = 10ns, .burst = 2}, {}, clock);
  MemoryLimiter<ratelimit::TokenBucket, ManualClock> bucket({.capacity = 2, .refill_tokens = 3, .refill_period = 10ns},
                                                            {}, clock);
  EXPECT_EQ(gcra.allow("k", 2), (Decision{true, 2, 0, 0ns, 8ns}));
  EXPECT_EQ(gcra.allow("k"), (Decision{false, 2, 0, 4ns, 8ns}));
  std::int64_t gcra_total = 2, bucket_total = drain(bucket, "k");
  std::vector<std::int64_t> admitted_at;
  for (std::int64_t t = 1; t <= 10; ++t) {
    clock.set(at(t));
    const std::int64_t n = drain(gcra, "k");
    gcra_total += n;
    if (n > 0) admitted_at.push_back(t);
    bucket_total += drain(bucket, "k");
  }
  EXPECT_EQ(admitted_at, (std::vector<std::int64_t>{4, 8}));
  EXPECT_EQ(gcra_total, 4);
  EXPECT_EQ(bucket_total, 4);
}

// ---------------------------------------------------------------------------------------------------
// TokenBucket{C, R, P} decides exactly as Gcra{R, P, C} (include/ratelimit/README.md "Policy formulas"), field by
// field.

TEST(Equivalence, TokenBucketDecidesAsGcra) {
  struct Params {
    std::int64_t capacity, refill_tokens, refill_period;
  };
  for (const Params p : {Params{5, 3, 10}, Params{1, 1, 7}, Params{10, 7, 1000}, Params{100, 1000, 999'983}}) {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE(::testing::Message() << "capacity " << p.capacity << " refill " << p.refill_tokens << "/"
                                        << p.refill_period << " seed " << seed);
      std::mt19937_64 rng(seed);
      ManualClock clock;
      MemoryLimiter<ratelimit::TokenBucket, ManualClock> bucket(
          ratelimit::TokenBucket{p.capacity, p.refill_tokens, std::chrono::nanoseconds(p.refill_period)}, {}, clock);
      MemoryLimiter<ratelimit::Gcra, ManualClock> gcra(
          ratelimit::Gcra{p.refill_tokens, std::chrono::nanoseconds(p.refill_period), p.capacity}, {}, clock);
      const std::int64_t T = (p.refill_period + p.refill_tokens - 1) / p.refill_tokens;
      std::int64_t t = 0;
      for (int i = 0; i < 4000; ++i) {
        t += uniform(rng, 0, 3) == 0 ? 0 : uniform(rng, 1, 2 * T);
        if (uniform(rng, 0, 19) == 0) {
          // Steps back too. Either store may already have reclaimed a full key (which forgets its latest
          // write, include/ratelimit/README.md "Forgotten state"), and which ones depends on its random hash key:
          // reclaim every full key in both first, so both step back from the same states.
          bucket.sweep();
          gcra.sweep();
          t -= uniform(rng, 1, 3 * T);
        }
        clock.set(at(t));
        const std::string key(1, static_cast<char>('a' + uniform(rng, 0, 2)));
        if (uniform(rng, 0, 9) == 0) {
          ASSERT_EQ(bucket.peek(key), gcra.peek(key)) << "peek at call " << i;
        } else {
          const std::int64_t cost = uniform(rng, 0, p.capacity + 1);
          ASSERT_EQ(bucket.allow(key, cost), gcra.allow(key, cost)) << "allow at call " << i << " cost " << cost;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Rate bounds on random bursty traffic (monotone time): what each policy promises about admissions.

struct Admission {
  std::int64_t t, cost;
};

template <ratelimit::Policy P>
std::vector<Admission> random_admissions(P policy, std::int64_t limit, std::int64_t scale, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  ManualClock clock;
  MemoryLimiter<P, ManualClock> limiter(policy, {}, clock);
  std::vector<Admission> admitted;
  std::int64_t t = 0;
  for (int i = 0; i < 6000; ++i) {
    const auto step = uniform(rng, 0, 9);
    t += step < 5 ? 0 : (step < 9 ? uniform(rng, 1, scale / 4 + 1) : uniform(rng, 1, 3 * scale));
    clock.set(at(t));
    const std::int64_t cost = uniform(rng, 0, 3) == 0 ? uniform(rng, 1, limit) : 1;
    if (limiter.allow("k", cost).allowed && cost > 0) admitted.push_back({t, cost});
  }
  return admitted;
}

TEST(RateBound, GcraNeverExceedsRate) {
  // Over any [a, b]: admitted <= B + (b - a) * L / P (include/ratelimit/README.md "Policy formulas": T is rounded up so
  // the rate is never exceeded).
  struct Params {
    std::int64_t limit, period, burst;
  };
  for (const Params p : {Params{3, 1000, 5}, Params{7, 1000, 1}, Params{10, 10, 4}, Params{6, 1000, 20}}) {
    const std::int64_t T = (p.period + p.limit - 1) / p.limit;
    const auto admitted = random_admissions(
        ratelimit::Gcra{.limit = p.limit, .period = std::chrono::nanoseconds(p.period), .burst = p.burst}, p.burst,
        p.burst * T, static_cast<std::uint64_t>(p.period + p.burst));
    ASSERT_GT(admitted.size(), 100u);
    for (std::size_t i = 0; i < admitted.size(); ++i) {
      i128 sum = 0;
      for (std::size_t j = i; j < admitted.size(); ++j) {
        sum += admitted[j].cost;
        const i128 span = admitted[j].t - admitted[i].t;
        ASSERT_LE((sum - p.burst) * p.period, span * p.limit)
            << "limit " << p.limit << " period " << p.period << " burst " << p.burst << ": "
            << static_cast<long long>(sum) << " admitted in [" << admitted[i].t << ", " << admitted[j].t << "]";
      }
    }
  }
}

TEST(RateBound, SlidingWindowLogNeverExceedsLimitInAnyWindow) {
  const std::int64_t L = 7, W = 1000;
  const auto admitted = random_admissions(ratelimit::SlidingWindowLog{.limit = L, .window = 1000ns}, L, W, 11);
  ASSERT_GT(admitted.size(), 100u);
  for (std::size_t j = 0; j < admitted.size(); ++j) {  // every window (t_j - W, t_j]
    std::int64_t sum = 0;
    for (std::size_t i = j + 1; i-- > 0 && admitted[i].t > admitted[j].t - W;) sum += admitted[i].cost;
    ASSERT_LE(sum, L) << "window ending at " << admitted[j].t;
  }
}

TEST(RateBound, FixedWindowNeverExceedsLimitInAnAlignedWindow) {
  const std::int64_t L = 7, W = 1000;
  const auto admitted = random_admissions(ratelimit::FixedWindow{.limit = L, .window = 1000ns}, L, W, 12);
  ASSERT_GT(admitted.size(), 100u);
  std::int64_t window = -1, sum = 0;
  for (const auto& a : admitted) {
    if (a.t / W != window) {
      window = a.t / W;
      sum = 0;
    }
    sum += a.cost;
    ASSERT_LE(sum, L) << "window " << window;
  }
}

// ---------------------------------------------------------------------------------------------------
// The meaning of each field (include/ratelimit/README.md "Decisions"), on the policies' pure rules and random states:
// - 0 <= remaining <= limit; remaining == limit exactly when reset_after == 0;
// - cost 0 is allowed; allowed => retry_after == 0; denied => retry_after > 0;
//   retry_after == never exactly when cost > limit; a denial's retry_after <= reset_after;
// - retry_after is the shortest wait: the same request passes at t + retry_after, not one tick earlier;
// - remaining is exact: that many cost-1 requests pass in a row now, one more does not;
// - reset_after is exact: full at t + reset_after, not one tick earlier.
// t is the effective time max(t, latest write) of include/ratelimit/README.md "Guarantees".

template <ratelimit::Policy P>
void check_field_meanings(P policy, std::int64_t scale, std::uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << P::kind << " seed " << seed);
  const auto rules = policy.rules(1);
  using State = ratelimit::StateOf<P>;
  const std::int64_t limit = rules.limit();
  std::mt19937_64 rng(seed);
  State state{};
  std::int64_t t = uniform(rng, 0, scale), written = std::numeric_limits<std::int64_t>::min();
  for (int i = 0; i < 1500; ++i) {
    const auto step = uniform(rng, 0, 9);
    t += step < 4 ? 0 : (step < 8 ? uniform(rng, 1, scale / 3 + 1) : (step < 9 ? uniform(rng, 1, 2 * scale) : -uniform(rng, 1, scale)));
    const std::int64_t cost = uniform(rng, 0, 5) == 0 ? uniform(rng, 0, limit + 2) : 1;
    const State before = state;
    const std::int64_t te = std::max(t, written);
    const TickDecision d = ratelimit::decide(rules, state, t, cost);
    SCOPED_TRACE(::testing::Message() << "call " << i << " t " << t << " (effective " << te << ") cost " << cost);
    if (d.allowed && cost > 0) written = te;

    ASSERT_EQ(d.limit, limit);
    ASSERT_GE(d.remaining, 0);
    ASSERT_LE(d.remaining, limit);
    ASSERT_GE(d.reset_after, 0);
    ASSERT_EQ(d.remaining == limit, d.reset_after == 0);
    ASSERT_TRUE(cost != 0 || d.allowed);
    ASSERT_EQ(d.retry_after == TickDecision::never, cost > limit);
    if (d.allowed) {
      ASSERT_EQ(d.retry_after, 0);
    } else {
      ASSERT_GT(d.retry_after, 0);
      if (cost <= limit) {
        ASSERT_LE(d.retry_after, d.reset_after);
        ASSERT_TRUE(rules.evaluate(before, te + d.retry_after, cost).allowed) << "retry_after too short";
        ASSERT_FALSE(rules.evaluate(before, te + d.retry_after - 1, cost).allowed) << "retry_after too long";
      }
    }
    // remaining, on the state after the decision.
    ASSERT_TRUE(rules.evaluate(state, te, d.remaining).allowed) << "remaining too large";
    if (d.remaining < limit) {
      ASSERT_FALSE(rules.evaluate(state, te, d.remaining + 1).allowed) << "remaining too small";
    }
    if (d.remaining <= 64) {
      State copy = state;
      for (std::int64_t k = 0; k < d.remaining; ++k) ASSERT_TRUE(ratelimit::decide(rules, copy, te, 1).allowed);
      ASSERT_FALSE(ratelimit::decide(rules, copy, te, 1).allowed);
    }
    // reset_after, on the state after the decision.
    const TickDecision at_reset = rules.evaluate(state, te + d.reset_after, 0);
    ASSERT_EQ(at_reset.remaining, limit) << "not full after reset_after";
    ASSERT_EQ(at_reset.reset_after, 0);
    if (d.reset_after > 0) {
      ASSERT_EQ(rules.evaluate(state, te + d.reset_after - 1, 0).reset_after, 1) << "reset_after too long";
      const std::int64_t part = uniform(rng, 0, d.reset_after);
      ASSERT_EQ(rules.evaluate(state, te + part, 0).reset_after, d.reset_after - part);
    }
  }
}

TEST(FieldMeanings, FixedWindow) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    check_field_meanings(ratelimit::FixedWindow{.limit = 5, .window = 1000ns}, 1000, seed);
    check_field_meanings(ratelimit::FixedWindow{.limit = 1, .window = 3ns}, 3, seed);
  }
}

TEST(FieldMeanings, SlidingWindowLog) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    check_field_meanings(ratelimit::SlidingWindowLog{.limit = 6, .window = 1000ns}, 1000, seed);
    check_field_meanings(ratelimit::SlidingWindowLog{.limit = 2, .window = 5ns}, 5, seed);
  }
}

TEST(FieldMeanings, SlidingWindowCounter) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    check_field_meanings(ratelimit::SlidingWindowCounter{.limit = 10, .window = 1000ns}, 1000, seed);
    check_field_meanings(ratelimit::SlidingWindowCounter{.limit = 7, .window = 3ns}, 3, seed);
    check_field_meanings(ratelimit::SlidingWindowCounter{.limit = 3, .window = 1'000'000'007ns}, 1'000'000'007, seed);
  }
}

TEST(FieldMeanings, Gcra) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    check_field_meanings(ratelimit::Gcra{.limit = 3, .period = 1000ns, .burst = 5}, 5 * 334, seed);
    check_field_meanings(ratelimit::Gcra{.limit = 1, .period = 1ns, .burst = 1}, 1, seed);
  }
}

TEST(FieldMeanings, TokenBucket) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    check_field_meanings(ratelimit::TokenBucket{.capacity = 8, .refill_tokens = 3, .refill_period = 10ns}, 32, seed);
  }
}

}  // namespace
