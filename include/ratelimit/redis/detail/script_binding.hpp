#pragma once

/// @file
/// How a policy's rules reach its Lua script (script, key suffix, ARGV parameters in microsecond ticks, the bounds
/// that keep Lua's values exact), and the embedded scripts as the engine sends them.

#include <algorithm>
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

/// What a settle of difference `d` sends as its cost and its cap (ARGV[6]) under `rules` for `max_debt` (>= 0): the
/// most a debit may leave, for GCRA and the token bucket a backlog in us (`tau + max_debt * T`, at most the rules'
/// `max_backlog()`, as in memory), for the window policies a count (`limit + max_debt`, at most 2^53 - 1, for the
/// sliding counter at most 2^53 / window: its products stay exact). The cost is clamped where it reaches the cap from
/// any state, so every value of the script stays an exact integer below 2^53.
template <Policy P>
[[nodiscard]] std::array<std::int64_t, 2> settle_args(const RulesOf<P>& rules, std::int64_t max_debt, std::int64_t d) {
  using ratelimit::detail::i128;
  i128 cap = 0, per_unit = 1;
  if constexpr (std::is_same_v<P, Gcra> || std::is_same_v<P, TokenBucket>) {
    per_unit = rules.emission_interval();
    cap = std::min(i128{rules.tolerance()} + i128{max_debt} * per_unit, i128{rules.max_backlog()});
  } else if constexpr (std::is_same_v<P, SlidingWindowCounter>) {
    cap = std::min(i128{rules.limit()} + max_debt, i128{kLuaExact / rules.window()});
  } else {
    cap = std::min(i128{rules.limit()} + max_debt, i128{kLuaExact - 1});
  }
  const i128 top = cap / per_unit + 1;  // a debit of more units passes the cap from an empty state already
  return {static_cast<std::int64_t>(d > top ? top : (d < -kLuaExact ? -kLuaExact : d)), static_cast<std::int64_t>(cap)};
}

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
