#pragma once

/// @file
/// The one source of the library's version; CMake parses these three lines.

#define RATELIMIT_VERSION_MAJOR 0
#define RATELIMIT_VERSION_MINOR 1
#define RATELIMIT_VERSION_PATCH 0

namespace ratelimit {
/// The library version as "major.minor.patch".
inline constexpr const char* version_string = "0.1.0";
}  // namespace ratelimit
