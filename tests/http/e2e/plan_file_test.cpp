// The example's plan file (--plans, read at start and on SIGHUP) is read strictly, so that a reload either
// applies a whole valid file or changes nothing: no float truncated or cast out of range (undefined
// behaviour), no unknown plan or field ignored in silence, no FIFO or huge file read.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../../examples/http_server/plan_file.hpp"

namespace {

const std::vector<std::string> kPlanNames = {"free", "pro"};

std::string plan_error(const std::string& text) {
  try {
    (void)example::parse_plans(text, kPlanNames);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "<accepted>";
}

TEST(HttpServerPlanFile, ReadsValidPlansAndRefusesEverythingElse) {
  const auto plans = example::parse_plans(R"({"pro": {"per_minute": 300, "per_day": 50000, "burst": 50}})", kPlanNames);
  ASSERT_EQ(plans.size(), 1u);  // free left out: keeps its numbers
  EXPECT_EQ(plans.at("pro").per_minute, 300);
  EXPECT_EQ(plans.at("pro").per_day, 50'000);
  EXPECT_EQ(plans.at("pro").burst, 50);
  const std::string ok_rest = R"(, "per_day": 1000, "burst": 10}})";
  EXPECT_NE(plan_error(R"({"free": {"per_minute": 1e30)" + ok_rest).find("free.per_minute"), std::string::npos);
  EXPECT_NE(plan_error(R"({"free": {"per_minute": 30.5)" + ok_rest).find("integer"), std::string::npos);
  EXPECT_NE(plan_error(R"({"free": {"per_minute": "30")" + ok_rest).find("free.per_minute"), std::string::npos);
  EXPECT_NE(plan_error(R"({"free": {"per_minute": 0)" + ok_rest).find(">= 1"), std::string::npos);
  EXPECT_NE(plan_error(R"({"free": {"per_minute": 18446744073709551615)" + ok_rest).find("free.per_minute"),
            std::string::npos);
  EXPECT_NE(plan_error(R"({"free": {"per_minute": 30, "burst": 10}})").find("free.per_day: missing"),
            std::string::npos);
  EXPECT_NE(plan_error(R"({"free": {"per_minute": 30, "brust": 10)" + ok_rest).find("free.brust"), std::string::npos);
  EXPECT_NE(plan_error(R"({"gold": {"per_minute": 30)" + ok_rest).find("unknown plan \"gold\""), std::string::npos);
  EXPECT_NE(plan_error(R"([1, 2])").find("JSON object"), std::string::npos);
  EXPECT_NE(plan_error(R"({"free": 3})").find("free: must be an object"), std::string::npos);
  EXPECT_THROW((void)example::parse_plans(R"({"free": {"per_minute": 30, "per_d)", kPlanNames),
               nlohmann::json::parse_error);  // truncated
}

TEST(HttpServerPlanFile, RefusesFifosAndHugeFiles) {
  const std::string dir = ::testing::TempDir() + "ratelimit_plan_file_" + std::to_string(::getpid());
  const std::string fifo = dir + ".fifo", huge = dir + ".json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THROW((void)example::read_plan_file(fifo, kPlanNames), std::invalid_argument);  // never blocks
  std::FILE* f = std::fopen(huge.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("{\"free\": {\"per_minute\": 30, \"per_day\": 1000, \"burst\": 10}}", f);
  for (std::uintmax_t i = 0; i <= example::kMaxPlanFileBytes; i += 64) std::fputs(std::string(64, ' ').c_str(), f);
  std::fclose(f);
  try {
    (void)example::read_plan_file(huge, kPlanNames);
    ADD_FAILURE() << "a file over 1 MiB was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("larger than 1 MiB"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)example::read_plan_file(dir + ".missing", kPlanNames), std::invalid_argument);
  std::remove(fifo.c_str());
  std::remove(huge.c_str());
}

}  // namespace
