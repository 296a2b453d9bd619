// The seeds of the keyed hashes come from the operating system: two draws differ, every word is filled
// (also past getentropy's 256 bytes per call), and words outside the range are left alone.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include <ratelimit/detail/entropy.hpp>
#include <ratelimit/detail/multiply_hash.hpp>

namespace {

TEST(Entropy, TwoSeedsDiffer) {
  const ratelimit::detail::HashSeed a = ratelimit::detail::HashSeed::random();
  const ratelimit::detail::HashSeed b = ratelimit::detail::HashSeed::random();
  int equal = 0;
  for (int i = 0; i < 4; ++i) equal += a.word[i] == b.word[i] ? 1 : 0;
  EXPECT_EQ(equal, 0);  // 4 equal-by-chance 64-bit words: probability 2^-62 per word
}

TEST(Entropy, FillsEveryWordOfALongRangeAndNothingElse) {
  // 100 words (800 bytes): four getentropy calls; the guard words on each side must stay 0.
  std::vector<std::uint64_t> words(102, 0);
  ratelimit::detail::fill_with_entropy(words.data() + 1, 100);
  EXPECT_EQ(words.front(), 0u);
  EXPECT_EQ(words.back(), 0u);
  const std::set<std::uint64_t> distinct(words.begin() + 1, words.end() - 1);
  EXPECT_EQ(distinct.size(), 100u);  // a word left 0 or a block repeated would show here
  EXPECT_EQ(distinct.count(0), 0u);
}

}  // namespace
