#pragma once

/// @file
/// The one place a Lua script call is sent: `EVALSHA`, and `EVAL` with the body for each call answered
/// `NOSCRIPT`, for single checks, batches, layered checks, on one server or Redis Cluster.

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ratelimit/redis/detail/lua_scripts.hpp"
#include "ratelimit/redis/error.hpp"
#include "ratelimit/redis/pipeline.hpp"
#include "ratelimit/redis/reply.hpp"
#include "ratelimit/redis/route.hpp"

namespace ratelimit::redis {

/// Runs `calls` (each `{"EVALSHA", script.sha1, numkeys, keys..., args...}`, `slot` set) through `route`
/// and returns how many `NOSCRIPT` replies were answered (one `EVAL` each, which also caches the script
/// again). No `SCRIPT LOAD` is ever sent, so a user without `script|load` permission, or a server with
/// `SCRIPT` renamed, works as long as `EVALSHA` and `EVAL` are allowed.
///
/// Order: `order_keys[i]` names the key whose requests must run in order (empty span: all distinct).
/// A pipeline can meet a script cache flush halfway, and a `NOSCRIPT`'d call re-sent after later calls
/// ran would run out of order. So the calls go in rounds, each holding at most one call per key (the
/// n-th call of a key in round n), and a round's `NOSCRIPT`s are answered before the next round is
/// sent: no call of a key runs after a later one of the same key. A batch of distinct keys is one round.
///
/// Outcomes land in each call; never throws `BackendError`; may throw `std::bad_alloc`. Thread-safe as
/// the route is.
inline std::size_t run_script(Route& route, const detail::EmbeddedScript& script, std::span<RouteCall> calls,
                              std::span<const std::string_view> order_keys = {}) {
  std::size_t reloads = 0;
  // Answers the NOSCRIPTs of `batch` (indices into calls) with EVAL, once each.
  auto answer_noscript = [&](const std::vector<std::size_t>& batch) {
    std::vector<std::size_t> missing;
    for (const std::size_t i : batch) {
      if (!calls[i].error && calls[i].reply && is_error(*calls[i].reply, "NOSCRIPT")) missing.push_back(i);
    }
    if (missing.empty()) return;
    reloads += missing.size();
    std::vector<RouteCall> again(missing.size());
    for (std::size_t k = 0; k < missing.size(); ++k) {
      again[k].slot = calls[missing[k]].slot;
      again[k].key = calls[missing[k]].key;
      again[k].args = calls[missing[k]].args;
      again[k].args[0] = "EVAL";
      again[k].args[1] = script.body;
    }
    route.execute(again);
    for (std::size_t k = 0; k < missing.size(); ++k) {
      calls[missing[k]].reply = std::move(again[k].reply);
      calls[missing[k]].error = std::move(again[k].error);
    }
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
    answer_noscript(all);
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
    }
    route.execute(part);
    for (std::size_t k = 0; k < batch.size(); ++k) {
      calls[batch[k]].reply = std::move(part[k].reply);
      calls[batch[k]].error = std::move(part[k].error);
    }
    answer_noscript(batch);
  }
  return reloads;
}

/// One async script call: `args` = `{"EVALSHA", script.sha1, numkeys, keys..., args...}`. Started with
/// `start`; a `NOSCRIPT` reply is answered once by sending `EVAL` with the body on the same connection
/// (it did not run, so this is no re-send of a call that may have run). `finished` then runs once, on
/// the route's I/O thread, with the final reply or the error and whether the script was sent again.
class AsyncScriptCall : public PipelineOp {
 public:
  explicit AsyncScriptCall(const detail::EmbeddedScript& script) : script_(&script) {}

  /// Submits the call through `route` (`slot` and `deadline` set). Throws what `Route::submit` throws.
  void start(Route& route) {
    format();
    route.submit(*this);
  }

  void complete(Reply reply, std::optional<BackendError> error) noexcept final {
    if (!error && reply && !reloaded_ && is_error(*reply, "NOSCRIPT") && sink() != nullptr) {
      reloaded_ = true;
      args[0] = "EVAL";
      args[1] = std::string(script_->body);
      format();
      sink()->submit(*this);
      return;
    }
    finished(std::move(reply), std::move(error), reloaded_);
  }

 protected:
  ~AsyncScriptCall() = default;
  /// The outcome; called exactly once. May delete the call.
  virtual void finished(Reply reply, std::optional<BackendError> error, bool reloaded) noexcept = 0;

 private:
  void format() {
    std::vector<std::string_view> views(args.begin(), args.end());
    command.clear();
    append_resp(command, views);
  }
  const detail::EmbeddedScript* script_;
  bool reloaded_ = false;
};

}  // namespace ratelimit::redis
