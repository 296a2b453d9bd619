#pragma once

/// @file
/// `Mode`: what a policy script's call does (check, peek, refund, reserve, cancel or settle), and its ARGV entry.

#include <string_view>

#include "ratelimit/redis/abi.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace detail {

/// What a policy script's call does (its ARGV[3], `mode_arg`; lua/README.md). `reserve`, `cancel` and `settle` take
/// extra arguments after the parameters; a `settle`'s cost is the signed difference (a refund when <= 0).
enum class Mode { check, peek, refund, reserve, cancel, settle };
[[nodiscard]] constexpr std::string_view mode_arg(Mode m) noexcept {
  constexpr std::string_view args[] = {"0", "1", "2", "4", "5", "6"};
  return args[static_cast<int>(m)];
}

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
