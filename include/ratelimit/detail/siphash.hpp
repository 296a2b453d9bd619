#pragma once

/// @file
/// SipHash (Aumasson and Bernstein, 2012), the keyed hash that hash tables facing untrusted keys use
/// (Python, Rust, Redis): without the random key an attacker cannot compute colliding keys, which
/// unkeyed hashes such as MurmurHash allow whatever their seed.

#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace ratelimit::detail {

/// SipHash-c-d of `data` under the 128-bit key (k0, k1). SipHash-1-3 is the variant used for tables;
/// SipHash-2-4 is the reference one (its published test vector checks this code).
template <int CompressionRounds, int FinalizationRounds>
[[nodiscard]] inline std::uint64_t siphash(std::uint64_t k0, std::uint64_t k1, std::string_view data) noexcept {
  std::uint64_t v0 = k0 ^ 0x736f6d6570736575ULL;
  std::uint64_t v1 = k1 ^ 0x646f72616e646f6dULL;
  std::uint64_t v2 = k0 ^ 0x6c7967656e657261ULL;
  std::uint64_t v3 = k1 ^ 0x7465646279746573ULL;
  auto round = [&] {
    v0 += v1;
    v1 = std::rotl(v1, 13);
    v1 ^= v0;
    v0 = std::rotl(v0, 32);
    v2 += v3;
    v3 = std::rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = std::rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = std::rotl(v1, 17);
    v1 ^= v2;
    v2 = std::rotl(v2, 32);
  };
  auto absorb = [&](std::uint64_t m) {
    v3 ^= m;
    for (int i = 0; i < CompressionRounds; ++i) round();
    v0 ^= m;
  };
  // Little-endian words, as the specification reads them.
  auto load = [](const char* p, std::size_t n) {
    std::uint64_t word = 0;
    if (n != 0) std::memcpy(&word, p, n);  // a default string_view has a null pointer: never read it
    if constexpr (std::endian::native == std::endian::big) word = __builtin_bswap64(word);
    return word;
  };
  const std::size_t whole = data.size() / 8 * 8;
  for (std::size_t i = 0; i < whole; i += 8) absorb(load(data.data() + i, 8));
  absorb((static_cast<std::uint64_t>(data.size()) << 56) | load(data.data() + whole, data.size() - whole));
  v2 ^= 0xff;
  for (int i = 0; i < FinalizationRounds; ++i) round();
  return v0 ^ v1 ^ v2 ^ v3;
}

}  // namespace ratelimit::detail
