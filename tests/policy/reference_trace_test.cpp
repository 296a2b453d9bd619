// Randomized traces through MemoryLimiter and the reference model (tests/support/reference_model.hpp):
// every field of every call must be equal. Fixed seeds; a failure prints the seed and the call.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <ratelimit/ratelimit.hpp>

#include "../support/reference_model.hpp"
#include "../support/extremes.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::ManualClock;
namespace model = ratelimit_test::model;

using ratelimit_test::kMax;

model::Outcome to_outcome(const ratelimit::Decision& d) {
  return {d.allowed, d.limit, d.remaining,
          d.retry_after == ratelimit::Decision::never ? model::kNever : d.retry_after.count(),
          d.reset_after.count()};
}

std::string show(const model::Outcome& o) {
  std::ostringstream out;
  out << "{allowed " << o.allowed << ", limit " << o.limit << ", remaining " << o.remaining << ", retry "
      << (o.retry_after == model::kNever ? std::string("never") : std::to_string(o.retry_after)) << ", reset "
      << o.reset_after << "}";
  return out.str();
}

/// Shape of the random steps: `scale` is the policy's natural period (W, or tau for GCRA), `edge` the
/// period whose multiples matter (W, or T).
struct Shape {
  std::int64_t limit;
  std::int64_t scale;
  std::int64_t edge;
};

const std::vector<std::string>& key_pool() {
  static const std::vector<std::string> pool = {"",
                                                "a",
                                                std::string("\0", 1),
                                                std::string("a\0b", 3),
                                                "{tag}",
                                                "}{",
                                                "\xff\xfe\x80",
                                                "a-key-longer-than-the-sixteen-inline-bytes",
                                                "apikey:/search"};
  return pool;
}

using ratelimit_test::uniform;

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

std::int64_t random_cost(std::mt19937_64& rng, std::int64_t limit) {
  const auto roll = uniform(rng, 0, 99);
  if (roll < 50) return 1;
  if (roll < 58) return 0;
  if (roll < 83) return uniform(rng, 1, limit);
  if (roll < 90) return limit;
  if (roll < 95 && limit < kMax) return uniform(rng, limit + 1, limit + 1 + std::min(limit, kMax - limit - 1));
  return uniform(rng, 1, std::min<std::int64_t>(limit, 3));
}

/// Runs `ops` random calls on a few keys through a MemoryLimiter of `policy` and through `algo`,
/// comparing every decision. Stops at the first difference.
///
/// The in-memory store may forget a key at any moment once it is full (sweeps, reclaim on touch). That
/// only matters if the clock later steps back below the time it was full: so before every step back
/// both the limiter and the model sweep at the latest time seen, which makes the forgetting identical.
template <ratelimit::Policy P, class Algo>
void run_trace(const P& policy, const Algo& algo, Shape shape, std::uint64_t seed, int ops) {
  SCOPED_TRACE(::testing::Message() << P::kind << " seed " << seed);
  std::mt19937_64 rng(seed);
  ManualClock clock;
  // An unbounded byte budget: the sliding log's limits near kMax fit no other (include/ratelimit/README.md "Bounded
  // memory").
  ratelimit::MemoryLimiter<P, ManualClock> limiter(policy, {.max_bytes = std::numeric_limits<std::size_t>::max()},
                                                   clock);
  model::Keyed<Algo> reference(algo);

  std::vector<std::string> keys = key_pool();
  std::shuffle(keys.begin(), keys.end(), rng);
  keys.resize(static_cast<std::size_t>(uniform(rng, 1, 5)));

  const std::int64_t scale = std::min<std::int64_t>(shape.scale, 1'000'000'000'000);
  const std::int64_t edge = std::min<std::int64_t>(shape.edge, scale);
  std::int64_t t = uniform(rng, -2 * scale, 3 * scale);
  std::int64_t latest = t;
  for (int i = 0; i < ops; ++i) {
    const auto step = uniform(rng, 0, 99);
    if (step < 20) {
      // same instant
    } else if (step < 45) {
      t += uniform(rng, 1, std::max<std::int64_t>(1, scale / 8));
    } else if (step < 60) {
      t += uniform(rng, 1, 2 * scale);
    } else if (step < 70) {
      t = (floor_div(t, edge) + 1) * edge + uniform(rng, -1, 1);  // on, just before or after an edge
    } else if (step < 80) {
      t -= uniform(rng, 1, scale);  // clock steps back
    } else if (step < 85) {
      t += uniform(rng, 2 * scale, 6 * scale);
    } else {
      t += uniform(rng, 1, 3);
    }
    if (t < latest) {
      clock.set(ManualClock::time_point(std::chrono::nanoseconds(latest)));
      limiter.sweep();
      reference.sweep(latest);
    }
    latest = std::max(latest, t);
    clock.set(ManualClock::time_point(std::chrono::nanoseconds(t)));
    const ManualClock::time_point now = clock.now();

    const std::string& key = keys[static_cast<std::size_t>(uniform(rng, 0, static_cast<std::int64_t>(keys.size()) - 1))];
    const auto what = uniform(rng, 0, 99);
    const bool explicit_time = uniform(rng, 0, 1) == 1;
    std::int64_t cost = 1;
    const char* op = "allow";
    model::Outcome expected, actual;
    if (what < 82) {
      cost = random_cost(rng, shape.limit);
      expected = reference.allow(key, t, cost);
      actual = to_outcome(explicit_time ? limiter.allow(key, cost, now) : limiter.allow(key, cost));
    } else if (what < 94) {
      op = "peek";
      expected = reference.peek(key, t);
      actual = to_outcome(explicit_time ? limiter.peek(key, now) : limiter.peek(key));
    } else if (what < 97) {
      reference.reset(key);
      limiter.reset(key);
      continue;
    } else {
      reference.sweep(t);
      limiter.sweep();
      continue;
    }
    if (expected != actual) {
      ADD_FAILURE() << "call " << i << ": " << op << "(" << ::testing::PrintToString(key) << ", cost " << cost
                    << ") at t = " << t << " ns (latest " << latest << ")\n  model:   " << show(expected)
                    << "\n  limiter: " << show(actual);
      return;
    }
  }
}

constexpr std::uint64_t kSeeds[] = {1, 2, 3, 20240601, 0x9E3779B97F4A7C15ULL};
constexpr int kOps = 3000;

template <ratelimit::Policy P, class Algo>
void run_seeds(const P& policy, const Algo& algo, Shape shape) {
  for (const std::uint64_t seed : kSeeds) {
    run_trace(policy, algo, shape, seed, kOps);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(ReferenceTrace, FixedWindow) {
  struct Params {
    std::int64_t limit, window;
  };
  for (const Params p : {Params{5, 1000}, Params{1, 1}, Params{100, 7}, Params{3, 1'000'000'007}, Params{kMax, 50},
                         Params{kMax / 2 + 1, 1000}}) {
    run_seeds(ratelimit::FixedWindow{.limit = p.limit, .window = std::chrono::nanoseconds(p.window)},
              model::FixedWindowModel{p.limit, p.window}, Shape{p.limit, p.window, p.window});
  }
}

TEST(ReferenceTrace, SlidingWindowLog) {
  struct Params {
    std::int64_t limit, window;
  };
  for (const Params p : {Params{5, 1000}, Params{1, 10}, Params{20, 97}, Params{3, 1}, Params{kMax, 100},
                         Params{kMax / 2 + 1, 1000}}) {
    run_seeds(ratelimit::SlidingWindowLog{.limit = p.limit, .window = std::chrono::nanoseconds(p.window)},
              model::SlidingWindowLogModel{p.limit, p.window}, Shape{p.limit, p.window, p.window});
  }
}

TEST(ReferenceTrace, SlidingWindowCounter) {
  struct Params {
    std::int64_t limit, window;
  };
  for (const Params p : {Params{5, 1000}, Params{10, 7}, Params{100, 1'000'003}, Params{1, 3}, Params{7, 2},
                         Params{3, 1'000'000'000}, Params{kMax, 1000}, Params{kMax / 2 + 1, 3}}) {
    run_seeds(ratelimit::SlidingWindowCounter{.limit = p.limit, .window = std::chrono::nanoseconds(p.window)},
              model::SlidingWindowCounterModel{p.limit, p.window}, Shape{p.limit, p.window, p.window});
  }
}

TEST(ReferenceTrace, Gcra) {
  struct Params {
    std::int64_t limit, period, burst;
  };
  // T = ceil(P/L): 4 (10/3), 143 (1000/7), 1, 167 (1000/6), 333'333'334, 333'334 with a huge burst.
  for (const Params p : {Params{3, 10, 5}, Params{7, 1000, 1}, Params{1, 1, 10}, Params{6, 1000, 6},
                         Params{3, 1'000'000'000, 2}, Params{3, 1'000'000, 1'000'000'000}}) {
    const model::GcraModel algo{p.limit, p.period, p.burst};
    const auto T = static_cast<std::int64_t>(algo.T());
    run_seeds(ratelimit::Gcra{.limit = p.limit, .period = std::chrono::nanoseconds(p.period), .burst = p.burst}, algo,
              Shape{p.burst, p.burst * T, T});
  }
}

TEST(ReferenceTrace, TokenBucket) {
  struct Params {
    std::int64_t capacity, refill_tokens, refill_period;
  };
  // T = ceil(P/R): 4 (10/3), 7, 143 (1000/7), 1000 (999'983/1000), 1.
  for (const Params p : {Params{5, 3, 10}, Params{1, 1, 7}, Params{10, 7, 1000}, Params{4, 1000, 999'983},
                         Params{3, 5, 5}, Params{1'000'000'000, 3, 1'000'000}}) {
    const model::TokenBucketModel algo{p.capacity, p.refill_tokens, p.refill_period};
    run_seeds(ratelimit::TokenBucket{.capacity = p.capacity,
                                     .refill_tokens = p.refill_tokens,
                                     .refill_period = std::chrono::nanoseconds(p.refill_period)},
              algo, Shape{p.capacity, p.capacity * algo.T(), algo.T()});
  }
}

// The model itself against hand-worked values, so that a wrong model cannot hide a wrong library.
TEST(ReferenceModel, AgreesWithHandWorkedValues) {
  model::Keyed<model::GcraModel> gcra(model::GcraModel{10, 1000, 3});  // T = 100, tau = 300
  EXPECT_EQ(gcra.allow("k", 0, 3), (model::Outcome{true, 3, 0, 0, 300}));
  EXPECT_EQ(gcra.allow("k", 0, 1), (model::Outcome{false, 3, 0, 100, 300}));
  EXPECT_EQ(gcra.allow("k", 50, 4), (model::Outcome{false, 3, 0, model::kNever, 250}));
  model::Keyed<model::TokenBucketModel> bucket(model::TokenBucketModel{3, 10, 1000});  // same as the GCRA
  EXPECT_EQ(bucket.allow("k", 0, 3), (model::Outcome{true, 3, 0, 0, 300}));
  EXPECT_EQ(bucket.allow("k", 0, 1), (model::Outcome{false, 3, 0, 100, 300}));
  EXPECT_EQ(bucket.allow("k", 150, 1), (model::Outcome{true, 3, 0, 0, 250}));  // token at 100 taken
  model::Keyed<model::SlidingWindowLogModel> log(model::SlidingWindowLogModel{3, 100});
  EXPECT_EQ(log.allow("k", 0, 2), (model::Outcome{true, 3, 1, 0, 100}));
  EXPECT_EQ(log.allow("k", 10, 2), (model::Outcome{false, 3, 1, 90, 90}));
  EXPECT_EQ(log.allow("k", 100, 2), (model::Outcome{true, 3, 1, 0, 100}));
  model::Keyed<model::SlidingWindowCounterModel> counter(model::SlidingWindowCounterModel{10, 1000});
  EXPECT_EQ(counter.allow("k", 500, 10), (model::Outcome{true, 10, 0, 0, 1500}));
  EXPECT_EQ(counter.allow("k", 1000, 1), (model::Outcome{false, 10, 0, 100, 1000}));
  model::Keyed<model::FixedWindowModel> fixed(model::FixedWindowModel{2, 10});
  EXPECT_EQ(fixed.allow("k", -3, 2), (model::Outcome{true, 2, 0, 0, 3}));  // window [-10, 0)
  EXPECT_EQ(fixed.allow("k", -1, 1), (model::Outcome{false, 2, 0, 1, 1}));
  EXPECT_EQ(fixed.allow("k", 0, 1), (model::Outcome{true, 2, 1, 0, 10}));
}

}  // namespace
