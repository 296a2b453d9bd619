#pragma once

/// @file
/// The RFC 9457 `application/problem+json` body of a 429 response, with the `quota-exceeded` problem
/// type of draft-ietf-httpapi-ratelimit-headers-11 (section 5.1). Needs nlohmann/json: link
/// `ratelimit::http` (CMake), which brings it; the core target stays dependency-free.

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ratelimit/decision.hpp"
#include "ratelimit/http/headers.hpp"

namespace ratelimit::detail {

/// Length of the well-formed UTF-8 sequence at the start of `s` (Unicode table 3-7: no overlong forms,
/// no surrogates, nothing above U+10FFFF), or 0 when it is not one.
[[nodiscard]] inline std::size_t utf8_sequence(std::string_view s) noexcept {
  const auto at = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = at(0);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < n || at(1) < lo || at(1) > hi) return 0;
  for (std::size_t i = 2; i < n; ++i) {
    if (at(i) < 0x80 || at(i) > 0xBF) return 0;
  }
  return n;
}

/// `s` with every byte that is not part of well-formed UTF-8 percent-encoded ("/x\xFF" -> "/x%FF", what
/// the client sent before the path was decoded); valid UTF-8 is kept as it is.
[[nodiscard]] inline std::string percent_encode_invalid_utf8(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    if (const std::size_t n = utf8_sequence(s); n > 0) {
      out.append(s.substr(0, n));
      s.remove_prefix(n);
    } else {
      const auto c = static_cast<unsigned char>(s.front());
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
      s.remove_prefix(1);
    }
  }
  return out;
}

}  // namespace ratelimit::detail

namespace ratelimit::http {

/// The media type of the body (RFC 9457 section 3).
inline constexpr std::string_view kProblemContentType = "application/problem+json";
/// The draft's problem type URI for a request over one or more quota policies.
inline constexpr std::string_view kQuotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded";
/// The title that goes with it.
inline constexpr std::string_view kQuotaExceededTitle =
    "Request cannot be satisfied as assigned quota has been exceeded";

/// What goes into a quota-exceeded problem body besides its type and title.
struct Problem {
  /// The names of the policies whose quota the request exceeded (`violated-policies`); in order.
  std::span<const std::string> violated_policies{};
  /// The HTTP status (`status` member), 429 by default; 0 leaves the member out.
  int status = 429;
  /// A human-readable explanation (`detail`); left out when empty.
  std::string detail{};
  /// A URI reference naming this occurrence (`instance`), e.g. the request path; left out when empty.
  std::string instance{};
  /// The wait the client should observe (`retry-after`, whole seconds, an extension member mirroring
  /// the header); left out when absent.
  std::optional<std::int64_t> retry_after_seconds{};
};

/// The JSON body (RFC 9457) of `problem`: members `type`, `title`, `status`, `detail`, `instance`,
/// `violated-policies`, `retry-after` (the optional ones only when set). Strings are escaped by the JSON
/// library. Never fails on bad bytes (a 429 must not become a 500): in `instance`, bytes that are not
/// well-formed UTF-8 are percent-encoded (a decoded path "/x\xFF" gives "/x%FF"); in `detail` and policy
/// names they become U+FFFD. Thread-safe. Throws only `std::bad_alloc`.
[[nodiscard]] inline std::string problem_json(const Problem& problem) {
  nlohmann::ordered_json body;
  body["type"] = kQuotaExceededType;
  body["title"] = kQuotaExceededTitle;
  if (problem.status != 0) body["status"] = problem.status;
  if (!problem.detail.empty()) body["detail"] = problem.detail;
  if (!problem.instance.empty()) {
    body["instance"] = ratelimit::detail::percent_encode_invalid_utf8(problem.instance);
  }
  body["violated-policies"] = nlohmann::ordered_json::array();
  for (const std::string& name : problem.violated_policies) body["violated-policies"].push_back(name);
  if (problem.retry_after_seconds) body["retry-after"] = *problem.retry_after_seconds;
  return body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

/// A quota-exceeded body for a denial: `violated` names the denying policies, `decision` is the
/// reported (most restrictive) decision whose `Retry-After` is mirrored; `instance` is usually the path.
/// With a finite wait, `retry-after` is N and `detail` is "Retry after N s."; for `Decision::never`
/// both are left out: a cost above the limit and a deny-listed key both give `never`, and the
/// decision cannot tell which (build a `Problem` with your own `detail` when you know).
[[nodiscard]] inline std::string quota_exceeded_json(std::span<const std::string> violated, const Decision& decision,
                                                     std::string instance = {}) {
  Problem p{.violated_policies = violated, .instance = std::move(instance)};
  if (const std::string retry = retry_after_value(decision); !retry.empty()) {
    p.retry_after_seconds = std::stoll(retry);
    p.detail = "Retry after " + retry + " s.";
  }
  return problem_json(p);
}

}  // namespace ratelimit::http
