#pragma once

/// @file
/// How a policy's rules reach its Lua script (script, key suffix, ARGV parameters in microsecond ticks, the bounds
/// that keep Lua's values exact), and the embedded scripts as the engine sends them.

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/policy/fixed_window.hpp"
#include "ratelimit/policy/gcra.hpp"
#include "ratelimit/policy/policy.hpp"
#include "ratelimit/policy/sliding_window_counter.hpp"
#include "ratelimit/policy/sliding_window_log.hpp"
#include "ratelimit/policy/token_bucket.hpp"
#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/detail/lua_scripts.hpp"
#include "ratelimit/redis/engine/script_call.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace detail {

/// The Redis tick: one microsecond.
inline constexpr std::int64_t kTickNs = 1000;
/// Lua numbers are doubles: integers up to 2^53 are exact.
inline constexpr std::int64_t kLuaExact = std::int64_t{1} << 53;
/// Client times are clamped to +/-2^52 us (about year 2112): plus a policy's horizon (at most ~73 years, 2.3e15 us),
/// a script's largest value stays below 2^53.
inline constexpr std::int64_t kMaxTimeUs = std::int64_t{1} << 52;

/// The source of the Functions library `kFunctionLibrary`: every embedded script registered under its `function`
/// name as `function(KEYS, ARGV) <body> end`, so it runs unchanged. Built once; thread-safe.
[[nodiscard]] inline const std::string& function_library_code() {
  static const std::string code = [] {
    std::string s = "#!lua name=" + std::string(kFunctionLibrary) + "\n";
    for (const EmbeddedScript& e : kEmbeddedScripts) {
      s.append("redis.register_function('").append(e.function).append("', function(KEYS, ARGV)\n");
      s.append(e.body).append("\nend)\n");
    }
    return s;
  }();
  return code;
}

/// An embedded script as the engine sends it (found by argument-dependent lookup where a `Script` is taken).
[[nodiscard]] inline engine::Script script_text(const EmbeddedScript& e) {
  return engine::Script(e.sha1, e.body, e.function, function_library_code());
}

/// The embedded script of a policy kind; throws `std::logic_error` if there is none (a build error).
[[nodiscard]] inline const EmbeddedScript& script_for(std::string_view kind) {
  for (const EmbeddedScript& s : kEmbeddedScripts) {
    if (s.kind == kind) return s;
  }
  throw std::logic_error("no embedded Lua script for policy kind " + std::string(kind));
}

/// The parameters every script takes (ARGV[4..5]; the layered script takes them per layer).
inline constexpr std::size_t kScriptParams = 2;

/// A policy validated for Redis: script, key suffix and parameters; the first `kScriptParams` go as ARGV[4..5], all
/// name the state (include/ratelimit/redis/README.md "Key layout"; GCRA's identity keeps its tolerance).
struct ScriptBinding {
  const EmbeddedScript* script = nullptr;
  std::string_view suffix;
  std::vector<std::string> params;
};

/// Validates `rules` (of `policy.rules(1000)`) for Lua's doubles. Throws `std::invalid_argument` naming the field.
template <Policy P>
[[nodiscard]] ScriptBinding bind(const RulesOf<P>& rules) {
  auto count_bound = [](std::int64_t v, std::string_view field) {
    if (v >= kLuaExact) ratelimit::detail::invalid(field, "must be below 2^53 on Redis (Lua numbers are doubles)");
  };
  ScriptBinding b{&script_for(P::kind), ":state", {}};
  if constexpr (std::is_same_v<P, FixedWindow> || std::is_same_v<P, SlidingWindowLog> ||
                std::is_same_v<P, SlidingWindowCounter>) {
    const std::string name(P::kind == FixedWindow::kind        ? "FixedWindow"
                           : P::kind == SlidingWindowLog::kind ? "SlidingWindowLog"
                                                               : "SlidingWindowCounter");
    count_bound(rules.limit(), name + ".limit");
    if constexpr (std::is_same_v<P, SlidingWindowCounter>) {
      // The script's products (prev * (W - r), (cur + n) * W, a * W) are all at most L * W.
      if (ratelimit::detail::i128{rules.limit()} * rules.window() > kLuaExact) {
        ratelimit::detail::invalid(name + ".window",
                                   "limit * window (in microseconds) must be at most 2^53 on Redis, "
                                   "so that the Lua script's products stay exact");
      }
    }
    if constexpr (std::is_same_v<P, SlidingWindowLog>) b.suffix = ":log";
    b.params = {std::to_string(rules.limit()), std::to_string(rules.window())};
  } else if constexpr (std::is_same_v<P, Gcra>) {
    count_bound(rules.limit(), "Gcra.burst");
    b.params = {std::to_string(rules.limit()), std::to_string(rules.emission_interval()),
                std::to_string(rules.tolerance())};
  } else if constexpr (std::is_same_v<P, TokenBucket>) {
    count_bound(rules.limit(), "TokenBucket.capacity");
    b.params = {std::to_string(rules.limit()), std::to_string(rules.emission_interval())};
  } else {
    static_assert(!sizeof(P), "RedisLimiter supports the five policies of ratelimit/policy/");
  }
  return b;
}

/// The longest backlog (us) a GCRA or token bucket state may reach by bookings and debts: the horizon every reply's
/// durations are checked against, so that time plus it stays below 2^53 (times are within 2^52).
inline constexpr std::int64_t kMaxBacklogUs = ratelimit::detail::kMaxHorizonNs / 1000;

/// What a settle of difference `d` sends as its cost and debt bound (ARGV[6]) under `rules` for `max_debt` (>= 0):
/// both clamped so that every value of the script stays an exact integer below 2^53 (the backlog within
/// `kMaxBacklogUs`; a count at most 2^53 - 1; for the sliding counter the count times the window at most 2^53). A
/// debit beyond limit + bound + 1 clamps to the same state, and a refund beyond 2^53 empties it as well.
template <Policy P>
[[nodiscard]] std::array<std::int64_t, 2> settle_args(const RulesOf<P>& rules, std::int64_t max_debt, std::int64_t d) {
  std::int64_t most = 0;  // the largest debt bound
  if constexpr (std::is_same_v<P, Gcra> || std::is_same_v<P, TokenBucket>) {
    most = (kMaxBacklogUs - rules.tolerance()) / rules.emission_interval();
  } else if constexpr (std::is_same_v<P, SlidingWindowCounter>) {
    most = kLuaExact / rules.window() - rules.limit();
  } else {
    most = kLuaExact - 1 - rules.limit();
  }
  const std::int64_t bound = max_debt < most ? max_debt : most;
  const std::int64_t top = rules.limit() + bound + 1;
  return {d > top ? top : (d < -kLuaExact ? -kLuaExact : d), bound};
}

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
