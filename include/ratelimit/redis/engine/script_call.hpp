#pragma once

/// @file
/// The one place a Lua script call is sent, sync or async, on any route (include/ratelimit/redis/README.md
/// "Failures" and "Redis Functions"): each call is a `detail::ScriptStep`, which reads each reply.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ratelimit/error.hpp"
#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/engine/pipeline.hpp"
#include "ratelimit/redis/engine/reply.hpp"
#include "ratelimit/redis/engine/route.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace engine {

/// A Lua script as the engine sends it. The views must outlive every call made with it.
struct Script {
  /// The `EVALSHA` name: the SHA1 of `body`.
  std::string_view sha1;
  /// Sent with `EVAL` when the server answers `NOSCRIPT`.
  std::string_view body;
  /// Its `FCALL` name, and the source of its Functions library (`FUNCTION LOAD`).
  std::string_view function;
  std::string_view library;

  Script(std::string_view sha1_, std::string_view body_, std::string_view function_, std::string_view library_)
      : sha1(sha1_), body(body_), function(function_), library(library_) {}
  /// A script of a floor above, described by its `script_text(s)` (found by argument-dependent lookup).
  template <class S>
    requires requires(const S& s) {
      { script_text(s) } -> std::same_as<Script>;
    }
  Script(const S& s) : Script(script_text(s)) {}  // NOLINT(google-explicit-constructor): call sites pass theirs
};

namespace detail {

/// The server will not run Functions (no permission, or no such command: Redis < 7): nothing ran.
[[nodiscard]] inline bool functions_refused(const redisReply& r) noexcept {
  if (is_error(r, "ERR unknown command") || is_error(r, "ERR unknown subcommand")) return true;
  if (!is_error(r, "NOPERM")) return false;
  const std::string_view t = text(r);
  return t.find("'fcall'") != std::string_view::npos || t.find("'function") != std::string_view::npos;
}

/// A `FUNCTION LOAD` reply that means the library is there now (loaded by us or another client).
[[nodiscard]] inline bool library_loaded(const redisReply& r) noexcept {
  return !is_error(r) || text(r).find("already exists") != std::string_view::npos;
}

/// One script call's state: `EVALSHA`, then one `EVAL` on `NOSCRIPT`; with Functions, `FCALL`, then on a
/// missing function `FUNCTION LOAD` and `FCALL` again (else `EVALSHA`), and `EVALSHA` wherever Functions are
/// refused. Every reply goes through `next`, the only place these replies are recognised; each step sends
/// something that did not run before, so no call runs twice.
class ScriptStep {
 public:
  explicit ScriptStep(bool fcall) noexcept : phase_(fcall ? Phase::fcall : Phase::evalsha) {}

  /// Takes the reply to what was sent last (null: none came). True when something goes next (`FUNCTION LOAD`
  /// when `loading()`, else the call as `write` spells it); false when this is the outcome. A refusal of
  /// Functions sets `refused` (`Route::functions_refusal`).
  bool next(const redisReply* reply, std::atomic<bool>& refused) noexcept {
    if (reply == nullptr || phase_ == Phase::eval) return false;
    if (phase_ == Phase::evalsha) {
      if (!is_error(*reply, "NOSCRIPT")) return false;
      return to(Phase::eval, true);
    }
    if (functions_refused(*reply)) {
      refused.store(true, std::memory_order_relaxed);
      return to(Phase::evalsha, false);
    }
    if (phase_ == Phase::loading) return to(library_loaded(*reply) ? Phase::fcall_again : Phase::evalsha, false);
    if (!is_error(*reply, "ERR Function not found")) return false;  // else it did not run: load the library
    return phase_ == Phase::fcall ? to(Phase::loading, true) : to(Phase::evalsha, false);
  }
  /// True while the next send is `FUNCTION LOAD`; after `next` returned false: the load failed, nothing ran.
  [[nodiscard]] bool loading() const noexcept { return phase_ == Phase::loading; }
  /// True once the script (or library) had to be sent again (one `script_reloads`).
  [[nodiscard]] bool reloaded() const noexcept { return reloaded_; }
  /// Spells the call's command (`args[0..1]`) for the current phase; not while `loading()`.
  template <class Args>
  void write(Args& args, const Script& s) const {
    const bool fcall = phase_ == Phase::fcall || phase_ == Phase::fcall_again;
    args[0] = std::string_view(fcall ? "FCALL" : phase_ == Phase::eval ? "EVAL" : "EVALSHA");
    args[1] = fcall ? s.function : phase_ == Phase::eval ? s.body : s.sha1;
  }

 private:
  enum class Phase : std::uint8_t { evalsha, eval, fcall, loading, fcall_again };
  bool to(Phase p, bool reload) noexcept {
    phase_ = p;
    reloaded_ = reloaded_ || reload;
    return true;
  }
  Phase phase_;
  bool reloaded_ = false;
};

/// The error of a call whose `FUNCTION LOAD` failed: `error`, or a protocol error when there was none.
[[nodiscard]] inline BackendError load_failed(std::optional<BackendError> error) {
  return error ? std::move(*error) : BackendError(BackendErrorCause::protocol, "FUNCTION LOAD: no reply");
}

/// The rounds of `run_script`: the n-th call of a key of `order_keys` in round n; no `order_keys`: one round.
[[nodiscard]] inline std::vector<std::vector<std::size_t>> script_rounds(std::size_t n,
                                                                         std::span<const std::string_view> order_keys) {
  std::vector<std::vector<std::size_t>> rounds(n == 0 ? 0 : 1);
  std::unordered_map<std::string_view, std::size_t> seen;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t r = order_keys.empty() ? 0 : seen[order_keys[i]]++;
    if (r == rounds.size()) rounds.emplace_back();
    rounds[r].push_back(i);
  }
  return rounds;
}

/// Sends what each call of `which` needs next (the call, or one `FUNCTION LOAD` per slot) as one
/// `Route::execute` and hands each reply to its step. Leaves in `which` the calls that go on.
inline void send_script_calls(Route& route, const Script& script, std::span<RouteCall> calls,
                              std::span<ScriptStep> steps, std::vector<std::size_t>& which) {
  const bool whole =
      which.size() == calls.size() && std::none_of(steps.begin(), steps.end(), [](auto& s) { return s.loading(); });
  std::vector<RouteCall> part;                             // unless `whole`: what goes
  std::vector<std::size_t> at(which.size());               // which[k]'s reply: part[at[k]]
  std::unordered_map<std::uint16_t, std::size_t> load_of;  // slot -> its load in part
  auto add = [&](const RouteCall& c, std::vector<std::string_view> args, std::string_view key) {
    RouteCall& p = part.emplace_back();
    p.slot = c.slot;
    p.key = key;
    p.args = std::move(args);
    p.deadline = c.deadline;
    return part.size() - 1;
  };
  for (std::size_t k = 0; k < which.size(); ++k) {
    RouteCall& c = calls[which[k]];
    if (whole) {  // in place: no stale outcome of an earlier send stays
      c.reply.reset();
      c.error.reset();
    } else if (!steps[which[k]].loading()) {
      at[k] = add(c, c.args, c.key);
    } else if (const auto found = load_of.find(c.slot); found != load_of.end()) {
      at[k] = found->second;
    } else {
      at[k] = load_of[c.slot] = add(c, {"FUNCTION", "LOAD", script.library}, {});
    }
  }
  route.execute(whole ? calls : std::span<RouteCall>(part));
  std::vector<std::size_t> again;
  for (std::size_t k = 0; k < which.size(); ++k) {
    RouteCall& c = calls[which[k]];
    ScriptStep& step = steps[which[k]];
    RouteCall& out = whole ? c : part[at[k]];
    const bool load = step.loading();
    if (step.next(out.error ? nullptr : out.reply.get(), *route.functions_refusal())) {
      if (!step.loading()) step.write(c.args, script);
      again.push_back(which[k]);
    } else if (load) {  // the call did not run; it fails as its load did
      c.reply.reset();
      c.error = load_failed(out.error);
    } else if (!whole) {
      c.reply = std::move(out.reply);
      c.error = std::move(out.error);
    }
  }
  which = std::move(again);
}

}  // namespace detail

/// Runs `calls` (each `{"EVALSHA", script.sha1, numkeys, keys..., args...}`, `slot` set) through `route`, each
/// through its `detail::ScriptStep`; returns how many had their script (or library) sent again. One deadline
/// per call, reloads included: the earlier of its own and `command_timeout` from now. `order_keys[i]`: the key
/// whose calls must run in order (empty: all distinct), so a call re-sent after `NOSCRIPT` cannot run after a
/// later one; the calls then go in rounds of one call per key. Outcomes land in each call; never throws
/// `BackendError`; may throw `std::bad_alloc`. Thread-safe as the route is.
inline std::size_t run_script(Route& route, const Script& script, std::span<RouteCall> calls,
                              std::span<const std::string_view> order_keys = {}) {
  const auto deadline = std::chrono::steady_clock::now() + route.options().command_timeout;
  std::vector<detail::ScriptStep> steps(calls.size(), detail::ScriptStep(route.functions_usable()));
  for (std::size_t i = 0; i < calls.size(); ++i) {
    calls[i].deadline = std::min(calls[i].deadline, deadline);
    steps[i].write(calls[i].args, script);
  }
  for (std::vector<std::size_t>& which : detail::script_rounds(calls.size(), order_keys)) {
    while (!which.empty()) detail::send_script_calls(route, script, calls, steps, which);
  }
  return static_cast<std::size_t>(std::count_if(steps.begin(), steps.end(), [](auto& s) { return s.reloaded(); }));
}

/// One async script call (`args` = `{"EVALSHA", script.sha1, numkeys, keys..., args...}`) through its
/// `detail::ScriptStep`, as `run_script`'s calls. `finished` runs once, on the route's I/O thread, with the
/// outcome and whether the script (or library) was loaded again.
class AsyncScriptCall : public PipelineOp {
 public:
  explicit AsyncScriptCall(const Script& script) : script_(script) {}

  /// Submits the call through `route` (`slot` and `deadline` set). Throws what `Route::submit` throws.
  void start(Route& route) {
    functions_refused_ = route.functions_refusal();
    step_ = detail::ScriptStep(route.functions_usable());
    step_.write(args, script_);
    format();
    route.submit(*this);
  }

  void complete(Reply reply, std::optional<BackendError> error) noexcept final {
    const bool load = step_.loading();
    if (sink() != nullptr && step_.next(error ? nullptr : reply.get(), *functions_refused_) && prepare()) {
      sink()->submit(*this);
    } else if (load) {  // the call did not run; it fails as its load did
      if (!saved_.empty()) args.swap(saved_);
      finished(nullptr, detail::load_failed(std::move(error)), step_.reloaded());
    } else {
      finished(std::move(reply), std::move(error), step_.reloaded());
    }
  }

 protected:
  ~AsyncScriptCall() = default;
  /// The outcome; called exactly once. May delete the call.
  virtual void finished(Reply reply, std::optional<BackendError> error, bool reloaded) noexcept = 0;

 private:
  // Makes this op the command its step sends next; false (std::bad_alloc) when the last reply stands.
  bool prepare() noexcept {
    try {
      if (step_.loading()) {
        saved_.swap(args);
        args = {"FUNCTION", "LOAD", std::string(script_.library)};
      } else {
        if (!saved_.empty()) {
          args.swap(saved_);
          saved_.clear();
        }
        step_.write(args, script_);
      }
      format();
      return true;
    } catch (...) {
      return false;
    }
  }
  void format() {
    std::vector<std::string_view> views(args.begin(), args.end());
    command.clear();
    append_resp(command, views);
  }
  Script script_;
  std::shared_ptr<std::atomic<bool>> functions_refused_;  // the route's: it may be gone by the reply
  detail::ScriptStep step_{false};
  std::vector<std::string> saved_;  // the call's arguments while the library loads
};

}  // namespace engine
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
