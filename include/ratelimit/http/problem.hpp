#pragma once

/// @file
/// The RFC 9457 `application/problem+json` body of a 429 response, with the `quota-exceeded` problem
/// type of draft-ietf-httpapi-ratelimit-headers-11 (section 5.1). Needs nlohmann/json: link
/// `ratelimit::http` (CMake), which brings it; the core target stays dependency-free.

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ratelimit/decision.hpp"
#include "ratelimit/http/headers.hpp"

namespace ratelimit::http {

/// The media type of the body (RFC 9457 section 3).
inline constexpr std::string_view kProblemContentType = "application/problem+json";
/// The draft's problem type URI for a request over one or more quota policies.
inline constexpr std::string_view kQuotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded";
/// The title that goes with it.
inline constexpr std::string_view kQuotaExceededTitle = "Request cannot be satisfied as assigned quota has been exceeded";

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
/// `violated-policies`, `retry-after` (the optional ones only when set). Names are escaped by the JSON
/// library: any UTF-8 is safe. Thread-safe. Throws `nlohmann::json::type_error` for a name or text
/// that is not valid UTF-8.
[[nodiscard]] inline std::string problem_json(const Problem& problem) {
  nlohmann::ordered_json body;
  body["type"] = kQuotaExceededType;
  body["title"] = kQuotaExceededTitle;
  if (problem.status != 0) body["status"] = problem.status;
  if (!problem.detail.empty()) body["detail"] = problem.detail;
  if (!problem.instance.empty()) body["instance"] = problem.instance;
  body["violated-policies"] = nlohmann::ordered_json::array();
  for (const std::string& name : problem.violated_policies) body["violated-policies"].push_back(name);
  if (problem.retry_after_seconds) body["retry-after"] = *problem.retry_after_seconds;
  return body.dump();
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
