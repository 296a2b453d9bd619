#pragma once

/// @file
/// The one place a Lua script call is sent, for single checks, batches, layered checks, leases and
/// concurrency permits, on one server or Redis Cluster: `EVALSHA`, and `EVAL` with the body for each call
/// answered `NOSCRIPT`; or, with `ConnectionOptions::use_functions`, `FCALL` of the scripts' Functions
/// library, `FUNCTION LOAD` where a server lacks it, and `EVALSHA` where a server refuses Functions.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/detail/lua_scripts.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/redis/engine/pipeline.hpp"
#include "ratelimit/redis/engine/reply.hpp"
#include "ratelimit/redis/engine/route.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {

namespace detail {

/// The source of the Redis Functions library `kFunctionLibrary` (`FUNCTION LOAD`): every embedded script,
/// registered under its `function` name as `function(KEYS, ARGV) <body> end`, so it runs unchanged.
/// Built once; thread-safe.
[[nodiscard]] inline const std::string& function_library_code() {
  static const std::string code = [] {
    std::string s = "#!lua name=" + std::string(kFunctionLibrary) + "\n";
    for (const EmbeddedScript& e : kEmbeddedScripts) {
      s += "redis.register_function('";
      s += e.function;
      s += "', function(KEYS, ARGV)\n";
      s += e.body;
      s += "\nend)\n";
    }
    return s;
  }();
  return code;
}

/// An `FCALL` of a function the server does not have (fresh server, `FUNCTION FLUSH`): it did not run.
[[nodiscard]] inline bool function_missing(const redisReply& r) noexcept {
  return is_error(r, "ERR Function not found");
}

/// The server will not run Functions for us: no permission for `FCALL` / `FUNCTION LOAD`, or no such
/// command (Redis < 7, renamed). Then nothing ran; the call goes as `EVALSHA` instead.
[[nodiscard]] inline bool functions_refused(const redisReply& r) noexcept {
  if (is_error(r, "ERR unknown command") || is_error(r, "ERR unknown subcommand")) return true;
  if (!is_error(r, "NOPERM")) return false;
  const std::string_view t = text(r);
  return t.find("'fcall'") != std::string_view::npos || t.find("'function") != std::string_view::npos;
}

/// A `FUNCTION LOAD` reply that means the library is there now (loaded, or loaded by someone else first).
[[nodiscard]] inline bool library_loaded(const redisReply& r) noexcept {
  return !is_error(r) || text(r).find("already exists") != std::string_view::npos;
}

}  // namespace detail

/// Runs `calls` (each `{"EVALSHA", script.sha1, numkeys, keys..., args...}`, `slot` set) through `route`
/// and returns how many calls found their script missing and were answered (`NOSCRIPT`: one `EVAL` each,
/// which also caches the script again; with Functions, a missing library: `FUNCTION LOAD` once per slot,
/// then the call again). No `SCRIPT LOAD` is ever sent, so a user without `script|load` permission, or a
/// server with `SCRIPT` renamed, works as long as `EVALSHA` and `EVAL` are allowed.
///
/// Functions (`route.functions_usable()`): the calls go as `FCALL <script.function>`; a call refused as a
/// Functions call (see `detail::functions_refused`) did not run and goes again as `EVALSHA`, and the route
/// sends `EVALSHA` from then on (`Route::refuse_functions`).
///
/// Order: `order_keys[i]` names the key whose requests must run in order (empty span: all distinct).
/// A pipeline can meet a script cache flush halfway, and a `NOSCRIPT`'d call re-sent after later calls
/// ran would run out of order. So the calls go in rounds, each holding at most one call per key (the
/// n-th call of a key in round n), and a round's `NOSCRIPT`s (and missing functions) are answered before
/// the next round is sent: no call of a key runs after a later one of the same key. A batch of distinct
/// keys is one round.
///
/// Outcomes land in each call; never throws `BackendError`; may throw `std::bad_alloc`. Thread-safe as
/// the route is.
inline std::size_t run_script(Route& route, const detail::EmbeddedScript& script, std::span<RouteCall> calls,
                              std::span<const std::string_view> order_keys = {}) {
  std::size_t reloads = 0;
  // One deadline for the whole call, reloads and retries included.
  const auto deadline = std::chrono::steady_clock::now() + route.options().command_timeout;
  for (RouteCall& c : calls) c.deadline = std::min(c.deadline, deadline);
  const bool fcall = route.functions_usable();
  if (fcall) {
    for (RouteCall& c : calls) {
      c.args[0] = "FCALL";
      c.args[1] = script.function;
    }
  }
  // Sends calls[i] for each i of `which` again as they stand, outcomes back into calls.
  auto resend = [&](const std::vector<std::size_t>& which) {
    std::vector<RouteCall> again(which.size());
    for (std::size_t k = 0; k < which.size(); ++k) {
      again[k].slot = calls[which[k]].slot;
      again[k].key = calls[which[k]].key;
      again[k].args = calls[which[k]].args;
      again[k].deadline = calls[which[k]].deadline;
    }
    route.execute(again);
    for (std::size_t k = 0; k < which.size(); ++k) {
      calls[which[k]].reply = std::move(again[k].reply);
      calls[which[k]].error = std::move(again[k].error);
    }
  };
  auto as_evalsha = [&](RouteCall& c) {
    c.args[0] = "EVALSHA";
    c.args[1] = script.sha1;
  };
  auto replied = [&](std::size_t i, auto&& test) { return !calls[i].error && calls[i].reply && test(*calls[i].reply); };
  // Functions: a refused FCALL goes as EVALSHA; a missing library is loaded (once per slot), then the call
  // goes again (as EVALSHA if the load was refused, or the function is still missing).
  auto answer_functions = [&](const std::vector<std::size_t>& batch) {
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<std::size_t> missing, again;
      for (const std::size_t i : batch) {
        if (calls[i].args[0] != "FCALL") continue;
        if (replied(i, detail::functions_refused)) {
          route.refuse_functions();
          as_evalsha(calls[i]);
          again.push_back(i);
        } else if (replied(i, detail::function_missing)) {
          if (pass == 0) {
            missing.push_back(i);
          } else {
            as_evalsha(calls[i]);
            again.push_back(i);
          }
        }
      }
      if (!missing.empty()) {
        reloads += missing.size();
        std::vector<RouteCall> loads;
        std::unordered_map<std::uint16_t, std::size_t> load_of;  // slot -> index in loads
        for (const std::size_t i : missing) {
          if (load_of.emplace(calls[i].slot, loads.size()).second) {
            RouteCall& l = loads.emplace_back();
            l.slot = calls[i].slot;
            l.args = {"FUNCTION", "LOAD", detail::function_library_code()};
            l.deadline = deadline;
          }
        }
        route.execute(loads);
        for (const std::size_t i : missing) {
          const RouteCall& l = loads[load_of[calls[i].slot]];
          if (l.error) {  // the call did not run; it fails as the load did
            calls[i].reply.reset();
            calls[i].error = l.error;
            continue;
          }
          if (!detail::library_loaded(*l.reply)) {
            if (detail::functions_refused(*l.reply)) route.refuse_functions();
            as_evalsha(calls[i]);
          }
          again.push_back(i);
        }
      }
      if (again.empty()) return;
      resend(again);
    }
  };
  // Answers the NOSCRIPTs of `batch` (indices into calls) with EVAL, once each.
  auto answer_noscript = [&](const std::vector<std::size_t>& batch) {
    std::vector<std::size_t> missing;
    for (const std::size_t i : batch) {
      if (replied(i, [](const redisReply& r) { return is_error(r, "NOSCRIPT"); })) missing.push_back(i);
    }
    if (missing.empty()) return;
    reloads += missing.size();
    for (const std::size_t i : missing) {
      calls[i].args[0] = "EVAL";
      calls[i].args[1] = script.body;
    }
    resend(missing);
  };
  auto answer = [&](const std::vector<std::size_t>& batch) {
    if (fcall) answer_functions(batch);
    answer_noscript(batch);
  };

  std::vector<std::size_t> round_of(calls.size(), 0);
  std::size_t rounds = calls.empty() ? 0 : 1;
  if (!order_keys.empty()) {
    std::unordered_map<std::string_view, std::size_t> seen;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const std::size_t n = seen[order_keys[i]]++;
      round_of[i] = n;
      if (n + 1 > rounds) rounds = n + 1;
    }
  }
  if (rounds == 1) {
    route.execute(calls);
    std::vector<std::size_t> all(calls.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    answer(all);
    return reloads;
  }
  for (std::size_t r = 0; r < rounds; ++r) {
    std::vector<std::size_t> batch;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      if (round_of[i] == r) batch.push_back(i);
    }
    std::vector<RouteCall> part(batch.size());
    for (std::size_t k = 0; k < batch.size(); ++k) {
      part[k].slot = calls[batch[k]].slot;
      part[k].key = calls[batch[k]].key;
      part[k].args = calls[batch[k]].args;
      part[k].deadline = calls[batch[k]].deadline;
    }
    route.execute(part);
    for (std::size_t k = 0; k < batch.size(); ++k) {
      calls[batch[k]].reply = std::move(part[k].reply);
      calls[batch[k]].error = std::move(part[k].error);
    }
    answer(batch);
  }
  return reloads;
}

/// One async script call: `args` = `{"EVALSHA", script.sha1, numkeys, keys..., args...}`. Started with
/// `start`; a `NOSCRIPT` reply is answered once by sending `EVAL` with the body on the same connection
/// (it did not run, so this is no re-send of a call that may have run). With Functions
/// (`Route::functions_usable`) it goes as `FCALL`; a missing library is loaded (`FUNCTION LOAD`) on the
/// same connection and the call sent again, and a refusal sends it as `EVALSHA` (as `run_script` does).
/// `finished` then runs once, on the route's I/O thread, with the final reply or the error and whether the
/// script (or library) was loaded again.
class AsyncScriptCall : public PipelineOp {
 public:
  explicit AsyncScriptCall(const detail::EmbeddedScript& script) : script_(&script) {}

  /// Submits the call through `route` (`slot` and `deadline` set). Throws what `Route::submit` throws.
  void start(Route& route) {
    route_ = &route;
    if (route.functions_usable()) {
      args[0] = "FCALL";
      args[1] = std::string(script_->function);
      phase_ = Phase::fcall;
    }
    format();
    route.submit(*this);
  }

  void complete(Reply reply, std::optional<BackendError> error) noexcept final {
    if (!error && reply && sink() != nullptr && next(*reply)) {
      format();
      sink()->submit(*this);
      return;
    }
    if (phase_ == Phase::loading) {  // the load failed (no reply): the call did not run
      finished(nullptr, error ? std::move(error) : BackendError(BackendErrorCause::protocol, "FUNCTION LOAD: no reply"),
               reloaded_);
      return;
    }
    finished(std::move(reply), std::move(error), reloaded_);
  }

 protected:
  ~AsyncScriptCall() = default;
  /// The outcome; called exactly once. May delete the call.
  virtual void finished(Reply reply, std::optional<BackendError> error, bool reloaded) noexcept = 0;

 private:
  enum class Phase { evalsha, fcall, loading, fcall_again, eval };

  // Turns this op into its next command for `reply`, or returns false when `reply` is the outcome.
  bool next(const redisReply& reply) noexcept {
    try {
      switch (phase_) {
        case Phase::evalsha:
          if (!is_error(reply, "NOSCRIPT")) return false;
          return to_eval();
        case Phase::fcall:
        case Phase::fcall_again:
          if (detail::functions_refused(reply)) {
            route_->refuse_functions();
            return to_evalsha();
          }
          if (!detail::function_missing(reply)) return false;
          if (phase_ == Phase::fcall_again) return to_evalsha();
          reloaded_ = true;
          saved_.swap(args);
          args = {"FUNCTION", "LOAD", detail::function_library_code()};
          phase_ = Phase::loading;
          return true;
        case Phase::loading:
          args.swap(saved_);
          saved_.clear();
          if (detail::library_loaded(reply)) {
            phase_ = Phase::fcall_again;
            return true;
          }
          if (detail::functions_refused(reply)) route_->refuse_functions();
          return to_evalsha();
        case Phase::eval: return false;
      }
    } catch (...) {  // std::bad_alloc: the reply stands as the outcome
    }
    return false;
  }
  bool to_evalsha() {
    args[0] = "EVALSHA";
    args[1] = std::string(script_->sha1);
    phase_ = Phase::evalsha;
    return true;
  }
  bool to_eval() {
    reloaded_ = true;
    args[0] = "EVAL";
    args[1] = std::string(script_->body);
    phase_ = Phase::eval;
    return true;
  }
  void format() {
    std::vector<std::string_view> views(args.begin(), args.end());
    command.clear();
    append_resp(command, views);
  }
  const detail::EmbeddedScript* script_;
  Route* route_ = nullptr;
  Phase phase_ = Phase::evalsha;
  std::vector<std::string> saved_;  // the FCALL's arguments while the library loads
  bool reloaded_ = false;
};

}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
