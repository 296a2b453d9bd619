// Reservations and settling on MemoryLimiter<Gcra> and <TokenBucket> (include/ratelimit/README.md "Reservations",
// include/ratelimit/README.md "Settling after the response"): golang.org/x/time/rate's cancel cases worked by
// hand, then random sequences of reserve / cancel / settle / allow / refund / peek and clock moves (also
// backwards) against a reference model written here from the README's formulas, in plain integers of small values.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/ratelimit.hpp>

#include "../support/invalid_message.hpp"

namespace {
namespace reserve_test {  // named: the unity build joins this file with others

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;
using ratelimit::Reservation;

// 10 per second, burst 2: T = 100 ms, tau = 200 ms.
MemoryLimiter<ratelimit::Gcra, ManualClock> gcra_limiter(ManualClock clock, std::int64_t burst = 2) {
  return MemoryLimiter<ratelimit::Gcra, ManualClock>(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = burst}, {},
                                                     clock);
}

TEST(ReserveGcra, BookingsFollowEachOtherByTheEmissionInterval) {
  ManualClock clock;
  auto limiter = gcra_limiter(clock);
  const Reservation a = limiter.reserve("k");
  const Reservation b = limiter.reserve("k");
  const Reservation c = limiter.reserve("k", 2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a.delay(), 0ns);    // backlog 100 ms <= tau
  EXPECT_EQ(b.delay(), 0ns);    // 200 ms
  EXPECT_EQ(c.delay(), 200ms);  // 400 ms - tau
  EXPECT_EQ(c.decision().remaining, 0);
  EXPECT_FALSE(c.decision().allowed);  // a cost-0 check waits until the backlog is back to tau
  EXPECT_EQ(c.decision().retry_after, 200ms);
  EXPECT_EQ(c.decision().reset_after, 400ms);
  EXPECT_EQ(limiter.peek("k").retry_after, 300ms);  // the next cost-1 request acts after c
}

TEST(ReserveGcra, CancelOfTheLatestBookingReturnsItsSlotToTheNext) {
  ManualClock clock;
  auto limiter = gcra_limiter(clock);
  const Reservation a = limiter.reserve("k", 2);
  Reservation b = limiter.reserve("k", 1);
  ASSERT_EQ(b.delay(), 100ms);
  b.cancel();
  const Reservation c = limiter.reserve("k", 1);
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(c.delay(), 100ms);  // the very slot b had
  EXPECT_EQ(a.delay(), 0ns);
}

TEST(ReserveGcra, CancelAfterTheTimeToActReturnsNothing) {
  ManualClock clock;
  auto limiter = gcra_limiter(clock);
  (void)limiter.reserve("k", 2);
  Reservation b = limiter.reserve("k", 2);  // acts at 200 ms, TAT 400 ms
  ASSERT_EQ(b.delay(), 200ms);
  clock.advance(200ms);
  b.cancel();                                         // act_at <= t: spent
  EXPECT_EQ(limiter.reserve("k", 1).delay(), 100ms);  // TAT 400 -> 500 ms, at t = 200 ms: 500 - 200 - 200
}

TEST(ReserveGcra, CancelWithLaterBookingsReturnsWhatTheyHaveNotTaken) {
  ManualClock clock;
  auto limiter = gcra_limiter(clock, 4);          // tau 400 ms
  (void)limiter.reserve("k", 4);                  // TAT 400 ms
  Reservation b = limiter.reserve("k", 3);        // TAT 700 ms, acts at 300 ms
  const Reservation c = limiter.reserve("k", 1);  // TAT 800 ms, acts at 400 ms
  ASSERT_EQ(b.delay(), 300ms);
  ASSERT_EQ(c.delay(), 400ms);
  b.cancel();  // later = 800 - 700 = 100 ms, restore = 300 - 100 = 200 ms: TAT 600 ms
  EXPECT_EQ(limiter.peek("k").retry_after, 300ms);  // 600 + 100 - 400
  EXPECT_EQ(c.delay(), 400ms);                      // a later booking keeps its time
}

TEST(ReserveGcra, SecondCancelAndCancelOfARefusalDoNothing) {
  ManualClock clock;
  auto limiter = gcra_limiter(clock);
  (void)limiter.reserve("k", 2);
  Reservation b = limiter.reserve("k", 1);
  (void)limiter.reserve("k", 1);  // later bookings: b's cancel restores nothing
  b.cancel();
  const Decision before = limiter.peek("k");
  b.cancel();
  Reservation moved = std::move(b);
  moved.cancel();
  EXPECT_EQ(limiter.peek("k"), before);
  Reservation refused = limiter.reserve("k", 1, 0ns);
  ASSERT_FALSE(refused.ok());
  refused.cancel();
  EXPECT_EQ(limiter.peek("k"), before);
}

TEST(ReserveGcra, CostAboveTheBurstIsRefusedWithNeverAndWritesNothing) {
  ManualClock clock;
  auto limiter = gcra_limiter(clock);
  const Reservation r = limiter.reserve("k", 3);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.delay(), Decision::never);
  EXPECT_EQ(r.decision().remaining, 2);  // the cost-0 view: still full
  EXPECT_EQ(limiter.size(), 0u);
  const Reservation huge = limiter.reserve("k", INT64_MAX);
  EXPECT_FALSE(huge.ok());
  EXPECT_EQ(huge.delay(), Decision::never);
  EXPECT_EQ(limiter.size(), 0u);
}

TEST(ReserveGcra, MaxDelayBoundaryBooksAtEqualityAndRefusesOneTickLess) {
  ManualClock clock;
  auto limiter = gcra_limiter(clock);
  (void)limiter.reserve("k", 2);
  const Decision before = limiter.peek("k");
  const Reservation refused = limiter.reserve("k", 1, 100ms - 1ns);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.delay(), 100ms);     // the wait it would have needed
  EXPECT_EQ(limiter.peek("k"), before);  // nothing written
  const Reservation booked = limiter.reserve("k", 1, 100ms);
  EXPECT_TRUE(booked.ok());
  EXPECT_EQ(booked.delay(), 100ms);
}

TEST(ReserveGcra, CancelOfAnEvictedOrResetKeyGivesNothingAndInsertsNothing) {
  ManualClock clock;
  auto limiter = gcra_limiter(clock);
  Reservation r = limiter.reserve("k", 2);
  limiter.reset("k");
  r.cancel();
  EXPECT_EQ(limiter.size(), 0u);
}

TEST(ReserveGcra, TokenBucketBooksAsGcra) {
  ManualClock clock;
  MemoryLimiter<ratelimit::TokenBucket, ManualClock> limiter(
      ratelimit::TokenBucket{.capacity = 2, .refill_tokens = 10, .refill_period = 1s}, {}, clock);
  (void)limiter.reserve("k", 2);
  Reservation b = limiter.reserve("k", 1);
  EXPECT_EQ(b.delay(), 100ms);
  b.cancel();
  EXPECT_EQ(limiter.reserve("k", 1).delay(), 100ms);
}

TEST(ReserveValidation, BadInputNamesTheField) {
  ManualClock clock;
  auto limiter = gcra_limiter(clock);
  EXPECT_EQ(ratelimit_test::invalid_message([&] { (void)limiter.reserve("k", -1); }).rfind("cost:", 0), 0u);
  EXPECT_EQ(ratelimit_test::invalid_message([&] { (void)limiter.reserve("k", 1, -1ns); }).rfind("max_delay:", 0), 0u);
  EXPECT_EQ(limiter.size(), 0u);
}

TEST(ReserveEdges, ABacklogAtTheBoundIsRefusedWithoutOverflow) {
  ManualClock clock;
  MemoryLimiter<ratelimit::Gcra, ManualClock> limiter(ratelimit::Gcra{.limit = 1, .period = 1ns, .burst = 1}, {},
                                                      clock);  // T = 1 ns
  clock.set(ManualClock::time_point(ManualClock::duration(INT64_MAX / 2)));
  (void)limiter.settle("k", 0, INT64_MAX);  // the backlog is clamped to the bound, ~73 years
  const std::int64_t bound = limiter.rules().max_backlog();
  EXPECT_EQ(limiter.peek("k").reset_after.count(), bound);
  const Reservation r = limiter.reserve("k", 1);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.delay().count(), bound + 1 - 1);  // backlog + T - tau
  // At the end of the clock the backlog is bounded by the time left, still without overflow.
  clock.set(ManualClock::time_point::max());
  (void)limiter.settle("edge", 0, INT64_MAX);
  const Decision d = limiter.peek("edge");
  EXPECT_GT(d.retry_after, 0ns);
  EXPECT_LE(d.retry_after.count(), bound);
  EXPECT_EQ(d.remaining, 0);
}

TEST(ReserveConcurrency, ThreadsRacingOnOneKeyGetDistinctConsecutiveSlots) {
  ManualClock clock;  // standing still: every booking is at t = 0
  MemoryLimiter<ratelimit::Gcra, ManualClock> limiter(ratelimit::Gcra{.limit = 1000, .period = 1s, .burst = 5}, {},
                                                      clock);  // T = 1 ms, tau = 5 ms
  constexpr int kThreads = 8, kEach = 100;
  std::vector<std::vector<std::int64_t>> delays(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int j = 0; j < kEach; ++j)
        delays[static_cast<std::size_t>(i)].push_back(limiter.reserve("k").delay().count());
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<std::int64_t> all;
  for (const auto& d : delays) all.insert(all.end(), d.begin(), d.end());
  std::sort(all.begin(), all.end());
  // The k-th booking (from 0) leaves a backlog of (k + 1) T: it acts at max(0, (k + 1) T - tau).
  for (std::size_t k = 0; k < all.size(); ++k) {
    const auto backlog = static_cast<std::int64_t>(k + 1) * 1'000'000;
    ASSERT_EQ(all[k], backlog > 5'000'000 ? backlog - 5'000'000 : 0) << "booking " << k;
  }
}

// A decision as text, so that a difference reads in the failure message.
std::string describe(const Decision& d) {
  return std::string(d.allowed ? "allowed" : "denied") + " limit " + std::to_string(d.limit) + " remaining " +
         std::to_string(d.remaining) + " retry_after " + std::to_string(d.retry_after.count()) + " reset_after " +
         std::to_string(d.reset_after.count());
}

// --- The differential test: random operations against a model of the README's formulas. ---

struct Ticket {
  std::int64_t booked_tat, act_at, cost;
};

// GCRA of burst B and emission interval T in 1 ns ticks, small values: one key, which the store forgets
// whenever it is full (so its write time is forgotten too).
class Model {
 public:
  Model(std::int64_t burst, std::int64_t interval) : b_(burst), t_(interval), tau_(burst * interval) {}

  Decision allow(std::int64_t now, std::int64_t cost) {
    const std::int64_t t = view(now);
    const std::int64_t backlog = backlog_at(t);
    Decision d{.limit = b_};
    if (cost > b_) {
      d = zero_view(t);
      d.allowed = false;
      d.retry_after = Decision::never;
      return finish(d, t);
    }
    const std::int64_t wanted = backlog + cost * t_;
    d.allowed = wanted <= tau_;
    const std::int64_t after = d.allowed ? wanted : backlog;
    d.remaining = after < tau_ ? (tau_ - after) / t_ : 0;
    d.reset_after = std::chrono::nanoseconds(after);
    d.retry_after = std::chrono::nanoseconds(d.allowed ? 0 : wanted - tau_);
    if (d.allowed && cost > 0) write(t, t + wanted);
    return finish(d, t);
  }

  // A peek writes nothing and forgets nothing (the store reclaims a full key only when it writes).
  Decision peek(std::int64_t now) const {
    const std::int64_t t = view(now);
    Decision one = allow_dry(t, 1);
    const Decision zero = zero_view(t);
    one.remaining = zero.remaining;
    one.reset_after = zero.reset_after;
    return one;
  }

  struct Booked {
    bool ok;
    std::chrono::nanoseconds delay;
    Decision decision;
    Ticket ticket;
  };
  Booked reserve(std::int64_t now, std::int64_t cost, std::int64_t max_delay) {
    const std::int64_t t = view(now);
    if (cost > b_) return {false, Decision::never, finish(zero_view(t), t), {}};
    const std::int64_t wanted = backlog_at(t) + cost * t_;
    const std::int64_t delay = wanted > tau_ ? wanted - tau_ : 0;
    if (delay > max_delay) return {false, std::chrono::nanoseconds(delay), finish(zero_view(t), t), {}};
    write(t, t + wanted);
    return {true, std::chrono::nanoseconds(delay), finish(zero_view(t), t), Ticket{t + wanted, t + delay, cost}};
  }

  void cancel(std::int64_t now, const Ticket& k) {
    if (!present_) return;
    const std::int64_t t = view(now);
    if (k.act_at > t) {
      const std::int64_t later = tat_ > k.booked_tat ? tat_ - k.booked_tat : 0;
      // Never below the TAT the booking started from (a reset, refund or settle gave its units back already).
      const std::int64_t restore = std::min(k.cost * t_ - later, tat_ - (k.booked_tat - k.cost * t_));
      if (restore > 0) write(t, tat_ - restore > t ? tat_ - restore : t);
    }
    (void)finish(Decision{}, t);
  }

  Decision settle(std::int64_t now, std::int64_t charged, std::int64_t actual, std::int64_t max_debt) {
    const std::int64_t t = view(now);
    const std::int64_t d = actual - charged;
    const std::int64_t backlog = backlog_at(t);
    if (d > 0) {
      const std::int64_t cap = tau_ + max_debt * t_;
      const std::int64_t wanted = backlog + d * t_;
      const std::int64_t after = wanted < cap ? wanted : cap;
      write(t, after > backlog ? t + after : tat_);  // a debit writes, also at the bound
    } else if (d < 0 && present_ && backlog > 0) {
      write(t, -d * t_ >= backlog ? t : tat_ + d * t_);
    }
    return finish(zero_view(t), t);
  }

  Decision refund(std::int64_t now, std::int64_t cost) { return settle(now, cost, 0, 0); }

 private:
  [[nodiscard]] std::int64_t view(std::int64_t now) const { return present_ && written_ > now ? written_ : now; }
  [[nodiscard]] std::int64_t backlog_at(std::int64_t t) const { return present_ && tat_ > t ? tat_ - t : 0; }
  void write(std::int64_t t, std::int64_t tat) {
    present_ = true;
    tat_ = tat;
    written_ = t;
  }
  Decision allow_dry(std::int64_t t, std::int64_t cost) const {
    Model copy = *this;
    return copy.allow(t, cost);
  }
  [[nodiscard]] Decision zero_view(std::int64_t t) const {
    const std::int64_t backlog = backlog_at(t);
    Decision d{.allowed = backlog <= tau_, .limit = b_};
    d.remaining = backlog < tau_ ? (tau_ - backlog) / t_ : 0;
    d.retry_after = std::chrono::nanoseconds(backlog > tau_ ? backlog - tau_ : 0);
    d.reset_after = std::chrono::nanoseconds(backlog);
    return d;
  }
  Decision finish(const Decision& d, std::int64_t t) {
    if (present_ && tat_ <= t) present_ = false;  // full again: the store forgets the key
    return d;
  }

  std::int64_t b_, t_, tau_;
  bool present_ = false;
  std::int64_t tat_ = 0, written_ = 0;
};

template <class P>
void run_differential(std::uint64_t seed, P policy, std::int64_t burst, std::int64_t interval) {
  std::mt19937_64 random(seed);
  auto pick = [&](std::int64_t n) { return static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(n)); };
  ManualClock clock;
  clock.set(ManualClock::time_point(ManualClock::duration(1'000'000)));
  MemoryLimiter<P, ManualClock> limiter(policy, {}, clock);
  Model model(burst, interval);
  const std::int64_t tau = burst * interval;
  std::vector<std::pair<Reservation, Ticket>> open;
  int booked = 0, cancelled = 0, in_debt = 0;
  for (int step = 0; step < 4000; ++step) {
    const std::int64_t now = clock.now().time_since_epoch().count();
    const std::string where = "seed " + std::to_string(seed) + " step " + std::to_string(step);
    switch (pick(9)) {
      case 0:
      case 1: {
        const std::int64_t cost = pick(burst + 2);
        const std::int64_t max_delay = pick(3) == 0 ? INT64_MAX : pick(3 * tau + 2);
        Reservation r = limiter.reserve("k", cost, std::chrono::nanoseconds(max_delay));
        const Model::Booked m = model.reserve(now, cost, max_delay);
        ASSERT_EQ(r.ok(), m.ok) << where;
        ASSERT_EQ(r.delay(), m.delay) << where;
        ASSERT_EQ(describe(r.decision()), describe(m.decision)) << where;
        if (r.ok()) {
          ++booked;
          open.emplace_back(std::move(r), m.ticket);
        }
        break;
      }
      case 2:
        if (!open.empty()) {
          const auto i = static_cast<std::size_t>(pick(static_cast<std::int64_t>(open.size())));
          open[i].first.cancel();
          model.cancel(now, open[i].second);
          open.erase(open.begin() + static_cast<std::ptrdiff_t>(i));
          ++cancelled;
        }
        break;
      case 3: {
        const std::int64_t charged = pick(burst + 1), actual = pick(3 * burst + 1);
        const std::int64_t max_debt = pick(2) == 0 ? INT64_MAX / (interval * 4) : pick(2 * burst + 1);
        const Decision d = limiter.settle("k", charged, actual, max_debt);
        ASSERT_EQ(describe(d), describe(model.settle(now, charged, actual, max_debt))) << where;
        in_debt += d.allowed ? 0 : 1;
        break;
      }
      case 4: {
        const std::int64_t cost = pick(burst + 2);
        ASSERT_EQ(describe(limiter.allow("k", cost)), describe(model.allow(now, cost))) << where;
        break;
      }
      case 5: {
        const std::int64_t cost = pick(burst + 1);
        ASSERT_EQ(describe(limiter.refund("k", cost)), describe(model.refund(now, cost))) << where;
        break;
      }
      case 6: ASSERT_EQ(describe(limiter.peek("k")), describe(model.peek(now))) << where; break;
      case 7: clock.advance(std::chrono::nanoseconds(pick(2 * tau + 1))); break;
      default:  // mostly small steps, sometimes back (time stands still at the key's latest write)
        clock.advance(std::chrono::nanoseconds(pick(8) == 0 ? -pick(2 * tau + 1) : pick(interval + 1)));
        break;
    }
  }
  EXPECT_GT(booked, 300);
  EXPECT_GT(cancelled, 100);
  EXPECT_GT(in_debt, 50);  // settles that left the key owing were compared too
}

TEST(ReserveDifferential, GcraAgreesWithTheFormulas) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const std::int64_t limit = 1 + static_cast<std::int64_t>(seed % 3);
    const std::int64_t period = 7 + static_cast<std::int64_t>(seed * 5);  // T = ceil(period / limit)
    const std::int64_t burst = 1 + static_cast<std::int64_t>(seed % 4);
    const std::int64_t interval = (period + limit - 1) / limit;
    run_differential(seed, ratelimit::Gcra{.limit = limit, .period = std::chrono::nanoseconds(period), .burst = burst},
                     burst, interval);
    if (HasFatalFailure()) return;
  }
}

TEST(ReserveDifferential, TokenBucketAgreesWithTheFormulas) {
  for (std::uint64_t seed = 11; seed <= 14; ++seed) {
    const std::int64_t tokens = 1 + static_cast<std::int64_t>(seed % 2);
    const std::int64_t period = 10 + static_cast<std::int64_t>(seed);
    const std::int64_t capacity = 2 + static_cast<std::int64_t>(seed % 3);
    run_differential(
        seed,
        ratelimit::TokenBucket{
            .capacity = capacity, .refill_tokens = tokens, .refill_period = std::chrono::nanoseconds(period)},
        capacity, (period + tokens - 1) / tokens);
    if (HasFatalFailure()) return;
  }
}

}  // namespace reserve_test
}  // namespace
