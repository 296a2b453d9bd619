// Configurations Redis cannot run exactly are refused at construction, naming the field.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include <ratelimit/redis.hpp>

#include "../support/invalid_message.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::redis::RedisLimiter;
using ratelimit::redis::RedisOptions;

using ratelimit_test::invalid_message;
using ratelimit_test::starts_with;

TEST(RedisValidation, PolicyMustBeWholeMicrosecondsAndAtMostOnePerMicrosecond) {
  const RedisOptions o;
  EXPECT_PRED2(starts_with,
               invalid_message([&] { RedisLimiter(ratelimit::FixedWindow{.limit = 1, .window = 1500ns}, o); }),
               "FixedWindow.window");
  EXPECT_PRED2(starts_with,
               invalid_message([&] { RedisLimiter(ratelimit::SlidingWindowLog{.limit = 1, .window = 999ns}, o); }),
               "SlidingWindowLog.window");
  EXPECT_PRED2(starts_with,
               invalid_message([&] { RedisLimiter(ratelimit::Gcra{.limit = 2001, .period = 2ms, .burst = 1}, o); }),
               "Gcra.period");
  EXPECT_PRED2(starts_with, invalid_message([&] {
                 RedisLimiter(ratelimit::TokenBucket{.capacity = 1, .refill_tokens = 3, .refill_period = 2us}, o);
               }),
               "TokenBucket.refill_period");
  // The same policies are fine in memory (1 ns tick): the refusal is Redis's microsecond tick.
  EXPECT_NO_THROW(ratelimit::MemoryLimiter(ratelimit::FixedWindow{.limit = 1, .window = 1500ns}));
  EXPECT_NO_THROW(RedisLimiter(ratelimit::Gcra{.limit = 2000, .period = 2ms, .burst = 1}, o));
}

TEST(RedisValidation, LuaExactnessBounds) {
  const RedisOptions o;
  // limit * window_us = 2^40 * 3.6e9 > 2^53: the sliding window counter's products would not be exact.
  EXPECT_PRED2(starts_with, invalid_message([&] {
                 RedisLimiter(ratelimit::SlidingWindowCounter{.limit = std::int64_t{1} << 40, .window = 1h}, o);
               }),
               "SlidingWindowCounter.window");
  // 2^53 / 3.6e9 = 2501999.8: 2501999 per hour is the largest limit that fits.
  EXPECT_NO_THROW(RedisLimiter(ratelimit::SlidingWindowCounter{.limit = 2501999, .window = 1h}, o));
  EXPECT_ANY_THROW(RedisLimiter(ratelimit::SlidingWindowCounter{.limit = 2502000, .window = 1h}, o));
  EXPECT_PRED2(starts_with, invalid_message([&] {
                 RedisLimiter(ratelimit::FixedWindow{.limit = std::int64_t{1} << 53, .window = 1s}, o);
               }),
               "FixedWindow.limit");
  EXPECT_NO_THROW(RedisLimiter(ratelimit::FixedWindow{.limit = (std::int64_t{1} << 53) - 1, .window = 1s}, o));
}

TEST(RedisValidation, OptionsAndArguments) {
  RedisOptions braces;
  braces.key_prefix = "app{1}:";
  const ratelimit::Gcra g{.limit = 1, .period = 1s, .burst = 1};
  EXPECT_PRED2(starts_with, invalid_message([&] { RedisLimiter(g, braces); }), "LimiterOptions.key_prefix");
  RedisOptions pool;
  pool.pool_size = 0;
  EXPECT_PRED2(starts_with, invalid_message([&] { RedisLimiter(g, pool); }), "ConnectionOptions.pool_size");
  RedisOptions timeout;
  timeout.command_timeout = 0ms;
  EXPECT_PRED2(starts_with, invalid_message([&] { RedisLimiter(g, timeout); }), "ConnectionOptions.command_timeout");
  // Absurd durations overflowed deadline and nanosecond arithmetic (UB) before (new-user review).
  auto named = [&](auto set, const char* field) {
    RedisOptions o;
    o.port = 1;
    set(o);
    EXPECT_PRED2(starts_with, invalid_message([&] { RedisLimiter(g, o); }), field);
  };
  named([](RedisOptions& o) { o.command_timeout = std::chrono::milliseconds::max(); },
        "ConnectionOptions.command_timeout");
  named([](RedisOptions& o) { o.connect_timeout = std::chrono::milliseconds::max(); },
        "ConnectionOptions.connect_timeout");
  named([](RedisOptions& o) { o.reconnect_backoff_max = std::chrono::milliseconds::max(); },
        "ConnectionOptions.reconnect_backoff_max");
  named([](RedisOptions& o) { o.failure_retry_after = std::chrono::milliseconds::max(); },
        "LimiterOptions.failure_retry_after");
  // A fail_closed denial must name a wait: 0 made acquire() spin.
  named([](RedisOptions& o) { o.failure_retry_after = 0ms; }, "LimiterOptions.failure_retry_after");

  // Argument checks happen before any network use (no server on port 1).
  RedisOptions small;
  small.port = 1;
  small.max_key_bytes = 4;
  RedisLimiter limiter(g, small);
  EXPECT_PRED2(starts_with, invalid_message([&] { limiter.allow("12345"); }), "key");
  EXPECT_PRED2(starts_with, invalid_message([&] { limiter.allow("k", -1); }), "cost");
  const ratelimit::redis::Request batch[] = {{"ok", 1}, {"k", -2}};
  EXPECT_EQ(invalid_message([&] { limiter.allow_many(batch); }), "requests[1].cost: must be >= 0, got -2");
  const ratelimit::redis::Request long_key[] = {{"ok", 1}, {"ok", 1}, {"12345", 1}};
  EXPECT_EQ(invalid_message([&] { limiter.check_many(long_key); }),
            "requests[2].key: 5 bytes exceeds max_key_bytes (4)");
  EXPECT_EQ(limiter.stats().calls, 0u);
}

}  // namespace
