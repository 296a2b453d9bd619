// PenaltyBox at its key bound: the least recently blocked key is released early, never the newest.
#include <gtest/gtest.h>

#include <cstdint>

#include <ratelimit/layers.hpp>

namespace {

TEST(PenaltyBox, AtTheBoundTheKeyBlockedLongAgoIsReleasedNotTheOneBlockedNow) {
  constexpr std::int64_t kMinute = 60'000'000'000;
  for (const std::int64_t unit : {std::int64_t{100}, std::int64_t{101}}) {  // both parities of a ~1 ms unit
    ratelimit::PenaltyBox box(2);
    box.block("old", 0, 10 * kMinute);
    const std::int64_t now = unit << 20;
    box.block("hot", now, kMinute);
    box.block("new", now, kMinute);
    EXPECT_GT(box.blocked_for("hot", now), 0) << "the key blocked now was released, at unit " << unit;
    EXPECT_GT(box.blocked_for("new", now), 0);
    EXPECT_EQ(box.blocked_for("old", now), 0) << "the key blocked long ago stayed, at unit " << unit;
  }
}

}  // namespace

namespace {

TEST(PenaltyBox, DefaultStringViewIsTheEmptyKey) {
  ratelimit::PenaltyBox box;
  box.block(std::string_view{}, 0, 1'000);
  EXPECT_EQ(box.blocked_for("", 0), 1'000);
  EXPECT_EQ(box.blocked_for(std::string_view{}, 500), 500);
}

}  // namespace
