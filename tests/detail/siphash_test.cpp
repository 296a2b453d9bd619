// SipHash against the reference test vector, and its keying.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <string>
#include <utility>

#include <ratelimit/detail/siphash.hpp>

namespace {

TEST(SipHash, ReferenceVectorOfTheSipHashPaper) {
  // Appendix A of "SipHash: a fast short-input PRF": key 00..0f, message 00..0e.
  std::string message;
  for (char c = 0; c < 15; ++c) message += c;
  EXPECT_EQ((ratelimit::detail::siphash<2, 4>(0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL, message)),
            0xa129ca6149be45e5ULL);
}

TEST(SipHash, DependsOnKeyLengthAndEveryByte) {
  using ratelimit::detail::siphash;
  const std::string a(24, 'a');
  EXPECT_NE((siphash<1, 3>(1, 2, a)), (siphash<1, 3>(1, 3, a)));
  EXPECT_NE((siphash<1, 3>(1, 2, a)), (siphash<1, 3>(1, 2, a.substr(0, 23))));
  EXPECT_NE((siphash<1, 3>(1, 2, "")), (siphash<1, 3>(1, 2, std::string(1, '\0'))));
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::string b = a;
    b[i] = 'b';
    EXPECT_NE((siphash<1, 3>(1, 2, a)), (siphash<1, 3>(1, 2, b))) << i;
  }
}

/// SipHash as the specification writes it: the message read a byte at a time into little-endian words.
template <int C, int D>
std::uint64_t bytewise_siphash(std::uint64_t k0, std::uint64_t k1, const std::string& m) {
  std::uint64_t v[4] = {k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL, k0 ^ 0x6c7967656e657261ULL,
                        k1 ^ 0x7465646279746573ULL};
  auto round = [&] {
    v[0] += v[1], v[1] = std::rotl(v[1], 13), v[1] ^= v[0], v[0] = std::rotl(v[0], 32);
    v[2] += v[3], v[3] = std::rotl(v[3], 16), v[3] ^= v[2];
    v[0] += v[3], v[3] = std::rotl(v[3], 21), v[3] ^= v[0];
    v[2] += v[1], v[1] = std::rotl(v[1], 17), v[1] ^= v[2], v[2] = std::rotl(v[2], 32);
  };
  auto absorb = [&](std::uint64_t w) {
    v[3] ^= w;
    for (int i = 0; i < C; ++i) round();
    v[0] ^= w;
  };
  std::uint64_t word = 0;
  for (std::size_t i = 0; i < m.size(); ++i) {
    word |= std::uint64_t{static_cast<unsigned char>(m[i])} << (8 * (i % 8));
    if (i % 8 == 7) absorb(std::exchange(word, 0));
  }
  absorb(word | (static_cast<std::uint64_t>(m.size()) << 56));
  v[2] ^= 0xff;
  for (int i = 0; i < D; ++i) round();
  return v[0] ^ v[1] ^ v[2] ^ v[3];
}

TEST(SipHash, FixedSizeLoadsReadEveryLengthAsTheSpecification) {
  // The tail of every length mod 8 (overlapping loads, two halves, single bytes), under random keys.
  std::mt19937_64 random(7);
  for (std::size_t length = 0; length <= 40; ++length) {
    for (int trial = 0; trial < 20; ++trial) {
      std::string m(length, '\0');
      for (char& c : m) c = static_cast<char>(random());
      const std::uint64_t k0 = random(), k1 = random();
      ASSERT_EQ((ratelimit::detail::siphash<1, 3>(k0, k1, m)), (bytewise_siphash<1, 3>(k0, k1, m))) << length;
      ASSERT_EQ((ratelimit::detail::siphash<2, 4>(k0, k1, m)), (bytewise_siphash<2, 4>(k0, k1, m))) << length;
    }
  }
}

}  // namespace
