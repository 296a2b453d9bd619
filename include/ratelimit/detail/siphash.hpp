#pragma once

/// @file
/// SipHash (Aumasson and Bernstein, 2012), the keyed hash that hash tables facing untrusted keys use
/// (Python, Rust, Redis): without the random key an attacker cannot compute colliding keys, which
/// unkeyed hashes such as MurmurHash allow whatever their seed.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ratelimit/detail/word_loads.hpp"

namespace ratelimit::detail {

namespace sip {

/// The last `n` (0 to 7) bytes of a message of `size` bytes ending at `end`, as the low bytes of a word.
/// Fixed-size loads, no call to memcpy: a message of 8 bytes or more reads the 8 bytes before `end`
/// (overlapping what was absorbed) and shifts; a shorter one reads two overlapping halves.
[[nodiscard, gnu::always_inline]] inline std::uint64_t tail(const char* end, std::size_t n, std::size_t size) noexcept {
  if (n == 0) return 0;  // also a default string_view, whose null pointer is never read
  if (size >= 8) return load64_le(end - 8) >> (64 - 8 * n);
  const char* p = end - n;
  if (n >= 4) return load32_le(p) | (load32_le(end - 4) << (8 * (n - 4)));  // the overlap ORs equal bytes
  const auto byte = [](char c) { return std::uint64_t{static_cast<unsigned char>(c)}; };
  return byte(p[0]) | (byte(p[n / 2]) << (8 * (n / 2))) | (byte(p[n - 1]) << (8 * (n - 1)));
}

}  // namespace sip

/// SipHash-c-d of `data` under the 128-bit key (k0, k1). SipHash-1-3 is the variant used for tables;
/// SipHash-2-4 is the reference one (its published test vector checks this code). Inlined with
/// fixed-size loads: the store hashes every key of every check.
template <int CompressionRounds, int FinalizationRounds>
[[nodiscard, gnu::always_inline]] inline std::uint64_t siphash(std::uint64_t k0, std::uint64_t k1,
                                                               std::string_view data) noexcept {
  std::uint64_t v0 = k0 ^ 0x736f6d6570736575ULL;
  std::uint64_t v1 = k1 ^ 0x646f72616e646f6dULL;
  std::uint64_t v2 = k0 ^ 0x6c7967656e657261ULL;
  std::uint64_t v3 = k1 ^ 0x7465646279746573ULL;
  auto round = [&]() __attribute__((always_inline)) {
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
  auto absorb = [&](std::uint64_t m) __attribute__((always_inline)) {
    v3 ^= m;
    for (int i = 0; i < CompressionRounds; ++i) round();
    v0 ^= m;
  };
  const char* p = data.data();
  const std::size_t size = data.size();
  const char* const end = p + size;
  for (std::size_t left = size; left >= 8; left -= 8, p += 8) absorb(load64_le(p));
  absorb((static_cast<std::uint64_t>(size) << 56) | sip::tail(end, size % 8, size));
  v2 ^= 0xff;
  for (int i = 0; i < FinalizationRounds; ++i) round();
  return v0 ^ v1 ^ v2 ^ v3;
}

}  // namespace ratelimit::detail
