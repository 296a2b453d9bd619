#pragma once

/// @file
/// `Mode`: what a policy script's call does (check, peek or refund), and its ARGV entry.

#include <string_view>

#include "ratelimit/redis/abi.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace detail {

/// What a policy script's call does (its ARGV[3], `mode_arg`).
enum class Mode { check, peek, refund };
[[nodiscard]] constexpr std::string_view mode_arg(Mode m) noexcept {
  return m == Mode::check ? "0" : (m == Mode::peek ? "1" : "2");
}

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
