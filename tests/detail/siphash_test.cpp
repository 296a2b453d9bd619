// SipHash against the reference test vector, and its keying.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

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

}  // namespace
