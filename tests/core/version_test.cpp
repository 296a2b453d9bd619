// The version has one source, the three macros of version.hpp: the string is made from them, and CMake's
// project version (read from the same header) agrees.
#include <gtest/gtest.h>

#include <string>

#include <ratelimit/ratelimit.hpp>

namespace {

TEST(Version, StringIsMadeFromTheMacros) {
  const std::string expected = std::to_string(RATELIMIT_VERSION_MAJOR) + "." + std::to_string(RATELIMIT_VERSION_MINOR) +
                               "." + std::to_string(RATELIMIT_VERSION_PATCH);
  EXPECT_EQ(ratelimit::version_string, expected);
}

TEST(Version, CMakeProjectVersionAgrees) { EXPECT_STREQ(ratelimit::version_string, RATELIMIT_PROJECT_VERSION); }

}  // namespace
