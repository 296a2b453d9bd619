#pragma once

/// @file
/// `Reply`: RAII ownership of a hiredis reply.

#include <hiredis/hiredis.h>

#include <cstddef>
#include <memory>
#include <string_view>

#include "ratelimit/redis/abi.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace engine {

namespace detail {
/// A `unique_ptr` deleter calling `F` (`freeReplyObject`, `redisFree`, `SSL_free`, ...).
template <auto F>
struct Free {
  template <class T>
  void operator()(T* p) const noexcept {
    F(p);
  }
};
}  // namespace detail

/// An owned hiredis reply (and its elements); null only when moved from. Move-only.
using Reply = std::unique_ptr<redisReply, detail::Free<freeReplyObject>>;

/// True when `reply` is an error reply whose message starts with `prefix` (e.g. `MOVED`).
[[nodiscard]] inline bool is_error(const redisReply& reply, std::string_view prefix = {}) noexcept {
  if (reply.type != REDIS_REPLY_ERROR || reply.str == nullptr) return false;
  return std::string_view(reply.str, reply.len).starts_with(prefix);
}

/// The bytes of a string, status or error reply; empty for other types.
[[nodiscard]] inline std::string_view text(const redisReply& reply) noexcept {
  const bool has_text =
      reply.type == REDIS_REPLY_STRING || reply.type == REDIS_REPLY_STATUS || reply.type == REDIS_REPLY_ERROR;
  return has_text && reply.str != nullptr ? std::string_view(reply.str, reply.len) : std::string_view{};
}

}  // namespace engine
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
