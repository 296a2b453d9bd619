#pragma once

/// @file
/// Reading another server's rate-limit header fields: the IETF `RateLimit` / `RateLimit-Policy`
/// (draft-ietf-httpapi-ratelimit-headers, as `headers.hpp` writes them), the older `RateLimit-Limit`,
/// `-Remaining`, `-Reset`, the classic `X-RateLimit-*`, and `Retry-After` (RFC 9110 section 10.2.3).
/// Pure functions of their arguments: no clock is read, nothing is thrown for any input, every value is
/// bounded by configured maxima. See include/ratelimit/http/README.md "Calling someone else's API".

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/detail/arithmetic.hpp"

namespace ratelimit::http {

/// The most a response may claim; larger values are lowered to these (and counted as clamped).
struct RemoteMaxima {
  /// Largest quota (`limit`, `q`) and `remaining` believed, in requests. In [1, 10^15].
  std::int64_t quota = 100'000;
  /// Longest policy window (`w`) believed. >= 1 s.
  std::chrono::seconds window{std::chrono::hours(24)};
  /// Longest time until reset (`t`, `*-Reset`) believed. >= 1 s.
  std::chrono::seconds reset{std::chrono::hours(24)};
  /// Longest `Retry-After` believed. >= 1 s.
  std::chrono::seconds retry_after{std::chrono::hours(1)};
};

/// What one response said about the remote's quota, validated and clamped. Missing means "not said"
/// (or said in a malformed way: then `malformed` counts it).
struct RemoteReport {
  /// The quota of the window (`q`, `*-Limit`), in requests; in [0, maxima.quota].
  std::optional<std::int64_t> limit;
  /// Requests the remote will still admit now (`r`, `*-Remaining`); in [0, maxima.quota].
  std::optional<std::int64_t> remaining;
  /// Time until the quota is restored (`t`, `*-Reset`); in [0, maxima.reset].
  std::optional<std::chrono::seconds> reset;
  /// The policy window (`w` of `RateLimit-Policy`); in [1 s, maxima.window]. With `limit` it gives the
  /// remote's sustained rate, `limit / window`.
  std::optional<std::chrono::seconds> window;
  /// `Retry-After`: wait this long before the next request; in [0, maxima.retry_after].
  std::optional<std::chrono::seconds> retry_after;
  /// Values ignored: garbage, negative, overflowing, unparseable dates, unknown syntax.
  std::int64_t malformed = 0;
  /// Values lowered to a maximum.
  std::int64_t clamped = 0;
};

namespace detail {

/// ASCII case-insensitive equality (HTTP field names).
[[nodiscard]] constexpr bool iequal(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

/// `s` without leading and trailing spaces and tabs (HTTP OWS).
[[nodiscard]] constexpr std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// Lowers `v` to `max`, counting the clamp in `report`.
[[nodiscard]] inline std::int64_t clamp_counted(std::int64_t v, std::int64_t max, RemoteReport& report) {
  if (v <= max) return v;
  ++report.clamped;
  return max;
}

}  // namespace detail

/// A non-negative decimal integer (digits only, after trimming spaces): the value, or nothing for an
/// empty string, a sign, any other character, or more than 18 digits (so the value fits int64).
/// Pure; thread-safe; never throws.
/// Example:
///   static_assert(ratelimit::http::parse_count(" 42") == 42);
///   static_assert(!ratelimit::http::parse_count("-1") && !ratelimit::http::parse_count("1e3"));
[[nodiscard]] constexpr std::optional<std::int64_t> parse_count(std::string_view s) noexcept {
  s = detail::trim(s);
  if (s.empty() || s.size() > 18) return std::nullopt;
  std::int64_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

/// An IMF-fixdate (RFC 9110 section 5.6.7, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`) as seconds since
/// 1970-01-01 UTC; nothing for any other form (the obsolete RFC 850 and asctime forms included) or a
/// year outside 1970..9999. Pure; thread-safe; never throws.
/// Example:
///   static_assert(ratelimit::http::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT") == 784111777);
[[nodiscard]] constexpr std::optional<std::int64_t> parse_http_date(std::string_view s) noexcept {
  s = detail::trim(s);
  constexpr std::array<std::string_view, 7> kDays{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
  constexpr std::array<std::string_view, 12> kMonths{"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  // "Sun, 06 Nov 1994 08:49:37 GMT": fixed positions.
  if (s.size() != 29 || s.substr(3, 2) != ", " || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' || s[19] != ':' ||
      s[22] != ':' || s.substr(25) != " GMT") {
    return std::nullopt;
  }
  bool day_ok = false;
  for (const std::string_view d : kDays) day_ok = day_ok || s.substr(0, 3) == d;
  std::int64_t month = 0;
  for (std::size_t m = 0; m < kMonths.size(); ++m) month = s.substr(8, 3) == kMonths[m] ? std::int64_t(m) + 1 : month;
  const auto mday = parse_count(s.substr(5, 2));
  const auto year = parse_count(s.substr(12, 4));
  const auto hour = parse_count(s.substr(17, 2));
  const auto minute = parse_count(s.substr(20, 2));
  const auto second = parse_count(s.substr(23, 2));
  if (!day_ok || month == 0 || !mday || !year || !hour || !minute || !second || *mday < 1 || *mday > 31 ||
      *year < 1970 || *hour > 23 || *minute > 59 || *second > 60) {
    return std::nullopt;
  }
  // Days from civil (Howard Hinnant's algorithm), March-based years.
  const std::int64_t y = *year - (month <= 2 ? 1 : 0);
  const std::int64_t era = y / 400;
  const std::int64_t yoe = y - era * 400;
  const std::int64_t doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + *mday - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const std::int64_t days = era * 146097 + doe - 719468;
  return days * 86400 + *hour * 3600 + *minute * 60 + *second;
}

/// `Retry-After` (RFC 9110 section 10.2.3): delay-seconds, or an HTTP-date taken relative to
/// `now_epoch_s` (the response's `Date`, else the local wall clock; seconds since 1970); a date in the
/// past is 0. Clamped to `maxima.retry_after` (counted); anything else is malformed (counted, empty).
/// Pure; thread-safe; never throws.
/// Example:
///   ratelimit::http::RemoteReport counts;  // malformed and clamped values are counted here
///   const auto wait = ratelimit::http::parse_retry_after("Sun, 06 Nov 1994 08:51:37 GMT", 784111777, {}, counts);
///   if (wait) std::printf("%lld s\n", static_cast<long long>(wait->count()));  // 120 s after the response's Date
[[nodiscard]] inline std::optional<std::chrono::seconds> parse_retry_after(std::string_view value,
                                                                           std::int64_t now_epoch_s,
                                                                           const RemoteMaxima& maxima,
                                                                           RemoteReport& report) {
  std::optional<std::int64_t> delay = parse_count(value);
  if (!delay) {
    if (const auto at = parse_http_date(value)) delay = *at > now_epoch_s ? *at - now_epoch_s : 0;
  }
  if (!delay) {
    ++report.malformed;
    return std::nullopt;
  }
  return std::chrono::seconds(detail::clamp_counted(*delay, maxima.retry_after.count(), report));
}

/// Values at or above this in `*-Reset` are Unix times (seconds since 1970; 10^9 s is September 2001),
/// below it delays in seconds: no service resets more than 31 years ahead, and no clock reads before 2001.
inline constexpr std::int64_t kEpochResetThreshold = 1'000'000'000;

/// A `RateLimit-Reset` / `X-RateLimit-Reset` value: delay seconds, or, at or above
/// `kEpochResetThreshold`, a Unix time taken relative to `now_epoch_s` (past: 0). Clamped to
/// `maxima.reset` (counted); garbage, a sign or overflow is malformed (counted, empty). Pure; never throws.
/// Example:
///   ratelimit::http::RemoteReport counts;
///   const auto in = ratelimit::http::parse_reset("1700000090", 1'700'000'000, {}, counts);
///   if (in) std::printf("%lld s\n", static_cast<long long>(in->count()));  // 90 s: the value is a Unix time
[[nodiscard]] inline std::optional<std::chrono::seconds> parse_reset(std::string_view value, std::int64_t now_epoch_s,
                                                                     const RemoteMaxima& maxima, RemoteReport& report) {
  std::optional<std::int64_t> s = parse_count(value);
  if (!s) {
    ++report.malformed;
    return std::nullopt;
  }
  if (*s >= kEpochResetThreshold) s = *s > now_epoch_s ? *s - now_epoch_s : 0;
  return std::chrono::seconds(detail::clamp_counted(*s, maxima.reset.count(), report));
}

/// One member of a `RateLimit` or `RateLimit-Policy` list (RFC 9651): its name (a String or Token)
/// and its integer parameters, `kNotGiven` for a parameter not given (RFC 9651 Integers are within
/// +/-10^15, so it never collides with a value).
struct QuotaEntry {
  static constexpr std::int64_t kNotGiven = std::numeric_limits<std::int64_t>::min();
  std::string name;
  std::int64_t q = kNotGiven, w = kNotGiven, r = kNotGiven, t = kNotGiven;
};

/// The members of a `RateLimit` or `RateLimit-Policy` field value, e.g.
/// `"burst";r=5;t=1, "day";r=900;t=3600`; nothing when any member is malformed (then the whole field
/// is ignored). Parameters other than q, w, r, t are skipped; their values must still parse as
/// Structured Field bare items this reader knows (integers, tokens, strings, byte sequences); at most 64
/// members. Pure; never throws beyond `std::bad_alloc`.
/// Example:
///   const auto entries = ratelimit::http::parse_quota_list("\"burst\";q=10;w=2, \"day\";q=1000;w=86400");
///   if (entries) std::printf("%s q=%lld\n", entries->at(1).name.c_str(), static_cast<long long>(entries->at(1).q));
[[nodiscard]] std::optional<std::vector<QuotaEntry>> parse_quota_list(std::string_view value);

namespace detail {

/// A Structured Field String at the start of `s` (after the opening quote is checked): its unescaped text;
/// `s` is advanced past the closing quote. Empty on a malformed string.
[[nodiscard]] inline std::optional<std::string> take_sf_string(std::string_view& s) {
  std::string out;
  std::size_t i = 1;
  for (; i < s.size() && s[i] != '"'; ++i) {
    if (s[i] == '\\') {
      if (++i == s.size() || (s[i] != '"' && s[i] != '\\')) return std::nullopt;
    } else if (static_cast<unsigned char>(s[i]) < 0x20 || static_cast<unsigned char>(s[i]) > 0x7E) {
      return std::nullopt;
    }
    out += s[i];
  }
  if (i == s.size()) return std::nullopt;
  s.remove_prefix(i + 1);
  return out;
}

/// A Token, a key or an Integer at the start of `s` (characters of tchar, ':' and '/'); `s` advanced.
[[nodiscard]] inline std::string_view take_token(std::string_view& s) {
  std::size_t i = 0;
  const auto tchar = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("!#$%&'*+-.^_`|~:/").find(c) != std::string_view::npos;
  };
  while (i < s.size() && tchar(s[i])) ++i;
  const std::string_view token = s.substr(0, i);
  s.remove_prefix(i);
  return token;
}

/// An RFC 9651 Integer (optional '-', 1 to 15 digits); empty otherwise.
[[nodiscard]] inline std::optional<std::int64_t> sf_integer(std::string_view v) {
  const bool negative = !v.empty() && v.front() == '-';
  if (negative) v.remove_prefix(1);
  if (v.empty() || v.size() > 15) return std::nullopt;
  const auto n = parse_count(v);
  if (!n) return std::nullopt;
  return negative ? -*n : *n;
}

/// The parameters of one member (`;key=value...`) into `entry`; false on malformed syntax.
[[nodiscard]] inline bool take_params(std::string_view& s, QuotaEntry& entry) {
  while (!s.empty() && s.front() == ';') {
    s.remove_prefix(1);
    s = trim(s);
    const std::string_view key = take_token(s);
    if (key.empty()) return false;
    std::int64_t value = 1;  // a bare key is Boolean true
    if (!s.empty() && s.front() == '=') {
      s.remove_prefix(1);
      if (!s.empty() && s.front() == '"') {
        if (!take_sf_string(s)) return false;
      } else if (!s.empty() && s.front() == ':') {  // a Byte Sequence, :base64:
        const std::size_t end = s.find(':', 1);
        if (end == std::string_view::npos) return false;
        s.remove_prefix(end + 1);
      } else {
        const std::string_view item = take_token(s);
        const auto n = sf_integer(item);
        if (item.empty()) return false;
        if (key == "q" || key == "w" || key == "r" || key == "t") {
          if (!n) return false;
          value = *n;
        }
      }
    }
    if (key == "q") entry.q = value;
    if (key == "w") entry.w = value;
    if (key == "r") entry.r = value;
    if (key == "t") entry.t = value;
  }
  return true;
}

}  // namespace detail

inline std::optional<std::vector<QuotaEntry>> parse_quota_list(std::string_view value) {
  std::vector<QuotaEntry> entries;
  std::string_view s = detail::trim(value);
  while (!s.empty()) {
    if (entries.size() == 64) return std::nullopt;  // bounded work per field
    QuotaEntry entry;
    if (s.front() == '"') {
      auto name = detail::take_sf_string(s);
      if (!name) return std::nullopt;
      entry.name = std::move(*name);
    } else {
      entry.name = std::string(detail::take_token(s));
      if (entry.name.empty()) return std::nullopt;
    }
    if (!detail::take_params(s, entry)) return std::nullopt;
    entries.push_back(std::move(entry));
    s = detail::trim(s);
    if (s.empty()) break;
    if (s.front() != ',') return std::nullopt;
    s = detail::trim(s.substr(1));
    if (s.empty()) return std::nullopt;  // a trailing comma
  }
  return entries;
}

/// The rate-limit fields of one response, gathered by name (case-insensitive); repeated fields are
/// joined with ", " (RFC 9110 section 5.3). Made by `remote_fields` from a header map, or field by field.
/// Example:
///   ratelimit::http::RemoteFields fields;
///   fields.add("x-ratelimit-remaining", "7");  // names are case-insensitive
///   fields.add("Content-Type", "text/plain");  // skipped
struct RemoteFields {
  std::string ratelimit, policy, limit, remaining, reset, x_limit, x_remaining, x_reset, retry_after, date;

  /// Adds one field; names other than the rate-limit ones (and `Date`) are skipped. Not thread-safe
  /// (one object per response).
  void add(std::string_view name, std::string_view value) {
    const std::pair<std::string_view, std::string*> known[] = {{"RateLimit", &ratelimit},
                                                               {"RateLimit-Policy", &policy},
                                                               {"RateLimit-Limit", &limit},
                                                               {"RateLimit-Remaining", &remaining},
                                                               {"RateLimit-Reset", &reset},
                                                               {"X-RateLimit-Limit", &x_limit},
                                                               {"X-RateLimit-Remaining", &x_remaining},
                                                               {"X-RateLimit-Reset", &x_reset},
                                                               {"Retry-After", &retry_after},
                                                               {"Date", &date}};
    for (const auto& [n, slot] : known) {
      if (!detail::iequal(name, n)) continue;
      if (!slot->empty()) *slot += ", ";
      *slot += value;
      return;
    }
  }
};

/// Reads the fields of one response into a `RemoteReport` (see include/ratelimit/http/README.md
/// "Calling someone else's API" for the precedence and the rules). `now_epoch_s` is the local wall
/// clock in seconds since 1970, used when the response has no valid `Date`. Pure; never throws
/// beyond `std::bad_alloc`.
/// Example:
///   ratelimit::http::RemoteFields fields;
///   fields.add("RateLimit-Policy", "\"api\";q=100;w=60");
///   fields.add("RateLimit", "\"api\";r=0;t=42");
///   const ratelimit::http::RemoteReport report = ratelimit::http::read_remote_report(fields, {}, 0);
///   if (report.remaining == 0) std::printf("wait %lld s\n", static_cast<long long>(report.reset->count()));  // 42
[[nodiscard]] RemoteReport read_remote_report(const RemoteFields& fields, const RemoteMaxima& maxima,
                                              std::int64_t now_epoch_s);

namespace detail {

/// A scalar field that may have been repeated ("5, 5"): the smallest (`smallest`) or largest member,
/// each parsed by `parse`; empty (counted malformed once) if any member fails.
template <class Parse>
[[nodiscard]] auto scalar_of(std::string_view joined, bool smallest, Parse parse)
    -> decltype(parse(std::string_view{})) {
  decltype(parse(std::string_view{})) best;
  while (true) {
    const std::size_t comma = joined.find(',');
    const auto v = parse(joined.substr(0, comma));
    if (!v) return std::nullopt;
    if (!best || (smallest ? *v < *best : *v > *best)) best = v;
    if (comma == std::string_view::npos) return best;
    joined.remove_prefix(comma + 1);
  }
}

/// The most restrictive member of `RateLimit` (least `r`, then longest `t`) with its policy's q and w
/// from `RateLimit-Policy`, into `report`. Returns false when the fields give no usable member.
[[nodiscard]] inline bool read_ietf(const RemoteFields& f, const RemoteMaxima& maxima, RemoteReport& report) {
  // Named, not `value_or` temporaries: `chosen` points into `limits` after the loop.
  std::optional<std::vector<QuotaEntry>> limits, policies;
  if (!f.ratelimit.empty() && !(limits = parse_quota_list(f.ratelimit))) ++report.malformed;
  if (!f.policy.empty() && !(policies = parse_quota_list(f.policy))) ++report.malformed;
  if (!limits) return false;
  const QuotaEntry* chosen = nullptr;
  for (const QuotaEntry& e : *limits) {
    // r is required, t optional (a member without it reads as the longest wait); negatives say nothing usable.
    if (e.r < 0 || (e.t < 0 && e.t != QuotaEntry::kNotGiven)) {
      ++report.malformed;
      continue;
    }
    const auto t_of = [](const QuotaEntry& m) {
      return m.t == QuotaEntry::kNotGiven ? std::numeric_limits<std::int64_t>::max() : m.t;
    };
    if (!chosen || e.r < chosen->r || (e.r == chosen->r && t_of(e) > t_of(*chosen))) chosen = &e;
  }
  if (!chosen) return false;
  report.remaining = clamp_counted(chosen->r, maxima.quota, report);
  if (chosen->t != QuotaEntry::kNotGiven) {
    report.reset = std::chrono::seconds(clamp_counted(chosen->t, maxima.reset.count(), report));
  }
  for (const QuotaEntry& p : policies ? *policies : std::vector<QuotaEntry>{}) {
    if (p.name != chosen->name) continue;
    if (p.q < 0 || p.w < 1) {
      ++report.malformed;
      break;
    }
    report.limit = clamp_counted(p.q, maxima.quota, report);
    report.window = std::chrono::seconds(clamp_counted(p.w, maxima.window.count(), report));
    break;
  }
  return true;
}

/// `limit`, `remaining`, `reset` from one family of scalar fields (RateLimit-* or X-RateLimit-*).
/// Returns false when the family has no valid remaining.
[[nodiscard]] inline bool read_scalars(std::string_view limit, std::string_view remaining, std::string_view reset,
                                       std::int64_t now_epoch_s, const RemoteMaxima& maxima, RemoteReport& report) {
  if (remaining.empty()) return false;
  const auto r = scalar_of(remaining, true, [](std::string_view v) { return parse_count(v); });
  if (!r) {
    ++report.malformed;
    return false;
  }
  report.remaining = clamp_counted(*r, maxima.quota, report);
  if (!limit.empty()) {
    const auto l = scalar_of(limit, true, [](std::string_view v) { return parse_count(v); });
    if (l) report.limit = clamp_counted(*l, maxima.quota, report);
    if (!l) ++report.malformed;
  }
  if (!reset.empty()) {
    RemoteReport scratch;  // one count per field, not per member
    report.reset =
        scalar_of(reset, false, [&](std::string_view v) { return parse_reset(v, now_epoch_s, maxima, scratch); });
    report.malformed += report.reset ? 0 : 1;
    report.clamped += scratch.clamped > 0 ? 1 : 0;
  }
  return true;
}

}  // namespace detail

inline RemoteReport read_remote_report(const RemoteFields& fields, const RemoteMaxima& maxima,
                                       std::int64_t now_epoch_s) {
  RemoteReport report;
  if (!fields.date.empty()) {
    const auto date = parse_http_date(fields.date);
    if (date) now_epoch_s = *date;
    if (!date) ++report.malformed;
  }
  if (!detail::read_ietf(fields, maxima, report) &&
      !detail::read_scalars(fields.limit, fields.remaining, fields.reset, now_epoch_s, maxima, report)) {
    (void)detail::read_scalars(fields.x_limit, fields.x_remaining, fields.x_reset, now_epoch_s, maxima, report);
  }
  if (!fields.retry_after.empty()) {
    RemoteReport scratch;
    // An HTTP-date holds a comma: the whole value first, then repeated delay-seconds ("2, 7").
    report.retry_after = parse_retry_after(fields.retry_after, now_epoch_s, maxima, scratch);
    if (!report.retry_after) {
      report.retry_after = detail::scalar_of(fields.retry_after, false, [&](std::string_view v) {
        return parse_retry_after(v, now_epoch_s, maxima, scratch);
      });
    }
    report.malformed += report.retry_after ? 0 : 1;
    report.clamped += scratch.clamped > 0 ? 1 : 0;
  }
  return report;
}

/// The rate-limit fields of any range of name/value pairs: `std::map`, `std::multimap`,
/// `std::vector<std::pair<std::string, std::string>>`, `httplib::Headers`, ... (each element's
/// `first` and `second` convert to `std::string_view`). Thread-safe for a range not being modified.
/// Example:
///   const std::vector<std::pair<std::string, std::string>> headers{{"ratelimit", "\"api\";r=4;t=1"}};
///   const ratelimit::http::RemoteReport report =
///       ratelimit::http::read_remote_report(ratelimit::http::remote_fields(headers), {}, 0);
///   std::printf("%lld left\n", static_cast<long long>(report.remaining.value_or(0)));  // 4
template <class Range>
  requires requires(const Range& r) {
    std::string_view((*std::begin(r)).first);
    std::string_view((*std::begin(r)).second);
  }
[[nodiscard]] RemoteFields remote_fields(const Range& range) {
  RemoteFields fields;
  for (const auto& field : range) fields.add(std::string_view(field.first), std::string_view(field.second));
  return fields;
}

}  // namespace ratelimit::http
