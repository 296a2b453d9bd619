#pragma once

/// @file
/// Unaligned little-endian word loads, as the keyed hashes read keys.

#include <bit>
#include <cstdint>
#include <cstring>

namespace ratelimit::detail {

// GCC 12 may warn of a load past a short std::string's inline buffer on a path its size rules out (a key of
// known length 1 whose hash inlines here, in some units): the callers load only within the key.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#endif

/// The 8 bytes at `p` as a little-endian word; `p` holds at least 8 bytes, any alignment.
[[nodiscard, gnu::always_inline]] inline std::uint64_t load64_le(const char* p) noexcept {
  std::uint64_t word = 0;
  std::memcpy(&word, p, 8);
  if constexpr (std::endian::native == std::endian::big) word = __builtin_bswap64(word);
  return word;
}

/// The 4 bytes at `p` as a little-endian word; `p` holds at least 4 bytes, any alignment.
[[nodiscard, gnu::always_inline]] inline std::uint64_t load32_le(const char* p) noexcept {
  std::uint32_t word = 0;
  std::memcpy(&word, p, 4);
  if constexpr (std::endian::native == std::endian::big) word = __builtin_bswap32(word);
  return word;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace ratelimit::detail
