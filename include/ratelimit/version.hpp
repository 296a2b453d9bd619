#pragma once

/// @file
/// The one source of the library's version: the three macros below. CMake's project version is read
/// from them, and `version_string` is made from them.

#define RATELIMIT_VERSION_MAJOR 0
#define RATELIMIT_VERSION_MINOR 2
#define RATELIMIT_VERSION_PATCH 0

#define RATELIMIT_DETAIL_STRINGIFY_(x) #x
#define RATELIMIT_DETAIL_STRINGIFY(x) RATELIMIT_DETAIL_STRINGIFY_(x)
/// The version as a string literal, "major.minor.patch".
#define RATELIMIT_VERSION_STRING                      \
  RATELIMIT_DETAIL_STRINGIFY(RATELIMIT_VERSION_MAJOR) \
  "." RATELIMIT_DETAIL_STRINGIFY(RATELIMIT_VERSION_MINOR) "." RATELIMIT_DETAIL_STRINGIFY(RATELIMIT_VERSION_PATCH)

namespace ratelimit {
/// The library version as "major.minor.patch".
inline constexpr const char* version_string = RATELIMIT_VERSION_STRING;
}  // namespace ratelimit
