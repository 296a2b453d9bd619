#pragma once

/// @file
/// Reading the limiters' replies against their contracts (lua/README.md): a policy script's decision, and the arrays
/// of integers of the other scripts.

#include <hiredis/hiredis.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/policy/policy.hpp"
#include "ratelimit/redis/abi.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/redis/engine/reply.hpp"
#include "ratelimit/redis/engine/route.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace detail {

/// The script's decision in microsecond ticks from `struct.pack("<ddddd", allowed, limit, remaining, retry_after_us,
/// reset_after_us)` (`retry_after_us == -1` is `never`). Every field is checked (integers below 2^53, allowed 0/1,
/// the policy's limit, 0 <= remaining <= limit, durations that fit in nanoseconds), so a wrong script or server or a
/// corrupted reply throws `BackendError`: cause `reply` for an error reply, `protocol` for anything malformed. A
/// reserve's reply has 8 doubles (`values`): the decision's five, then ok, booked TAT and delay (`reservation_of`).
[[nodiscard]] inline TickDecision parse_decision(const redisReply& r, std::int64_t expected_limit,
                                                 std::size_t values = 5) {
  if (r.type == REDIS_REPLY_ERROR) throw BackendError(BackendErrorCause::reply, std::string(engine::text(r)));
  auto malformed = [](const std::string& what) {
    throw BackendError(BackendErrorCause::protocol, "malformed script reply: " + what);
  };
  if (r.type != REDIS_REPLY_STRING || r.str == nullptr || r.len != 8 * values) {
    malformed("expected a string of " + std::to_string(values) + " little-endian doubles");
  }
  constexpr double exact = 9007199254740992.0;  // 2^53: every integer up to it is a double
  std::int64_t v[8];
  for (std::size_t i = 0; i < values && i < 8; ++i) {
    std::uint64_t bits = 0;
    for (std::size_t b = 8; b-- > 0;) bits = bits << 8 | static_cast<unsigned char>(r.str[8 * i + b]);
    const double d = std::bit_cast<double>(bits);
    // NaN fails both comparisons.
    if (!(d >= -exact && d <= exact) || d != std::trunc(d)) {
      malformed("element " + std::to_string(i) + " is not an integer below 2^53");
    }
    v[i] = static_cast<std::int64_t>(d);
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

/// A reserve's three values after its decision (lua/gcra.lua): ok, the booked TAT (us) and the delay (us, -1 = never),
/// each checked as `parse_decision` checks its own (it checked that they are integers below 2^53).
struct ReserveReply {
  bool ok = false;
  std::int64_t booked_tat = 0;
  std::int64_t delay_us = -1;
};
[[nodiscard]] inline ReserveReply reservation_of(const redisReply& r) {
  std::int64_t v[3];
  for (std::size_t i = 0; i < 3; ++i) {
    std::uint64_t bits = 0;
    for (std::size_t b = 8; b-- > 0;) bits = bits << 8 | static_cast<unsigned char>(r.str[8 * (5 + i) + b]);
    v[i] = static_cast<std::int64_t>(std::bit_cast<double>(bits));
  }
  constexpr std::int64_t max_us = ratelimit::detail::kMaxHorizonNs / 1000;
  if ((v[0] != 0 && v[0] != 1) || v[2] < -1 || v[2] > max_us || (v[0] == 1 && v[2] < 0)) {
    throw BackendError(BackendErrorCause::protocol,
                       "malformed reserve reply: ok " + std::to_string(v[0]) + ", delay " + std::to_string(v[2]));
  }
  return {v[0] == 1, v[1], v[2]};
}

/// `parse_decision` as a `Decision` (nanoseconds).
[[nodiscard]] inline Decision decision_of(const redisReply& r, std::int64_t expected_limit, std::size_t values = 5) {
  return to_decision(parse_decision(r, expected_limit, values), 1000);
}

/// The reply of a finished `call`; throws its `BackendError`, or one of cause `reply` for an error reply.
[[nodiscard]] inline const redisReply& reply_of(const engine::RouteCall& call) {
  if (call.error) throw *call.error;
  if (!call.reply) throw BackendError(BackendErrorCause::protocol, "no reply");
  if (call.reply->type == REDIS_REPLY_ERROR)
    throw BackendError(BackendErrorCause::reply, std::string(engine::text(*call.reply)));
  return *call.reply;
}

/// The `N` integers of an array reply `r` of `what`; throws `BackendError` (cause `protocol`) for another shape.
template <std::size_t N>
[[nodiscard]] std::array<std::int64_t, N> integers(const redisReply& r, std::string_view what) {
  if (r.type != REDIS_REPLY_ARRAY || r.elements != N || r.element == nullptr) {
    throw BackendError(BackendErrorCause::protocol, "malformed " + std::string(what) + " reply: expected an array of " +
                                                        std::to_string(N) + " integers");
  }
  std::array<std::int64_t, N> v{};
  for (std::size_t i = 0; i < N; ++i) {
    if (r.element[i] == nullptr || r.element[i]->type != REDIS_REPLY_INTEGER) {
      throw BackendError(BackendErrorCause::protocol,
                         "malformed " + std::string(what) + " reply: element " + std::to_string(i));
    }
    v[i] = static_cast<std::int64_t>(r.element[i]->integer);
  }
  return v;
}

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
