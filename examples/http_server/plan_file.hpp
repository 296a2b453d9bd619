// examples/http_server: the plan file of --plans (JSON, read at start and on SIGHUP), read strictly: a reload
// either applies a whole valid file or changes nothing, so every number is checked before any limiter changes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace example {

/// One plan's numbers (include/ratelimit/layers/README.md "Tiers": per minute, per day, burst).
struct PlanNumbers {
  std::int64_t per_minute = 0;
  std::int64_t per_day = 0;
  std::int64_t burst = 0;
};

/// Files larger than this are refused (a plan file is a few hundred bytes; the reload runs on the signal thread).
inline constexpr std::uintmax_t kMaxPlanFileBytes = 1 << 20;

/// The plans named in `text`: `{"free": {"per_minute": 30, "per_day": 1000, "burst": 10}, ...}`. Every name
/// must be one of `known` (the plans are fixed at start: a reload changes their numbers, it adds or removes
/// none; a plan the file leaves out keeps its numbers), every plan exactly the three fields, each an integer
/// >= 1 (not 30.5, "30" or 1e30). Throws `std::invalid_argument` saying which plan and field, or
/// `nlohmann::json::parse_error` for text that is not JSON (a truncated file).
inline std::map<std::string, PlanNumbers> parse_plans(std::string_view text, const std::vector<std::string>& known) {
  const nlohmann::json plans = nlohmann::json::parse(text.begin(), text.end());
  if (!plans.is_object()) throw std::invalid_argument("the plan file must be a JSON object of plans");
  std::map<std::string, PlanNumbers> out;
  for (const auto& [name, fields] : plans.items()) {
    bool is_known = false;
    for (const std::string& k : known) is_known = is_known || k == name;
    if (!is_known) throw std::invalid_argument("unknown plan \"" + name + "\" (plans are fixed at start)");
    if (!fields.is_object()) throw std::invalid_argument(name + ": must be an object");
    PlanNumbers p;
    for (const auto& [field, value] : fields.items()) {
      std::int64_t* slot = field == "per_minute" ? &p.per_minute
                           : field == "per_day"  ? &p.per_day
                           : field == "burst"    ? &p.burst
                                                 : nullptr;
      if (slot == nullptr) throw std::invalid_argument(name + "." + field + ": unknown field");
      // Integers only: get<int64_t> of a float truncates it, and of one beyond int64 is undefined behaviour.
      const bool fits =
          value.is_number_unsigned() ? value.get<std::uint64_t>() <= INT64_MAX : value.is_number_integer();
      if (!fits || value.get<std::int64_t>() < 1) {
        throw std::invalid_argument(name + "." + field + ": must be an integer >= 1, got " + value.dump());
      }
      *slot = value.get<std::int64_t>();
    }
    for (const auto& [field, v] : {std::pair{"per_minute", p.per_minute}, {"per_day", p.per_day}, {"burst", p.burst}}) {
      if (v == 0) throw std::invalid_argument(name + "." + field + ": missing");
    }
    out[name] = p;
  }
  return out;
}

/// `parse_plans` of the file at `path`: a regular file of at most `kMaxPlanFileBytes` (not a FIFO, which
/// would block the reload). Throws `std::invalid_argument` (or `nlohmann::json::parse_error`) saying why.
inline std::map<std::string, PlanNumbers> read_plan_file(const std::string& path,
                                                         const std::vector<std::string>& known) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) throw std::invalid_argument("cannot open " + path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot open " + path);
  std::string text(kMaxPlanFileBytes + 1, '\0');  // one byte more: a file that grew past the bound is refused too
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxPlanFileBytes) throw std::invalid_argument(path + ": larger than 1 MiB");
  return parse_plans(text, known);
}

}  // namespace example
