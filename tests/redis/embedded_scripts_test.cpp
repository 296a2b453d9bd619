// The scripts compiled into the headers are their lua/ files (parts, then main) concatenated byte for
// byte, and Redis agrees on their SHA1.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot open " << path;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(EmbeddedScripts, EqualTheirFilesByteForByte) {
  std::set<std::string> kinds;
  for (const auto& s : ratelimit::redis::detail::kEmbeddedScripts) {
    std::string assembled;
    std::size_t files = 0;
    std::istringstream parts{std::string(s.parts)};
    for (std::string rel; parts >> rel; ++files) {
      const std::string file = read_file(std::string(RATELIMIT_LUA_DIR) + "/" + rel);
      EXPECT_FALSE(file.empty()) << rel;
      assembled += file;
    }
    EXPECT_GE(files, 2u) << s.file;                                               // at least one part and the main
    EXPECT_TRUE(std::string(s.parts).ends_with(std::string(s.file))) << s.parts;  // the main comes last
    EXPECT_EQ(std::string(s.body), assembled) << s.file;
    kinds.emplace(s.kind);
  }
  const std::set<std::string> expected{
      "fixed_window",     "sliding_window_log", "sliding_window_counter", "token_bucket",        "gcra",
      "layered",          "gcra_lease",         "fixed_window_lease",     "concurrency_acquire", "concurrency_release",
      "concurrency_renew"};
  EXPECT_EQ(kinds, expected);
}

// The Functions library built at run time is the one CMake wrote next to the assembled scripts, and the
// server takes it under its versioned name with one function per script.
TEST(EmbeddedScripts, FunctionLibraryEqualsItsGeneratedFileAndLoads) {
  const std::string& code = ratelimit::redis::detail::function_library_code();
  EXPECT_EQ(code, read_file(std::string(RATELIMIT_GENERATED_LUA_DIR) + "/library.lua"));
  RATELIMIT_REQUIRE_REDIS();
  auto admin = ratelimit_test::shared_redis()->admin();
  const std::string name(ratelimit::redis::detail::kFunctionLibrary);
  (void)admin.command({"FUNCTION", "DELETE", name});
  EXPECT_EQ(ratelimit::redis::engine::text(*admin.command({"FUNCTION", "LOAD", code})), name);
  const auto list = admin.command({"FUNCTION", "LIST", "LIBRARYNAME", name});
  ASSERT_EQ(list->elements, 1u);
  const redisReply& lib = *list->element[0];  // [library_name, n, engine, e, functions, [...]]
  ASSERT_GE(lib.elements, 6u);
  EXPECT_EQ(lib.element[5]->elements, std::size(ratelimit::redis::detail::kEmbeddedScripts));
  (void)admin.command({"FUNCTION", "DELETE", name});
}

TEST(EmbeddedScripts, ServerComputesTheSameSha1) {
  RATELIMIT_REQUIRE_REDIS();
  auto admin = ratelimit_test::shared_redis()->admin();
  for (const auto& s : ratelimit::redis::detail::kEmbeddedScripts) {
    const auto r = admin.command({"SCRIPT", "LOAD", s.body});
    EXPECT_EQ(ratelimit::redis::engine::text(*r), s.sha1) << s.file;
  }
}

}  // namespace
