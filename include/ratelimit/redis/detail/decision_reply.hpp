#pragma once

/// @file
/// Parsing a script's reply `{allowed, limit, remaining, retry_after_us, reset_after_us}`.

#include <hiredis/hiredis.h>

#include <cstdint>
#include <string>

#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/policy/policy.hpp"
#include "ratelimit/redis/error.hpp"
#include "ratelimit/redis/reply.hpp"

namespace ratelimit::redis::detail {

/// The script's decision in microsecond ticks (`retry_after_us == -1` becomes `TickDecision::never`).
///
/// Every field is checked against the contract (array of five integers, allowed 0/1, the policy's limit,
/// 0 <= remaining <= limit, durations within what converts to nanoseconds), so a wrong script, a wrong
/// server or a corrupted reply throws `BackendError` instead of producing a nonsense decision.
/// Throws `BackendError` with cause `reply` for an error reply, `protocol` for anything malformed.
[[nodiscard]] inline TickDecision parse_decision(const redisReply& r, std::int64_t expected_limit) {
  if (r.type == REDIS_REPLY_ERROR) throw BackendError(BackendErrorCause::reply, std::string(text(r)));
  auto malformed = [](const std::string& what) {
    throw BackendError(BackendErrorCause::protocol, "malformed script reply: " + what);
  };
  if (r.type != REDIS_REPLY_ARRAY || r.elements != 5 || r.element == nullptr) {
    malformed("expected an array of 5 integers");
  }
  std::int64_t v[5];
  for (std::size_t i = 0; i < 5; ++i) {
    const redisReply* e = r.element[i];
    if (e == nullptr || e->type != REDIS_REPLY_INTEGER) malformed("element " + std::to_string(i) + " is not an integer");
    v[i] = static_cast<std::int64_t>(e->integer);
  }
  constexpr std::int64_t max_us = ratelimit::detail::kMaxHorizonNs / 1000;
  if (v[0] != 0 && v[0] != 1) malformed("allowed is " + std::to_string(v[0]));
  if (v[1] != expected_limit) {
    malformed("limit is " + std::to_string(v[1]) + ", the policy's is " + std::to_string(expected_limit));
  }
  if (v[2] < 0 || v[2] > v[1]) malformed("remaining is " + std::to_string(v[2]));
  if (v[3] < -1 || v[3] > max_us || (v[0] == 1 && v[3] != 0)) malformed("retry_after is " + std::to_string(v[3]));
  if (v[4] < 0 || v[4] > max_us) malformed("reset_after is " + std::to_string(v[4]));
  return TickDecision{.allowed = v[0] == 1,
                      .limit = v[1],
                      .remaining = v[2],
                      .retry_after = v[3] == -1 ? TickDecision::never : v[3],
                      .reset_after = v[4]};
}

}  // namespace ratelimit::redis::detail
