// Hostile input against MemoryLimiter: each row of include/ratelimit/README.md's "Hostile input" table has a test here
// (the Redis rows are in tests/redis/hostile_input_test.cpp). Expected values are worked by hand from
// include/ratelimit/README.md "Behaviour contract".
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>

#include <ratelimit/ratelimit.hpp>

#include "../support/invalid_message.hpp"
#include "../support/extremes.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;
using ratelimit::MemoryOptions;

using ratelimit_test::kMax;
using ratelimit_test::kMin;

using ratelimit_test::invalid_message;
using ratelimit_test::starts_with;

// Every policy with limit 3, so that from idle at t = 0 exactly three cost-1 requests pass.
template <class P>
P three();
template <>
ratelimit::FixedWindow three() { return {.limit = 3, .window = 1s}; }
template <>
ratelimit::SlidingWindowLog three() { return {.limit = 3, .window = 1s}; }
template <>
ratelimit::SlidingWindowCounter three() { return {.limit = 3, .window = 1s}; }
template <>
ratelimit::TokenBucket three() { return {.capacity = 3, .refill_tokens = 1, .refill_period = 1s}; }
template <>
ratelimit::Gcra three() { return {.limit = 1, .period = 1s, .burst = 3}; }

template <class P>
class HostileInput : public testing::Test {
 protected:
  MemoryLimiter<P, ManualClock> limiter(MemoryOptions o = {}) { return MemoryLimiter<P, ManualClock>(three<P>(), o, clock_); }
  ManualClock clock_;
};

using Policies = testing::Types<ratelimit::FixedWindow, ratelimit::SlidingWindowLog, ratelimit::SlidingWindowCounter,
                                ratelimit::TokenBucket, ratelimit::Gcra>;
TYPED_TEST_SUITE(HostileInput, Policies);

// Three cost-1 requests pass, the fourth does not.
template <class L>
void expect_three_then_denied(L& l, std::string_view key) {
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(l.allow(key).allowed) << "request " << i;
  const Decision d = l.allow(key);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_GT(d.retry_after, 0ns);
}

TYPED_TEST(HostileInput, EmptyKeyIsAnOrdinaryKey) {
  auto l = this->limiter();
  expect_three_then_denied(l, "");
  // Keys that an encoder might confuse with the empty key keep their own state.
  for (const std::string& k : {std::string(1, '\0'), std::string(" "), std::string("%"), std::string("{}")}) {
    EXPECT_TRUE(l.allow(k).allowed);
    EXPECT_EQ(l.peek(k).remaining, 2);
  }
  l.reset("");
  EXPECT_EQ(l.peek("").remaining, 3);
}

TYPED_TEST(HostileInput, MegabyteKeyIsRefusedByDefaultAndExactWhenAllowed) {
  const std::string huge(1 << 20, 'x');
  auto by_default = this->limiter();
  for (auto* call : {+[](decltype(by_default)& l, const std::string& k) { (void)l.allow(k); },
                     +[](decltype(by_default)& l, const std::string& k) { (void)l.allow(k, 0); },
                     +[](decltype(by_default)& l, const std::string& k) { (void)l.peek(k); },
                     +[](decltype(by_default)& l, const std::string& k) { l.reset(k); }}) {
    EXPECT_PRED2(starts_with, invalid_message([&] { call(by_default, huge); }), "key: 1048576 bytes");
  }
  EXPECT_EQ(by_default.size(), 0u);
  EXPECT_TRUE(by_default.allow(std::string(512, 'x')).allowed);  // exactly max_key_bytes is fine

  auto roomy = this->limiter(MemoryOptions{.max_key_bytes = std::size_t{1} << 21});
  expect_three_then_denied(roomy, huge);
  std::string neighbour = huge;
  neighbour.back() = 'y';  // differs in the last byte only
  EXPECT_EQ(roomy.peek(neighbour).remaining, 3);
  EXPECT_EQ(roomy.size(), 1u);
}

TYPED_TEST(HostileInput, NulAndBraceBytesAreDistinctKeys) {
  auto l = this->limiter();
  using namespace std::string_literals;
  const std::string keys[] = {"a"s, "a\0"s, "a\0b"s, "a\0c"s, "\0a"s, "{a}"s, "{a"s, "a}"s, "%7D"s, "}"s, "\xff\xfe"s};
  for (const auto& k : keys) EXPECT_TRUE(l.allow(k).allowed);
  // Each key holds exactly its own request: none shares state with another.
  for (const auto& k : keys) EXPECT_EQ(l.peek(k).remaining, 2) << testing::PrintToString(k);
  EXPECT_EQ(l.size(), std::size(keys));
}

TYPED_TEST(HostileInput, NegativeCostThrowsAndConsumesNothing) {
  auto l = this->limiter();
  EXPECT_TRUE(l.allow("k").allowed);
  for (const std::int64_t cost : {std::int64_t{-1}, std::int64_t{-3}, kMin}) {
    EXPECT_PRED2(starts_with, invalid_message([&] { (void)l.allow("k", cost); }), "cost: must be >= 0");
  }
  EXPECT_EQ(l.peek("k").remaining, 2);
  EXPECT_PRED2(starts_with, invalid_message([&] { (void)l.allow("fresh", -1); }), "cost");
  EXPECT_EQ(l.size(), 1u);  // the refused fresh key left nothing behind
}

TYPED_TEST(HostileInput, CostZeroIsAlwaysAllowedAndConsumesNothing) {
  auto l = this->limiter();
  const Decision fresh = l.allow("k", 0);
  EXPECT_EQ(fresh, (Decision{true, 3, 3, 0ns, 0ns}));
  EXPECT_EQ(l.size(), 0u);  // nothing stored for a cost-0 check of a fresh key
  expect_three_then_denied(l, "k");
  const Decision exhausted = l.allow("k", 0);
  EXPECT_TRUE(exhausted.allowed);  // allowed even when nothing is left
  EXPECT_EQ(exhausted.remaining, 0);
  EXPECT_EQ(exhausted.retry_after, 0ns);
  EXPECT_GT(exhausted.reset_after, 0ns);
}

TYPED_TEST(HostileInput, CostAboveLimitIsNeverAllowedAndConsumesNothing) {
  auto l = this->limiter();
  EXPECT_TRUE(l.allow("k").allowed);
  for (const std::int64_t cost : {std::int64_t{4}, std::int64_t{1} << 40, kMax - 1, kMax}) {
    const Decision d = l.allow("k", cost);
    EXPECT_FALSE(d.allowed) << cost;
    EXPECT_EQ(d.retry_after, Decision::never) << cost;
    EXPECT_EQ(d.remaining, 2) << cost;  // unchanged: the denial consumed nothing
    EXPECT_EQ(d.limit, 3);
  }
  // On a fresh key too: nothing is stored, and the key is full.
  const Decision d = l.allow("fresh", kMax);
  EXPECT_EQ(d, (Decision{false, 3, 3, Decision::never, 0ns}));
  EXPECT_EQ(l.size(), 1u);
  // Exactly the limit is allowed from idle.
  EXPECT_TRUE(l.allow("other", 3).allowed);
}

TYPED_TEST(HostileInput, ClockAtTheEndsOfInt64IsClampedNotWrapped) {
  auto l = this->limiter();
  // Far in the future: time stands still at the edge (include/ratelimit/README.md "Clock readings near the ends of
  // int64").
  this->clock_.set(ManualClock::time_point(ManualClock::duration(kMax)));
  expect_three_then_denied(l, "k");
  const Decision d = l.allow("k");
  EXPECT_LE(d.retry_after, 2s);  // a finite wait from a clamped time, not a wrapped one
  this->clock_.set(ManualClock::time_point(ManualClock::duration(kMin)));
  expect_three_then_denied(l, "past");
  // Stepping back from the far future to the far past: the key still sees the latest write.
  EXPECT_FALSE(l.allow("k").allowed);
}

// Clock stepping back (include/ratelimit/README.md "Guarantees"), worked by hand for GCRA 1/s, burst 3 (T = 1 s, tau =
// 3 s).
TEST(HostileClock, SteppingBackNeverAdmitsMoreAndCountsFromTheLatestWrite) {
  ManualClock clock;
  MemoryLimiter l(ratelimit::Gcra{.limit = 1, .period = 1s, .burst = 3}, {}, clock);
  clock.set(ManualClock::time_point(10s));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(l.allow("k").allowed);  // TAT = 13 s, written = 10 s
  clock.set(ManualClock::time_point(0s));                          // back 10 s
  // Time stands still at 10 s: new_tat = 14 s, retry = 14 - 10 - 3 = 1 s; reset = 13 - 10 = 3 s.
  EXPECT_EQ(l.allow("k"), (Decision{false, 3, 0, 1s, 3s}));
  clock.set(ManualClock::time_point(-1000h));  // before the epoch: floor arithmetic, same answer
  EXPECT_EQ(l.allow("k"), (Decision{false, 3, 0, 1s, 3s}));
  clock.set(ManualClock::time_point(11s));  // forward again: one emission interval passed since 10 s
  EXPECT_EQ(l.allow("k"), (Decision{true, 3, 0, 0s, 3s}));
}

TEST(HostileClock, FixedWindowDoesNotReopenAnOldWindowWhenTheClockStepsBack) {
  ManualClock clock;
  MemoryLimiter l(ratelimit::FixedWindow{.limit = 2, .window = 1s}, {}, clock);
  clock.set(ManualClock::time_point(5500ms));
  EXPECT_TRUE(l.allow("k", 2).allowed);  // window [5 s, 6 s) is used up
  clock.set(ManualClock::time_point(1200ms));  // back into an old window whose count was 0
  // Time stands still at 5.5 s: still denied, and the wait is until 6 s counted from 5.5 s.
  EXPECT_EQ(l.allow("k"), (Decision{false, 2, 0, 500ms, 500ms}));
}

// Parameters: zero, negative, overflowing and too fast. Each is refused when the limiter is made,
// with std::invalid_argument whose message starts with the field's name.
TEST(HostileParameters, ZeroAndNegativeCountsAndDurations) {
  const auto bad = [](auto policy) { return invalid_message([&] { MemoryLimiter l(policy); }); };
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{-1}, kMin}) {
    EXPECT_PRED2(starts_with, bad(ratelimit::FixedWindow{.limit = n, .window = 1s}), "FixedWindow.limit");
    EXPECT_PRED2(starts_with, bad(ratelimit::SlidingWindowLog{.limit = n, .window = 1s}), "SlidingWindowLog.limit");
    EXPECT_PRED2(starts_with, bad(ratelimit::SlidingWindowCounter{.limit = n, .window = 1s}),
                 "SlidingWindowCounter.limit");
    EXPECT_PRED2(starts_with, bad(ratelimit::Gcra{.limit = n, .period = 1s, .burst = 1}), "Gcra.limit");
    EXPECT_PRED2(starts_with, bad(ratelimit::Gcra{.limit = 1, .period = 1s, .burst = n}), "Gcra.burst");
    EXPECT_PRED2(starts_with, bad(ratelimit::TokenBucket{.capacity = n, .refill_tokens = 1, .refill_period = 1s}),
                 "TokenBucket.capacity");
    EXPECT_PRED2(starts_with, bad(ratelimit::TokenBucket{.capacity = 1, .refill_tokens = n, .refill_period = 1s}),
                 "TokenBucket.refill_tokens");
    const std::chrono::nanoseconds d(n);
    EXPECT_PRED2(starts_with, bad(ratelimit::FixedWindow{.limit = 1, .window = d}), "FixedWindow.window");
    EXPECT_PRED2(starts_with, bad(ratelimit::SlidingWindowLog{.limit = 1, .window = d}), "SlidingWindowLog.window");
    EXPECT_PRED2(starts_with, bad(ratelimit::SlidingWindowCounter{.limit = 1, .window = d}),
                 "SlidingWindowCounter.window");
    EXPECT_PRED2(starts_with, bad(ratelimit::Gcra{.limit = 1, .period = d, .burst = 1}), "Gcra.period");
    EXPECT_PRED2(starts_with, bad(ratelimit::TokenBucket{.capacity = 1, .refill_tokens = 1, .refill_period = d}),
                 "TokenBucket.refill_period");
  }
  EXPECT_PRED2(starts_with, bad(ratelimit::Gcra{}), "Gcra.limit");  // a default-constructed policy is invalid
  EXPECT_PRED2(starts_with, invalid_message([] { MemoryLimiter l(three<ratelimit::Gcra>(), {.max_keys = 0}); }),
               "MemoryOptions.max_keys");
}

TEST(HostileParameters, OverflowingProductsAreRefused) {
  const auto bad = [](auto policy) { return invalid_message([&] { MemoryLimiter l(policy); }); };
  const std::chrono::nanoseconds forever = std::chrono::nanoseconds::max();
  // A window longer than the representable horizon (~73 years; int64 ns is ~292 years).
  EXPECT_PRED2(starts_with, bad(ratelimit::FixedWindow{.limit = 1, .window = forever}), "FixedWindow.window");
  EXPECT_PRED2(starts_with, bad(ratelimit::SlidingWindowLog{.limit = 1, .window = forever}), "SlidingWindowLog.window");
  // Twice the window must fit for the sliding window counter: 100 years does not.
  EXPECT_PRED2(starts_with, bad(ratelimit::SlidingWindowCounter{.limit = 1, .window = 876000h}),
               "SlidingWindowCounter.window");
  // burst * T overflows int64: 2^62 * 4 ns.
  EXPECT_PRED2(starts_with, bad(ratelimit::Gcra{.limit = 1, .period = 4ns, .burst = std::int64_t{1} << 62}),
               "Gcra.burst");
  EXPECT_PRED2(starts_with, bad(ratelimit::TokenBucket{.capacity = kMax, .refill_tokens = 1, .refill_period = 1s}),
               "TokenBucket.capacity");
  // Large but representable: accepted, and a cost near int64's top is a plain denial.
  MemoryLimiter big(ratelimit::FixedWindow{.limit = kMax, .window = 1s});
  EXPECT_TRUE(big.allow("k", kMax - 1).allowed);
  const Decision d = big.allow("k", kMax);  // c + n would overflow int64
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 1);
  EXPECT_TRUE(big.allow("k", 1).allowed);
  MemoryLimiter counter(ratelimit::SlidingWindowCounter{.limit = kMax, .window = 1h});  // L * W needs 128 bits
  EXPECT_TRUE(counter.allow("k", kMax).allowed);
  EXPECT_FALSE(counter.allow("k", 1).allowed);
}

// Found by tests/fuzz/policy_fuzz: the log's denial computed count + cost - limit, which overflowed int64
// when count and cost were both near its top.
TEST(HostileParameters, SlidingLogDenialNearInt64TopDoesNotOverflow) {
  ManualClock clock;
  // An unbounded byte budget: one key's log at limit kMax fits no other (include/ratelimit/README.md "Bounded memory").
  MemoryLimiter l(ratelimit::SlidingWindowLog{.limit = kMax, .window = 1s},
                  {.max_bytes = std::numeric_limits<std::size_t>::max()}, clock);
  EXPECT_TRUE(l.allow("k", kMax - 2).allowed);
  // need = (kMax - 2) + (kMax - 1) - kMax = kMax - 3: the first entry frees enough, 1 s after it was made.
  EXPECT_EQ(l.allow("k", kMax - 1), (Decision{false, kMax, 2, 1s, 1s}));
  EXPECT_EQ(l.allow("k", 2), (Decision{true, kMax, 0, 0s, 1s}));
}

TEST(HostileParameters, RateBeyondOnePerTickIsRefused) {
  const auto bad = [](auto policy) { return invalid_message([&] { MemoryLimiter l(policy); }); };
  // In memory the tick is 1 ns: 1000 per 999 ns is more than one per tick.
  EXPECT_PRED2(starts_with, bad(ratelimit::Gcra{.limit = 1000, .period = 999ns, .burst = 1}), "Gcra.period");
  EXPECT_PRED2(starts_with, bad(ratelimit::TokenBucket{.capacity = 5, .refill_tokens = 2, .refill_period = 1ns}),
               "TokenBucket.refill_period");
  // Exactly one per tick is the fastest allowed rate, and it is enforced exactly.
  ManualClock clock;
  MemoryLimiter fastest(ratelimit::Gcra{.limit = 1000, .period = 1000ns, .burst = 1}, {}, clock);
  EXPECT_TRUE(fastest.allow("k").allowed);
  EXPECT_EQ(fastest.allow("k"), (Decision{false, 1, 0, 1ns, 1ns}));
  clock.advance(1ns);
  EXPECT_TRUE(fastest.allow("k").allowed);
}

}  // namespace

// A default `std::string_view{}` (null data, length 0) is the empty key, an ordinary key: no copy or
// hash reads through its null pointer (UBSan), and it shares state with "".
TEST(HostileInput, DefaultStringViewIsTheEmptyKey) {
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter<ratelimit::FixedWindow, ratelimit::ManualClock> limiter({.limit = 2, .window = 1h}, {},
                                                                                   clock);
  const std::string_view null_key{};
  ASSERT_EQ(null_key.data(), nullptr);
  EXPECT_TRUE(limiter.allow(null_key));
  EXPECT_EQ(limiter.peek("").remaining, 1);
  EXPECT_TRUE(limiter.allow(""));
  EXPECT_FALSE(limiter.allow(null_key));
  EXPECT_EQ(limiter.refund(null_key, 1).remaining, 1);
  limiter.reset(null_key);
  EXPECT_EQ(limiter.peek("").remaining, 2);
}
