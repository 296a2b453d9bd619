#pragma once

/// @file
/// The one key-length check of every limiter, layer and penalty box (include/ratelimit/README.md "Keys, costs and
/// validation").

#include <cstddef>
#include <string>
#include <string_view>

#include "ratelimit/detail/arithmetic.hpp"

namespace ratelimit::detail {

/// Throws `std::invalid_argument` ("<field>: N bytes exceeds max_key_bytes (M)"); `field` names a batch's request.
[[noreturn, gnu::cold, gnu::noinline]] inline void throw_key_too_long(std::size_t size, std::size_t max_key_bytes,
                                                                      std::string_view field = "key") {
  invalid(field, std::to_string(size) + " bytes exceeds max_key_bytes (" + std::to_string(max_key_bytes) + ")");
}

/// Throws `std::invalid_argument` ("key: N bytes exceeds max_key_bytes (M)") when `key` is longer than
/// `max_key_bytes`. Callers check before any other work, so an over-long key costs nothing else.
inline void check_key_length(std::string_view key, std::size_t max_key_bytes) {
  if (key.size() > max_key_bytes) [[unlikely]]
    throw_key_too_long(key.size(), max_key_bytes);
}

}  // namespace ratelimit::detail
