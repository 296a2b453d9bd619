// One key-length check (README "Keys, costs and validation"): every limiter, layer and penalty box in
// memory refuses a key over its max_key_bytes with the same message, and accepts one at the bound.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>

namespace {

using namespace std::chrono_literals;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no exception)";
}

constexpr const char* kFiveOverFour = "key: 5 bytes exceeds max_key_bytes (4)";

TEST(KeyLength, TheCheckNamesTheSizeAndTheBound) {
  EXPECT_EQ(message_of([] { ratelimit::detail::check_key_length("12345", 4); }), kFiveOverFour);
  EXPECT_NO_THROW(ratelimit::detail::check_key_length("1234", 4));
  EXPECT_NO_THROW(ratelimit::detail::check_key_length("", 0));
}

TEST(KeyLength, MemoryLimiterLayerPenaltyBoxAndTiersSayTheSame) {
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter<ratelimit::FixedWindow, ratelimit::ManualClock> limiter(
      {.limit = 5, .window = 1s}, {.max_key_bytes = 4}, clock);
  EXPECT_EQ(message_of([&] { (void)limiter.allow("12345"); }), kFiveOverFour);
  EXPECT_TRUE(limiter.allow("1234").allowed);

  ratelimit::PenaltyBox box(16, 4);
  EXPECT_EQ(message_of([&] { (void)box.blocked_for("12345", 0); }), kFiveOverFour);

  ratelimit::TierOptions o;
  o.plans = {ratelimit::Plan{"free", 30, 1'000, 10}};
  o.default_plan = "free";
  o.memory.max_key_bytes = 4;
  ratelimit::TieredLimiter<ratelimit::ManualClock> tiers(
      o, [](std::string_view) { return std::optional<std::string>(); }, clock);
  EXPECT_EQ(message_of([&] { (void)tiers.plan_for("12345"); }), kFiveOverFour);
}

}  // namespace
