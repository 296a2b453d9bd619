// A duration that is not positive is refused naming the field; a negative one almost always wrapped in the
// caller's conversion to nanoseconds (1,000 years do), and the message says so (include/ratelimit/README.md "Keys,
// costs and validation").
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include <ratelimit/ratelimit.hpp>

#include "../support/invalid_message.hpp"

namespace {

using ratelimit_test::invalid_message;

TEST(DurationMessage, NegativeSaysItIsUsuallyAnOverflow) {
  // 1,000 years in nanoseconds exceed int64: the caller's duration_cast wraps to a negative count.
  const auto wrapped = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::years(1000));
  ASSERT_LT(wrapped.count(), 0);
  const std::string m =
      invalid_message([&] { ratelimit::MemoryLimiter l(ratelimit::Gcra{.limit = 5, .period = wrapped, .burst = 5}); });
  EXPECT_EQ(m, "Gcra.period: must be > 0, got " + std::to_string(wrapped.count()) +
                   " ns (a negative duration usually means an overflow converting it)");
  // Zero is a plain mistake: no hint.
  EXPECT_EQ(invalid_message([] {
              ratelimit::MemoryLimiter l(ratelimit::FixedWindow{.limit = 5, .window = std::chrono::nanoseconds(0)});
            }),
            "FixedWindow.window: must be > 0, got 0 ns");
}

}  // namespace
