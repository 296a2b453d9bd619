// Twin traces of reserve, cancel, settle, allow and peek (include/ratelimit/redis/README.md "Reservations and
// settling"): the same random sequence on MemoryLimiter and RedisLimiter (client time, one ManualClock) must give
// identical decisions, bookings and delays on every field. Times, windows and emission intervals are whole
// microseconds, Redis's tick; time never steps back (a key full again may be forgotten by either backend, and that
// forgets the latest write time a clock stepping back is held to: tests/redis/differential_trace.hpp).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis.hpp>

#include "differential_trace.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::ManualClock;
using ratelimit::Reservation;

using ratelimit_test::differential::show;

template <ratelimit::Policy P>
class Twin {
 public:
  Twin(P policy, std::uint64_t seed, std::int64_t max_debt_cap)
      : rng_(seed),
        max_debt_cap_(max_debt_cap),
        limit_(policy.rules(1).limit()),
        memory_(policy, {}, clock_),
        redis_(policy, ratelimit_test::client_options(*ratelimit_test::shared_redis()), clock_) {
    clock_.set(ManualClock::time_point(1'700'000'000s));
  }

  /// Runs `steps` random steps; returns how many were compared.
  int run(int steps, std::int64_t scale_us) {
    int compared = 0;
    for (int i = 0; i < steps && mismatches_ < 5; ++i) {
      step_time(scale_us);
      const std::string key = "k" + std::to_string(pick(0, 2));
      const int op = pick(0, 99);
      if constexpr (ratelimit::ReservableRules<ratelimit::RulesOf<P>>) {
        if (op < 30) {
          reserve(key);
          ++compared;
          continue;
        }
        if (op < 42) {
          cancel_one();
          continue;
        }
      }
      if (op < 65) {
        const std::int64_t cost = pick(0, static_cast<int>(limit_) + 1);
        compare(memory_.allow(key, cost), redis_.allow(key, cost), "allow " + key + " " + std::to_string(cost));
      } else if (op < 72) {
        compare(memory_.peek(key), redis_.peek(key), "peek " + key);
      } else {
        settle(key);
      }
      ++compared;
    }
    EXPECT_EQ(mismatches_, 0);
    EXPECT_EQ(redis_.stats().failures, 0u);
    return compared;
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  void step_time(std::int64_t scale_us) {
    const int r = pick(0, 99);
    std::int64_t us = 0;
    if (r < 50) {
      us = std::uniform_int_distribution<std::int64_t>(0, scale_us / 4)(rng_);
    } else if (r < 85) {
      us = std::uniform_int_distribution<std::int64_t>(0, 2 * scale_us)(rng_);
    }  // else: the same time
    clock_.advance(std::chrono::microseconds(us));
    now_us_ += us;
  }

  void reserve(const std::string& key) {
    const std::int64_t cost = pick(0, static_cast<int>(limit_) + 1);
    const bool bounded = pick(0, 1) == 1;
    const std::chrono::microseconds max_delay(std::uniform_int_distribution<std::int64_t>(0, 400'000)(rng_));
    Reservation m = bounded ? memory_.reserve(key, cost, max_delay) : memory_.reserve(key, cost);
    Reservation r = bounded ? redis_.reserve(key, cost, max_delay) : redis_.reserve(key, cost);
    const std::string what = "reserve " + key + " " + std::to_string(cost) +
                             (bounded ? " within " + std::to_string(max_delay.count()) + "us" : "");
    compare(m.decision(), r.decision(), what);
    if (m.ok() != r.ok() || m.delay() != r.delay()) {
      mismatch(what + ": memory ok " + std::to_string(m.ok()) + " delay " + std::to_string(m.delay().count()) +
               ", redis ok " + std::to_string(r.ok()) + " delay " + std::to_string(r.delay().count()));
    }
    if (m.ok() && r.ok()) booked_.emplace_back(std::move(m), std::move(r));
  }

  void cancel_one() {
    if (booked_.empty()) return;
    const auto at = static_cast<std::size_t>(pick(0, static_cast<int>(booked_.size()) - 1));
    booked_[at].first.cancel();
    booked_[at].second.cancel();
    const std::string key = booked_[at].first.key();
    booked_.erase(booked_.begin() + static_cast<std::ptrdiff_t>(at));
    compare(memory_.peek(key), redis_.peek(key), "peek after cancel " + key);
  }

  void settle(const std::string& key) {
    const std::int64_t charged = pick(0, static_cast<int>(limit_));
    const std::int64_t actual = pick(0, 2 * static_cast<int>(limit_) + 2);
    std::string what = "settle " + key + " " + std::to_string(charged) + " -> " + std::to_string(actual);
    if (max_debt_cap_ < 0 || pick(0, 1) == 1) {
      const std::int64_t max_debt = pick(0, static_cast<int>(max_debt_cap_ < 0 ? 4 : max_debt_cap_));
      what += " max_debt " + std::to_string(max_debt);
      compare(memory_.settle(key, charged, actual, max_debt), redis_.settle(key, charged, actual, max_debt), what);
    } else {
      compare(memory_.settle(key, charged, actual), redis_.settle(key, charged, actual), what);
    }
  }

  void compare(const Decision& m, const Decision& r, const std::string& what) {
    if (m != r) mismatch(what + ": memory " + show(m) + ", redis " + show(r));
  }
  void mismatch(const std::string& what) {
    ++mismatches_;
    ADD_FAILURE() << "at +" << now_us_ << "us, " << what;
  }

  std::mt19937_64 rng_;
  std::int64_t max_debt_cap_;  // < 0: no unbounded settles (a bound of 0..4 always)
  std::int64_t limit_;
  std::int64_t now_us_ = 0;
  ManualClock clock_;
  ratelimit::MemoryLimiter<P, ManualClock> memory_;
  ratelimit::redis::RedisLimiter<P, ManualClock> redis_;
  std::vector<std::pair<Reservation, Reservation>> booked_;
  int mismatches_ = 0;
};

class ReserveTwin : public testing::Test {
 protected:
  void SetUp() override { RATELIMIT_REQUIRE_REDIS(); }
};
using SettleTwin = ReserveTwin;

TEST_F(ReserveTwin, GcraMemoryAndRedisAgree) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    Twin<ratelimit::Gcra> twin(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 3}, seed, 6);
    EXPECT_GT(twin.run(1500, 100'000), 1000);
  }
}

TEST_F(ReserveTwin, TokenBucketMemoryAndRedisAgree) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    Twin<ratelimit::TokenBucket> twin(ratelimit::TokenBucket{.capacity = 4, .refill_tokens = 1, .refill_period = 30ms},
                                      seed, 6);
    EXPECT_GT(twin.run(1500, 30'000), 1000);
  }
}

TEST_F(SettleTwin, FixedWindowMemoryAndRedisAgree) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    Twin<ratelimit::FixedWindow> twin(ratelimit::FixedWindow{.limit = 5, .window = 1s}, seed, 6);
    EXPECT_GT(twin.run(1500, 300'000), 1000);
  }
}

TEST_F(SettleTwin, SlidingWindowLogMemoryAndRedisAgree) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    Twin<ratelimit::SlidingWindowLog> twin(ratelimit::SlidingWindowLog{.limit = 4, .window = 1s}, seed, 6);
    EXPECT_GT(twin.run(1500, 300'000), 1000);
  }
}

// A log of `limit` live entries takes a debit into its newest entry, which moves to the debit's time (both backends
// keep at most limit + 1 entries): the units count until that time plus the window.
TEST_F(SettleTwin, SlidingWindowLogFullOfEntriesMovesTheNewest) {
  const ratelimit::SlidingWindowLog policy{.limit = 4, .window = 1s};
  ManualClock clock;
  clock.set(ManualClock::time_point(1'700'000'000s));
  ratelimit::MemoryLimiter<ratelimit::SlidingWindowLog, ManualClock> memory(policy, {}, clock);
  ratelimit::redis::RedisLimiter<ratelimit::SlidingWindowLog, ManualClock> redis(
      policy, ratelimit_test::client_options(*ratelimit_test::shared_redis()), clock);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(memory.allow("k"), redis.allow("k"));
    clock.advance(10ms);
  }
  const Decision m = memory.settle("k", 0, 2);
  EXPECT_EQ(m, redis.settle("k", 0, 2)) << show(m);
  clock.advance(1s - 5ms);  // the entries at +0..+20 ms left; the one at +30 ms moved to +40 ms with 3 units
  const Decision later = memory.peek("k");
  const Decision r = redis.peek("k");
  EXPECT_EQ(later, r) << "memory " << show(later) << ", redis " << show(r);
  EXPECT_EQ(later.remaining, 1);
}

// The counter's retry_after divides by the counts (up to limit + 4 here, every settle bounded): a window that is a
// multiple of lcm(1..8) microseconds keeps every quotient whole in both ticks (tests/redis/differential_trace.hpp).
TEST_F(SettleTwin, SlidingWindowCounterMemoryAndRedisAgree) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    Twin<ratelimit::SlidingWindowCounter> twin(ratelimit::SlidingWindowCounter{.limit = 4, .window = 840ms}, seed, -1);
    EXPECT_GT(twin.run(1500, 300'000), 1000);
  }
}

}  // namespace
