#pragma once

/// @file
/// Redis key layout (include/ratelimit/redis/README.md "Key layout"): `<prefix><identity>{<encoded key>}<suffix>`.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/redis/abi.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace detail {

/// Encodes a user key for the hash tag: `%` becomes `%25`, `}` becomes `%7D`, the empty key a lone `%`. Injective,
/// never empty (an empty tag `{}` hashes the whole key, splitting a key's Redis keys across slots) and free of `}`
/// (which ends the tag); `{` may stay, as only the first `{` opens the tag.
[[nodiscard]] inline std::string encode_key(std::string_view key) {
  if (key.empty()) return "%";
  std::string out;
  out.reserve(key.size() + 8);
  for (const char c : key) out += c == '%' ? std::string_view("%25") : (c == '}' ? "%7D" : std::string_view(&c, 1));
  return out;
}

/// The inverse of `encode_key`; `std::nullopt` for a string `encode_key` never produces.
[[nodiscard]] inline std::optional<std::string> decode_key(std::string_view encoded) {
  if (encoded == "%") return std::string();
  if (encoded.empty()) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    const std::string_view esc = encoded.substr(i, 3);
    if (encoded[i] == '}' || (encoded[i] == '%' && esc != "%25" && esc != "%7D")) return std::nullopt;
    out += encoded[i] != '%' ? encoded[i] : (esc == "%25" ? '%' : '}');
    if (encoded[i] == '%') i += 2;
  }
  return out;
}

/// A limiter's identity in its Redis keys: `<kind>@<name>` when named, else `<kind>:<p1>:<p2>...` (its script
/// parameters: equal rules give equal identities). The byte after the kind tells the two forms apart.
[[nodiscard]] inline std::string limiter_identity(std::string_view kind, std::string_view name,
                                                  const std::vector<std::string>& params) {
  std::string out(kind);
  if (!name.empty()) return out + '@' + std::string(name);
  for (const std::string& p : params) out += ':' + p;
  return out;
}

/// `<prefix><identity>{<encode_key(key)>}<suffix>`; the prefix holds no braces (checked when the limiter is made),
/// so the hash tag is exactly the encoded key and distinct (prefix, identity, key) never share a Redis key.
[[nodiscard]] inline std::string redis_key(std::string_view prefix, std::string_view identity, std::string_view key,
                                           std::string_view suffix) {
  std::string out(prefix);
  out.append(identity).append(1, '{').append(encode_key(key)).append(1, '}').append(suffix);
  return out;
}

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
