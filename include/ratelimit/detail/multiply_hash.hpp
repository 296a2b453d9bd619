#pragma once

/// @file
/// The keyed hash of the in-memory store: folded 64 x 64 -> 128-bit multiplications of the key's words
/// XORed with a random 256-bit seed (the construction of wyhash, rapidhash and Rust's foldhash). Two
/// multiplications for a key of up to 16 bytes, against SipHash-1-3's six rounds: the store hashes every
/// key of every check. Keyed, so an attacker who sends keys cannot compute keys that collide (unkeyed or
/// fixed-seed hashes allow that); it is not a PRF as SipHash is, which a table does not need because it
/// never reveals hashes (include/ratelimit/README.md "Hostile input and faults").

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ratelimit/detail/entropy.hpp"
#include "ratelimit/detail/word_loads.hpp"

namespace ratelimit::detail {

/// The random seed of one table's hash: four independent 64-bit words.
struct HashSeed {
  std::uint64_t word[4] = {};

  /// A seed from the operating system's entropy (`fill_with_entropy`).
  [[nodiscard]] static HashSeed random() {
    HashSeed seed;
    fill_with_entropy(seed.word, 4);
    return seed;
  }
};

namespace multiply {

/// The high and low halves of the full product, XORed: every bit of both inputs reaches the high bits,
/// which pick the store's shard and slot.
[[nodiscard, gnu::always_inline]] inline std::uint64_t fold(std::uint64_t a, std::uint64_t b) noexcept {
  __extension__ using u128 = unsigned __int128;
  const u128 product = u128{a} * b;
  return static_cast<std::uint64_t>(product) ^ static_cast<std::uint64_t>(product >> 64);
}

}  // namespace multiply

/// The keyed hash of `data` under `seed`. For the same length, distinct keys of up to 16 bytes give
/// distinct word pairs (overlapping fixed-size loads read every byte); longer keys chain 16-byte blocks,
/// the last one overlapping. The length enters the final multiplication, so keys of different lengths
/// whose words agree still differ.
[[nodiscard, gnu::always_inline]] inline std::uint64_t multiply_hash(const HashSeed& seed,
                                                                     std::string_view data) noexcept {
  using multiply::fold;
  const char* p = data.data();
  const std::size_t size = data.size();
  std::uint64_t a = 0;
  std::uint64_t b = 0;
  std::uint64_t chain = seed.word[1];
  if (size <= 16) {
    if (size >= 8) {
      a = load64_le(p);
      b = load64_le(p + size - 8);
    } else if (size >= 4) {
      a = load32_le(p);
      b = load32_le(p + size - 4);
    } else if (size > 0) {  // a default string_view's null pointer is never read
      const auto byte = [](char c) { return std::uint64_t{static_cast<unsigned char>(c)}; };
      a = (byte(p[0]) << 16) | (byte(p[size / 2]) << 8) | byte(p[size - 1]);
    }
  } else {
    const char* const last = p + size - 16;
    for (; p < last; p += 16) chain = fold(load64_le(p) ^ seed.word[0], load64_le(p + 8) ^ chain);
    a = load64_le(last);
    b = load64_le(last + 8);
  }
  const std::uint64_t h = fold(a ^ seed.word[0], b ^ chain);
  return fold(h ^ seed.word[2], static_cast<std::uint64_t>(size) ^ seed.word[3]);
}

}  // namespace ratelimit::detail
