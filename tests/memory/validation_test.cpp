// Bad input gets std::invalid_argument whose message starts with the field name (include/ratelimit/README.md "Keys,
// costs and validation"); every byte string up to max_key_bytes is a valid, distinct key.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <ratelimit/ratelimit.hpp>

#include "../support/extremes.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;
using ratelimit::MemoryOptions;

using ratelimit_test::kMax;
using ratelimit_test::kMaxNs;
using ratelimit_test::kMin;
using ratelimit_test::kMinNs;

/// `fn()` must throw std::invalid_argument whose what() is "<one of fields>: ...".
template <class Fn>
void expect_invalid(Fn&& fn, std::initializer_list<std::string_view> fields, const char* what_call) {
  SCOPED_TRACE(what_call);
  try {
    fn();
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    const std::string_view message = e.what();
    bool named = false;
    for (std::string_view field : fields) {
      named = named || (message.starts_with(field) && message.substr(field.size()).starts_with(":"));
    }
    EXPECT_TRUE(named) << "message: \"" << message << "\"";
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

#define EXPECT_INVALID(call, ...) expect_invalid([&] { (void)(call); }, {__VA_ARGS__}, #call)

template <ratelimit::Policy P>
void construct(P policy) {
  MemoryLimiter<P> limiter(policy);
}

TEST(Validation, FixedWindowFields) {
  using ratelimit::FixedWindow;
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, kMin}) {
    EXPECT_INVALID(construct(FixedWindow{.limit = bad, .window = 1s}), "FixedWindow.limit");
  }
  for (auto bad : {0ns, -1ns, kMinNs}) {
    EXPECT_INVALID(construct(FixedWindow{.limit = 1, .window = bad}), "FixedWindow.window");
  }
  EXPECT_INVALID(construct(FixedWindow{.limit = 1, .window = kMaxNs}), "FixedWindow.window");  // overflows
  EXPECT_INVALID((FixedWindow{1, 1500ns}.rules(1000)), "FixedWindow.window");  // not whole microseconds
  EXPECT_INVALID((FixedWindow{1, 999ns}.rules(1000)), "FixedWindow.window");
  EXPECT_NO_THROW((void)(FixedWindow{1, 2000ns}.rules(1000)));
  EXPECT_NO_THROW(construct(FixedWindow{.limit = kMax, .window = 24h * 365}));
  EXPECT_NO_THROW(construct(FixedWindow{.limit = 1, .window = 1ns}));
}

TEST(Validation, SlidingWindowLogFields) {
  using ratelimit::SlidingWindowLog;
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, kMin}) {
    EXPECT_INVALID(construct(SlidingWindowLog{.limit = bad, .window = 1s}), "SlidingWindowLog.limit");
  }
  for (auto bad : {0ns, -1ns, kMinNs}) {
    EXPECT_INVALID(construct(SlidingWindowLog{.limit = 1, .window = bad}), "SlidingWindowLog.window");
  }
  EXPECT_INVALID(construct(SlidingWindowLog{.limit = 1, .window = kMaxNs}), "SlidingWindowLog.window");
  EXPECT_INVALID((SlidingWindowLog{1, 1500ns}.rules(1000)), "SlidingWindowLog.window");
  EXPECT_NO_THROW((void)(SlidingWindowLog{1, 3000ns}.rules(1000)));
  // One key's log at limit kMax fits no byte budget: refused under the default one, accepted only when the
  // budget is unbounded (max_bytes = SIZE_MAX).
  EXPECT_INVALID(construct(SlidingWindowLog{.limit = kMax, .window = 24h * 365}), "MemoryOptions.max_bytes");
  EXPECT_NO_THROW((ratelimit::MemoryLimiter<SlidingWindowLog, ratelimit::ManualClock>(
      {.limit = kMax, .window = 24h * 365}, {.max_bytes = std::numeric_limits<std::size_t>::max()})));
}

TEST(Validation, SlidingWindowCounterFields) {
  using ratelimit::SlidingWindowCounter;
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, kMin}) {
    EXPECT_INVALID(construct(SlidingWindowCounter{.limit = bad, .window = 1s}), "SlidingWindowCounter.limit");
  }
  for (auto bad : {0ns, -1ns, kMinNs}) {
    EXPECT_INVALID(construct(SlidingWindowCounter{.limit = 1, .window = bad}), "SlidingWindowCounter.window");
  }
  EXPECT_INVALID(construct(SlidingWindowCounter{.limit = 1, .window = kMaxNs}), "SlidingWindowCounter.window");
  EXPECT_INVALID(construct(SlidingWindowCounter{.limit = 1, .window = kMaxNs / 2}), "SlidingWindowCounter.window");
  EXPECT_INVALID((SlidingWindowCounter{1, 1001ns}.rules(1000)), "SlidingWindowCounter.window");
  EXPECT_NO_THROW((void)(SlidingWindowCounter{1, 1000ns}.rules(1000)));
  EXPECT_NO_THROW(construct(SlidingWindowCounter{.limit = kMax, .window = 24h * 365}));
}

TEST(Validation, GcraFields) {
  using ratelimit::Gcra;
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, kMin}) {
    EXPECT_INVALID(construct(Gcra{.limit = bad, .period = 1s, .burst = 1}), "Gcra.limit");
    EXPECT_INVALID(construct(Gcra{.limit = 1, .period = 1s, .burst = bad}), "Gcra.burst");
  }
  for (auto bad : {0ns, -1ns, kMinNs}) {
    EXPECT_INVALID(construct(Gcra{.limit = 1, .period = bad, .burst = 1}), "Gcra.period");
  }
  // A rate above one per tick cannot be enforced (include/ratelimit/README.md "Policy formulas": P / L before rounding
  // must be >= one tick).
  EXPECT_INVALID(construct(Gcra{.limit = 11, .period = 10ns, .burst = 1}), "Gcra.period", "Gcra.limit");
  EXPECT_INVALID(construct(Gcra{.limit = kMax, .period = 1s, .burst = 1}), "Gcra.period", "Gcra.limit");
  EXPECT_NO_THROW(construct(Gcra{.limit = 10, .period = 10ns, .burst = 1}));  // exactly one per tick
  EXPECT_INVALID((Gcra{3, 2us, 1}.rules(1000)), "Gcra.period", "Gcra.limit");   // 3 per 2 us on Redis
  EXPECT_INVALID((Gcra{1, 1500ns, 1}.rules(1000)), "Gcra.period");
  EXPECT_NO_THROW((void)(Gcra{1000, 1ms, 1}.rules(1000)));  // T = 1 us
  // burst * T (tau) beyond what int64 nanoseconds can hold.
  EXPECT_INVALID(construct(Gcra{.limit = 1, .period = 1s, .burst = kMax}), "Gcra.burst");
  EXPECT_INVALID(construct(Gcra{.limit = 1, .period = kMaxNs, .burst = 1}), "Gcra.period");
  // One emission interval alone beyond the horizon: the period is at fault, not the burst of 1.
  EXPECT_INVALID(construct(Gcra{.limit = 1, .period = std::chrono::years(100), .burst = 1}), "Gcra.period");
  EXPECT_INVALID(construct(Gcra{.limit = 1, .period = std::chrono::years(1), .burst = 100}), "Gcra.burst");
  EXPECT_NO_THROW(construct(Gcra{.limit = 1, .period = 24h, .burst = 1000}));
}

TEST(Validation, TokenBucketFields) {
  using ratelimit::TokenBucket;
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, kMin}) {
    EXPECT_INVALID(construct(TokenBucket{.capacity = bad, .refill_tokens = 1, .refill_period = 1s}),
                   "TokenBucket.capacity");
    EXPECT_INVALID(construct(TokenBucket{.capacity = 1, .refill_tokens = bad, .refill_period = 1s}),
                   "TokenBucket.refill_tokens");
  }
  for (auto bad : {0ns, -1ns, kMinNs}) {
    EXPECT_INVALID(construct(TokenBucket{.capacity = 1, .refill_tokens = 1, .refill_period = bad}),
                   "TokenBucket.refill_period");
  }
  EXPECT_INVALID(construct(TokenBucket{.capacity = 1, .refill_tokens = 11, .refill_period = 10ns}),
                 "TokenBucket.refill_period", "TokenBucket.refill_tokens");
  EXPECT_INVALID((TokenBucket{1, 1, 1500ns}.rules(1000)), "TokenBucket.refill_period");
  EXPECT_INVALID((TokenBucket{1, 3, 2us}.rules(1000)), "TokenBucket.refill_period", "TokenBucket.refill_tokens");
  EXPECT_INVALID(construct(TokenBucket{.capacity = kMax, .refill_tokens = 1, .refill_period = 1s}),
                 "TokenBucket.capacity");
  EXPECT_INVALID(construct(TokenBucket{.capacity = 1, .refill_tokens = 1, .refill_period = std::chrono::years(100)}),
                 "TokenBucket.refill_period");
  EXPECT_NO_THROW(construct(TokenBucket{.capacity = 100'000, .refill_tokens = 1, .refill_period = 1h}));  // 11 years
}

TEST(Validation, MemoryOptionsFields) {
  const ratelimit::Gcra policy{.limit = 1, .period = 1s, .burst = 1};
  auto make = [&](MemoryOptions options) { MemoryLimiter<ratelimit::Gcra> limiter(policy, options); };
  EXPECT_INVALID(make({.max_keys = 0}), "MemoryOptions.max_keys");
  EXPECT_INVALID(make({.max_key_bytes = (std::size_t{1} << 31) + 1}), "MemoryOptions.max_key_bytes");
  EXPECT_INVALID(make({.max_key_bytes = std::numeric_limits<std::size_t>::max()}), "MemoryOptions.max_key_bytes");
  EXPECT_INVALID(make({.shards = 65537}), "MemoryOptions.shards");
  EXPECT_INVALID(make({.shards = std::numeric_limits<std::size_t>::max()}), "MemoryOptions.shards");
  EXPECT_NO_THROW(make({.max_keys = 1}));
  EXPECT_NO_THROW(make({.max_key_bytes = 0}));
  EXPECT_NO_THROW(make({.max_keys = 100, .shards = 65536}));
  EXPECT_NO_THROW(make({.shards = 3}));
}

TEST(Validation, NegativeCostThrowsAndConsumesNothing) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> limiter({.limit = 2, .window = 1s}, {}, clock);
  EXPECT_INVALID(limiter.allow("k", -1), "cost");
  EXPECT_INVALID(limiter.allow("k", kMin), "cost");
  EXPECT_INVALID(limiter.allow("k", -1, clock.now()), "cost");
  EXPECT_INVALID(ratelimit::acquire(limiter, "k", -1, 1s, [](std::chrono::nanoseconds) {}), "cost");
  EXPECT_EQ(limiter.peek("k").remaining, 2);
  EXPECT_EQ(limiter.size(), 0u);
}

TEST(Validation, KeyLongerThanMaxKeyBytesThrows) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> limiter({.limit = 1, .window = 1s}, {}, clock);
  const std::string too_long(513, 'x');
  EXPECT_INVALID(limiter.allow(too_long), "key");
  EXPECT_INVALID(limiter.allow(too_long, 0), "key");
  EXPECT_INVALID(limiter.allow(too_long, 1, clock.now()), "key");
  EXPECT_INVALID(limiter.peek(too_long), "key");
  EXPECT_INVALID(limiter.peek(too_long, clock.now()), "key");
  EXPECT_INVALID(limiter.reset(too_long), "key");
  EXPECT_EQ(limiter.size(), 0u);

  MemoryLimiter<ratelimit::FixedWindow, ManualClock> small({.limit = 1, .window = 1s}, {.max_key_bytes = 4}, clock);
  EXPECT_TRUE(small.allow("abcd"));
  EXPECT_INVALID(small.allow("abcde"), "key");
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> none({.limit = 1, .window = 1s}, {.max_key_bytes = 0}, clock);
  EXPECT_TRUE(none.allow(""));
  EXPECT_INVALID(none.allow("a"), "key");
}

TEST(Validation, AnyBytesUpToMaxKeyBytesAreDistinctKeys) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> limiter({.limit = 1, .window = 1h}, {}, clock);
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
  const std::string max_key = std::string(511, 'k') + '\xff';
  const std::vector<std::string> keys = {
      "",
      std::string("\0", 1),
      std::string("\0\0", 2),
      std::string("a\0", 2),
      std::string("a\0b", 3),
      "a",
      "{",
      "}",
      "{}",
      "{a}",
      "}{",
      "\xff",
      "\xc3\x28",  // invalid UTF-8
      "\xed\xa0\x80",
      "caf\xc3\xa9",
      all_bytes,
      all_bytes + all_bytes,  // exactly 512 bytes
      max_key,                // exactly 512 bytes, differs from the next only in the last byte
      std::string(511, 'k') + '\xfe',
      std::string(511, 'k'),
      std::string(16, 'x'),  // around the 16-byte inline key boundary
      std::string(17, 'x'),
  };
  ASSERT_EQ(keys[16].size(), 512u);
  ASSERT_EQ(max_key.size(), 512u);
  for (const auto& key : keys) {
    SCOPED_TRACE(::testing::PrintToString(key));
    EXPECT_TRUE(limiter.allow(key).allowed);
  }
  EXPECT_EQ(limiter.size(), keys.size());
  for (const auto& key : keys) {
    SCOPED_TRACE(::testing::PrintToString(key));
    EXPECT_FALSE(limiter.allow(key).allowed);  // each key's own state, used once
    EXPECT_FALSE(limiter.peek(key).allowed);
  }
  EXPECT_INVALID(limiter.allow(max_key + 'x'), "key");
  limiter.reset(std::string("\0", 1));
  EXPECT_TRUE(limiter.peek(std::string("\0", 1)).allowed);
  EXPECT_FALSE(limiter.peek("").allowed);
  EXPECT_FALSE(limiter.peek(std::string("\0\0", 2)).allowed);
  EXPECT_EQ(limiter.size(), keys.size() - 1);
}

}  // namespace
