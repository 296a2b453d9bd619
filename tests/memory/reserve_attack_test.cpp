// Reservations under attack (include/ratelimit/README.md "Reservations"): a cancel gives back what its booking
// still holds, never more; a key reset or given back since holds nothing of it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

#include <ratelimit/ratelimit.hpp>

namespace {
namespace reserve_attack_test {  // named: the unity build joins this file with others

using namespace std::chrono_literals;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;
using ratelimit::Reservation;

// 10 per second, burst 2: T = 100 ms, tau = 200 ms.
MemoryLimiter<ratelimit::Gcra, ManualClock> limiter_of(ManualClock clock) {
  return MemoryLimiter<ratelimit::Gcra, ManualClock>(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 2}, {}, clock);
}

// include/ratelimit/README.md "Reservations": a cancel on a key reset since gives back nothing. The key used again
// after the reset holds only the new requests' units: the old booking's cancel must not give one of them back.
TEST(ReserveAttack, CancelAfterResetAndReuseGivesNothingBack) {
  ManualClock clock;
  auto limiter = limiter_of(clock);
  ASSERT_TRUE(limiter.reserve("k", 2).ok());    // TAT 200 ms, acts now
  Reservation later = limiter.reserve("k", 1);  // booked TAT 300 ms, acts at 100 ms
  ASSERT_EQ(later.delay(), 100ms);
  limiter.reset("k");
  ASSERT_TRUE(limiter.allow("k", 2));  // the whole burst again, after the reset: TAT 200 ms
  later.cancel();                      // its units went with the reset
  EXPECT_FALSE(limiter.allow("k")) << "the cancel gave back a unit of the requests admitted after the reset";
}

// A refund (or a settle below the charge) gave the key's units back already: a cancel after it must not take the
// state below what it was before the booking.
TEST(ReserveAttack, CancelNeverTakesTheKeyBelowItsStateBeforeTheBooking) {
  ManualClock clock;
  auto limiter = limiter_of(clock);
  ASSERT_TRUE(limiter.allow("k", 1));       // TAT 100 ms
  Reservation r = limiter.reserve("k", 2);  // booked TAT 300 ms, acts at 100 ms
  ASSERT_EQ(r.delay(), 100ms);
  (void)limiter.refund("k", 2);  // the caller gave the booking's units back by hand: TAT 100 ms
  r.cancel();                    // nothing of it is left to give
  EXPECT_TRUE(limiter.allow("k", 1));
  EXPECT_FALSE(limiter.allow("k", 1)) << "the cancel gave back the first request's unit too";
}

}  // namespace reserve_attack_test
}  // namespace
