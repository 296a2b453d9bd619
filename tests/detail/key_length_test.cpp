// One key-length check (include/ratelimit/README.md "Keys, costs and validation"): every limiter, layer and penalty box
// in memory refuses a key over its max_key_bytes with the same message, and accepts one at the bound.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>

#include "../support/invalid_message.hpp"

namespace {

using namespace std::chrono_literals;

using ratelimit_test::invalid_message;

constexpr const char* kFiveOverFour = "key: 5 bytes exceeds max_key_bytes (4)";

TEST(KeyLength, TheCheckNamesTheSizeAndTheBound) {
  EXPECT_EQ(invalid_message([] { ratelimit::detail::check_key_length("12345", 4); }), kFiveOverFour);
  EXPECT_NO_THROW(ratelimit::detail::check_key_length("1234", 4));
  EXPECT_NO_THROW(ratelimit::detail::check_key_length("", 0));
}

TEST(KeyLength, MemoryLimiterLayerPenaltyBoxAndTiersSayTheSame) {
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter<ratelimit::FixedWindow, ratelimit::ManualClock> limiter({.limit = 5, .window = 1s},
                                                                                   {.max_key_bytes = 4}, clock);
  EXPECT_EQ(invalid_message([&] { (void)limiter.allow("12345"); }), kFiveOverFour);
  EXPECT_TRUE(limiter.allow("1234").allowed);

  ratelimit::PenaltyBox box(16, 4);
  EXPECT_EQ(invalid_message([&] { (void)box.blocked_for("12345", 0); }), kFiveOverFour);

  ratelimit::TierOptions o;
  o.plans = {ratelimit::Plan{"free", 30, 1'000, 10}};
  o.default_plan = "free";
  o.memory.max_key_bytes = 4;
  ratelimit::TieredLimiter<ratelimit::ManualClock> tiers(
      o, [](std::string_view) { return std::optional<std::string>(); }, clock);
  EXPECT_EQ(invalid_message([&] { (void)tiers.plan_for("12345"); }), kFiveOverFour);
}

}  // namespace
