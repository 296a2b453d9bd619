#pragma once

// Parsing of the Common and Combined Log Formats, as nginx and Apache write them:
//   host ident user [17/May/2015:10:05:03 +0000] "GET /path HTTP/1.1" 200 203023 "referer" "user agent"
// The combined format's two trailing quoted fields are optional (the common format stops after the size).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace access_log {

struct Entry {
  std::string client;                 // the remote host field
  std::chrono::sys_seconds time;      // the request time, converted to UTC; fits int64 nanoseconds
  std::string method;                 // "GET"; empty when the request line is not "METHOD TARGET PROTOCOL"
  std::string target;                 // "/path?query"
  int status = 0;                     // HTTP status
  std::string user_agent;             // empty in the common format
};

namespace detail {

inline std::string_view next_token(std::string_view& rest) {
  const std::size_t end = rest.find(' ');
  std::string_view token = rest.substr(0, end);
  rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
  return token;
}

// A "quoted" field with backslash escapes, as nginx writes them; leaves `rest` after the closing quote.
inline std::optional<std::string> quoted(std::string_view& rest) {
  if (rest.empty() || rest.front() != '"') return std::nullopt;
  std::string out;
  for (std::size_t i = 1; i < rest.size(); ++i) {
    if (rest[i] == '\\' && i + 1 < rest.size()) {
      out += rest[++i];
    } else if (rest[i] == '"') {
      rest.remove_prefix(std::min(rest.size(), i + 2));  // quote and the following space
      return out;
    } else {
      out += rest[i];
    }
  }
  return std::nullopt;
}

inline std::optional<int> number(std::string_view s, std::size_t digits) {
  if (s.size() != digits) return std::nullopt;
  int value = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

/// The times an int64 count of nanoseconds holds, to the second.
inline constexpr std::chrono::sys_seconds kEarliest{
    std::chrono::floor<std::chrono::seconds>(std::chrono::nanoseconds::min()) + std::chrono::seconds{1}};
inline constexpr std::chrono::sys_seconds kLatest{
    std::chrono::floor<std::chrono::seconds>(std::chrono::nanoseconds::max())};

// "17/May/2015:10:05:03 +0000" to UTC (zones from -2359 to +2359).
inline std::optional<std::chrono::sys_seconds> timestamp(std::string_view s) {
  static constexpr std::string_view kMonths = "JanFebMarAprMayJunJulAugSepOctNovDec";
  if (s.size() != 26 || s[2] != '/' || s[6] != '/' || s[11] != ':' || s[14] != ':' || s[17] != ':' || s[20] != ' ') {
    return std::nullopt;
  }
  const std::size_t month_at = kMonths.find(s.substr(3, 3));
  const auto day = number(s.substr(0, 2), 2), year = number(s.substr(7, 4), 4);
  const auto hour = number(s.substr(12, 2), 2), minute = number(s.substr(15, 2), 2), second = number(s.substr(18, 2), 2);
  const auto zone_h = number(s.substr(22, 2), 2), zone_m = number(s.substr(24, 2), 2);
  if (month_at == std::string_view::npos || month_at % 3 != 0 || !day || !year || !hour || !minute || !second ||
      !zone_h || !zone_m || (s[21] != '+' && s[21] != '-') || *hour > 23 || *minute > 59 || *second > 60 ||
      *zone_h > 23 || *zone_m > 59) {
    return std::nullopt;
  }
  const std::chrono::year_month_day date{std::chrono::year{*year},
                                         std::chrono::month{static_cast<unsigned>(month_at / 3 + 1)},
                                         std::chrono::day{static_cast<unsigned>(*day)}};
  if (!date.ok()) return std::nullopt;
  const std::chrono::seconds zone = std::chrono::hours{*zone_h} + std::chrono::minutes{*zone_m};
  const std::chrono::sys_seconds utc = std::chrono::sys_days{date} + std::chrono::hours{*hour} +
                                       std::chrono::minutes{*minute} + std::chrono::seconds{*second} -
                                       (s[21] == '+' ? zone : -zone);
  // The replay runs on a nanosecond clock: a time it cannot hold (before 1678 or after April 2262) is
  // malformed, not wrapped around.
  if (utc < kEarliest || utc > kLatest) return std::nullopt;
  return utc;
}

}  // namespace detail

/// Parses one line; `std::nullopt` when it is not in the Common or Combined Log Format.
inline std::optional<Entry> parse_line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  Entry entry;
  std::string_view rest = line;
  entry.client = std::string(detail::next_token(rest));
  detail::next_token(rest);  // ident
  detail::next_token(rest);  // user
  if (entry.client.empty() || rest.empty() || rest.front() != '[') return std::nullopt;
  const std::size_t close = rest.find(']');
  if (close == std::string_view::npos) return std::nullopt;
  const auto time = detail::timestamp(rest.substr(1, close - 1));
  if (!time) return std::nullopt;
  entry.time = *time;
  rest.remove_prefix(std::min(rest.size(), close + 2));
  const auto request = detail::quoted(rest);
  if (!request) return std::nullopt;
  std::string_view request_line = *request;
  const std::string_view method = detail::next_token(request_line);
  const std::string_view target = detail::next_token(request_line);
  if (!request_line.empty() && !target.empty()) {
    entry.method = std::string(method);
    entry.target = std::string(target);
  }
  const auto status = detail::number(detail::next_token(rest), 3);
  if (!status) return std::nullopt;
  entry.status = *status;
  if (detail::next_token(rest).empty()) return std::nullopt;  // size, "-" when none
  if (!rest.empty()) {
    if (!detail::quoted(rest)) return std::nullopt;  // referer
    const auto agent = detail::quoted(rest);
    if (!agent) return std::nullopt;
    entry.user_agent = *agent;
  }
  return entry;
}

}  // namespace access_log
