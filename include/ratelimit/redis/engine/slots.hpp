#pragma once

/// @file
/// Redis Cluster key slots: CRC16 (XMODEM) of the key's hash tag, modulo 16384.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ratelimit/redis/abi.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace engine {
namespace detail {

/// Number of hash slots of a Redis Cluster.
inline constexpr std::uint16_t kClusterSlots = 16384;

/// CRC16-CCITT in its XMODEM form (polynomial 0x1021, initial value 0, no reflection), the checksum
/// Redis Cluster hashes keys with (cluster specification, "Keys distribution model"); 0x31C3 for
/// "123456789". Table-driven: one lookup per byte.
[[nodiscard]] constexpr std::uint16_t crc16_xmodem(std::string_view bytes) noexcept {
  constexpr std::array<std::uint16_t, 256> table = [] {
    std::array<std::uint16_t, 256> t{};
    for (std::size_t i = 0; i < 256; ++i) {
      auto crc = static_cast<std::uint16_t>(i << 8);
      for (int bit = 0; bit < 8; ++bit) {
        crc = (crc & 0x8000) != 0 ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                                  : static_cast<std::uint16_t>(crc << 1);
      }
      t[i] = crc;
    }
    return t;
  }();
  std::uint16_t crc = 0;
  for (const char ch : bytes) {
    const auto index = static_cast<std::size_t>(((crc >> 8) ^ static_cast<unsigned char>(ch)) & 0xff);
    crc = static_cast<std::uint16_t>((crc << 8) ^ table[index]);
  }
  return crc;
}

/// The slot of a Redis key, 0..16383: only the hash tag is hashed (the bytes between the first `{` and
/// the first `}` after it) when it is non-empty, else the whole key. Our keys always carry a non-empty
/// tag (`detail::redis_key`), so all Redis keys of one limiter key share one slot.
[[nodiscard]] constexpr std::uint16_t key_slot(std::string_view key) noexcept {
  std::string_view hashed = key;
  if (const auto open = key.find('{'); open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close != open + 1) hashed = key.substr(open + 1, close - open - 1);
  }
  return static_cast<std::uint16_t>(crc16_xmodem(hashed) % kClusterSlots);
}

}  // namespace detail
}  // namespace engine
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
