// Hostile input against RedisLimiter (the Redis rows of include/ratelimit/README.md's "Hostile input" table): awkward
// and huge keys, costs at the ends of int64, a client clock at the ends of int64. Negative costs and policies Redis
// cannot run exactly are in validation_test.cpp; a clock stepping back in redis_limiter_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;
using ratelimit::Decision;
using ratelimit::ManualClock;
using ratelimit::redis::RedisLimiter;
using ratelimit_test::client_options;
using ratelimit_test::shared_redis;

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

class RedisHostileInput : public testing::Test {
 protected:
  void SetUp() override { RATELIMIT_REQUIRE_REDIS(); }
};

TEST_F(RedisHostileInput, EmptyNulBraceAndPercentKeysAreDistinct) {
  ManualClock clock;
  const auto opts = client_options(*shared_redis());
  RedisLimiter l(ratelimit::FixedWindow{.limit = 2, .window = 1h}, opts, clock);
  // The empty key encodes as "%", the key "%" as "%25": neither may collide with the other or with "}".
  const std::string keys[] = {""s,   "\0"s,   "%"s,   "%25"s,  "%7D"s, "}"s,     "{"s,   "{}"s,
                              "}{"s, "a\0b"s, "a\0c"s, "{a}b"s, "{a"s,  "\xff"s,  "%%"s,  "%}"s};
  for (const auto& k : keys) EXPECT_EQ(l.allow(k), (Decision{true, 2, 1, 0s, 1h})) << testing::PrintToString(k);
  // A second round: each key has seen exactly its own request.
  for (const auto& k : keys) EXPECT_EQ(l.allow(k), (Decision{true, 2, 0, 0s, 1h})) << testing::PrintToString(k);
  auto admin = shared_redis()->admin();
  EXPECT_EQ(ratelimit_test::expect_all_keys_expire(admin, opts.key_prefix), std::size(keys));
}

TEST_F(RedisHostileInput, MegabyteKeyIsRefusedByDefaultAndWorksWhenAllowed) {
  ManualClock clock;
  auto opts = client_options(*shared_redis());
  const ratelimit::Gcra policy{.limit = 1, .period = 1h, .burst = 1};
  // The worst case for the encoding: every byte is escaped ('}' and '%' become three bytes).
  std::string huge(std::size_t{1} << 20, '}');
  for (std::size_t i = 0; i < huge.size(); i += 2) huge[i] = '%';
  {
    RedisLimiter by_default(policy, opts, clock);
    try {
      (void)by_default.allow(huge);
      ADD_FAILURE() << "no std::invalid_argument";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("key: 1048576 bytes", 0), 0u) << e.what();
    }
    EXPECT_EQ(by_default.stats().calls, 0u);  // refused before anything was sent
  }
  opts.max_key_bytes = std::size_t{1} << 20;
  opts.command_timeout = 5000ms;  // a 3 MiB Redis key under a sanitizer
  RedisLimiter l(policy, opts, clock);
  EXPECT_EQ(l.allow(huge), (Decision{true, 1, 0, 0s, 1h}));
  EXPECT_FALSE(l.allow(huge).allowed);
  std::string neighbour = huge;
  neighbour.back() = 'x';
  EXPECT_TRUE(l.allow(neighbour).allowed);
  auto too_big = opts;
  too_big.max_key_bytes = (std::size_t{1} << 20) + 1;
  EXPECT_THROW(RedisLimiter(policy, too_big, clock), std::invalid_argument);
  auto admin = shared_redis()->admin();
  EXPECT_EQ(ratelimit_test::expect_all_keys_expire(admin, opts.key_prefix), 2u);
}

// A cost far above the limit (up to int64's top, beyond Lua's exact 2^53) is a plain `never` on every
// script, and writes nothing.
TEST_F(RedisHostileInput, HugeCostsAreNeverAndWriteNothing) {
  ManualClock clock;
  const auto opts = client_options(*shared_redis());
  RedisLimiter fw(ratelimit::FixedWindow{.limit = 3, .window = 1s}, opts, clock);
  RedisLimiter swl(ratelimit::SlidingWindowLog{.limit = 3, .window = 1s}, opts, clock);
  RedisLimiter swc(ratelimit::SlidingWindowCounter{.limit = 3, .window = 1s}, opts, clock);
  RedisLimiter tb(ratelimit::TokenBucket{.capacity = 3, .refill_tokens = 1, .refill_period = 1s}, opts, clock);
  RedisLimiter gcra(ratelimit::Gcra{.limit = 1, .period = 1s, .burst = 3}, opts, clock);
  const Decision fresh_never{false, 3, 3, Decision::never, 0ns};
  for (const std::int64_t cost : {std::int64_t{4}, (std::int64_t{1} << 53) + 1, kMax - 1, kMax}) {
    EXPECT_EQ(fw.allow("k", cost), fresh_never) << cost;
    EXPECT_EQ(swl.allow("k", cost), fresh_never) << cost;
    EXPECT_EQ(swc.allow("k", cost), fresh_never) << cost;
    EXPECT_EQ(tb.allow("k", cost), fresh_never) << cost;
    EXPECT_EQ(gcra.allow("k", cost), fresh_never) << cost;
  }
  auto admin = shared_redis()->admin();
  EXPECT_EQ(ratelimit_test::scan_keys(admin, opts.key_prefix + "*").size(), 0u);
  // Exactly the limit passes; then cost 0 is allowed, and a huge cost is still `never`.
  EXPECT_EQ(fw.allow("k", 3), (Decision{true, 3, 0, 0s, 1s}));
  EXPECT_EQ(fw.allow("k", 0), (Decision{true, 3, 0, 0s, 1s}));
  EXPECT_EQ(fw.allow("k", kMax), (Decision{false, 3, 0, Decision::never, 1s}));
}

// A client clock at the ends of int64 nanoseconds is clamped to +/-2^52 us, where every Lua value is exact.
TEST_F(RedisHostileInput, ClientClockAtTheEndsOfInt64IsClamped) {
  ManualClock clock;
  RedisLimiter l(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 2}, client_options(*shared_redis()), clock);
  clock.set(ManualClock::time_point(ManualClock::duration(kMax)));
  EXPECT_EQ(l.allow("k"), (Decision{true, 2, 1, 0s, 100ms}));
  EXPECT_EQ(l.allow("k"), (Decision{true, 2, 0, 0s, 200ms}));
  EXPECT_EQ(l.allow("k"), (Decision{false, 2, 0, 100ms, 200ms}));
  clock.set(ManualClock::time_point(ManualClock::duration(kMin)));  // steps back: time stands still
  EXPECT_EQ(l.allow("k"), (Decision{false, 2, 0, 100ms, 200ms}));
  EXPECT_EQ(l.allow("past"), (Decision{true, 2, 1, 0s, 100ms}));
}

}  // namespace
