// A script call's steps (include/ratelimit/redis/README.md "Failures" and "Redis Functions"), without a server:
// a scripted route answers EVALSHA / EVAL / FCALL / FUNCTION LOAD as a server in a given state would, and the sync
// `run_script` and the async `AsyncScriptCall` must send the same commands and end with the same outcome.
#include <gtest/gtest.h>

#include <hiredis/hiredis.h>

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ratelimit/redis.hpp>

namespace {

using ratelimit::BackendError;
using ratelimit::BackendErrorCause;
using ratelimit::redis::engine::AsyncScriptCall;
using ratelimit::redis::engine::PipelineOp;
using ratelimit::redis::engine::Reply;
using ratelimit::redis::engine::RouteCall;
using ratelimit::redis::engine::Script;

// The reply `resp` (one RESP value) as hiredis parses it.
Reply parse(std::string_view resp) {
  redisReader* reader = redisReaderCreate();
  redisReaderFeed(reader, resp.data(), resp.size());
  void* out = nullptr;
  EXPECT_EQ(redisReaderGetReply(reader, &out), REDIS_OK);
  redisReaderFree(reader);
  return Reply(static_cast<redisReply*>(out));
}

// How the scripted server stands.
struct ServerState {
  bool cached = false;              // the script is in the script cache
  bool loaded = false;              // the Functions library is there
  bool refuse_fcall = false;        // NOPERM for FCALL
  bool refuse_load = false;         // NOPERM for FUNCTION LOAD
  bool load_keeps_missing = false;  // FUNCTION LOAD answers OK, yet FCALL still finds no function
  bool load_fails = false;          // FUNCTION LOAD gets no reply (connection lost)
};

// A route answering as a server in `state` would, sync and async (completing at once), logging each command.
class ScriptedRoute final : public ratelimit::redis::Route {
 public:
  explicit ScriptedRoute(ServerState s, bool use_functions) : state(s) { options_.use_functions = use_functions; }

  void execute(std::span<RouteCall> calls) override {
    for (RouteCall& c : calls) {
      log.push_back(std::string(c.args[0]) + " " + std::string(c.args[1]) + " @" + std::to_string(c.slot));
      deadlines.push_back(c.deadline);
      auto [reply, error] = answer(c.args[0]);
      c.reply = std::move(reply);
      c.error = std::move(error);
    }
  }
  void submit(PipelineOp& op) override {
    ratelimit::redis::engine::PipelineOpAccess::set_sink(op, this);
    log.push_back(op.args[0] + " " + op.args[1] + " @" + std::to_string(op.slot));
    auto [reply, error] = answer(op.args[0]);
    op.complete(std::move(reply), std::move(error));
  }
  [[nodiscard]] bool sharded() const noexcept override { return false; }
  [[nodiscard]] const void* domain() const noexcept override { return this; }
  [[nodiscard]] const ratelimit::redis::ConnectionOptions& options() const noexcept override { return options_; }
  [[nodiscard]] const ratelimit::redis::LimiterOptions& limiter_defaults() const noexcept override { return limiter_; }
  [[nodiscard]] ratelimit::redis::RouteCounters counters() const override { return {}; }

  ServerState state;
  std::vector<std::string> log;
  std::vector<std::chrono::steady_clock::time_point> deadlines;

 private:
  std::pair<Reply, std::optional<BackendError>> answer(std::string_view command) {
    if (command == "EVALSHA")
      return {parse(state.cached ? ":1\r\n" : "-NOSCRIPT No matching script.\r\n"), std::nullopt};
    if (command == "EVAL") {
      state.cached = true;
      return {parse(":1\r\n"), std::nullopt};
    }
    if (command == "FCALL") {
      if (state.refuse_fcall)
        return {parse("-NOPERM User u has no permissions to run the 'fcall' command\r\n"), std::nullopt};
      return {parse(state.loaded ? ":2\r\n" : "-ERR Function not found\r\n"), std::nullopt};
    }
    if (state.load_fails) return {nullptr, BackendError(BackendErrorCause::io, "connection lost")};
    if (state.refuse_load) {
      return {parse("-NOPERM User u has no permissions to run the 'function|load' command\r\n"), std::nullopt};
    }
    const bool fresh = !state.loaded;
    state.loaded = !state.load_keeps_missing;
    return {parse(fresh ? "$3\r\nlib\r\n" : "-ERR Library 'lib' already exists\r\n"), std::nullopt};
  }

  ratelimit::redis::ConnectionOptions options_;
  ratelimit::redis::LimiterOptions limiter_;
};

const Script kScript("sha", "body", "fn", "#!lua name=lib\n");

class Probe final : public AsyncScriptCall {
 public:
  using AsyncScriptCall::AsyncScriptCall;
  int outcomes = 0;
  Reply reply;
  std::optional<BackendError> error;
  bool reloaded = false;

 private:
  void finished(Reply r, std::optional<BackendError> e, bool re) noexcept override {
    ++outcomes;
    reply = std::move(r);
    error = std::move(e);
    reloaded = re;
  }
};

struct Case {
  const char* name;
  ServerState state;
  bool use_functions;
  std::vector<std::string> sends;    // the commands, in order
  std::optional<long long> outcome;  // the integer reply, or none: the call failed
  bool reloaded;
  bool functions_usable_after;
};

const std::vector<Case> kCases{
    {"cached", {.cached = true}, false, {"EVALSHA sha"}, 1, false, false},
    {"noscript", {}, false, {"EVALSHA sha", "EVAL body"}, 1, true, false},
    {"library missing", {}, true, {"FCALL fn", "FUNCTION LOAD", "FCALL fn"}, 2, true, true},
    {"library there", {.loaded = true}, true, {"FCALL fn"}, 2, false, true},
    {"fcall refused", {.refuse_fcall = true}, true, {"FCALL fn", "EVALSHA sha", "EVAL body"}, 1, true, false},
    {"load refused",
     {.cached = true, .refuse_load = true},
     true,
     {"FCALL fn", "FUNCTION LOAD", "EVALSHA sha"},
     1,
     true,
     false},
    {"still missing after the load",
     {.load_keeps_missing = true},
     true,
     {"FCALL fn", "FUNCTION LOAD", "FCALL fn", "EVALSHA sha", "EVAL body"},
     1,
     true,
     true},
    {"load without a reply", {.load_fails = true}, true, {"FCALL fn", "FUNCTION LOAD"}, std::nullopt, true, true},
};

// The log without slots.
std::vector<std::string> commands(const std::vector<std::string>& log) {
  std::vector<std::string> out;
  for (const std::string& l : log) out.push_back(l.substr(0, l.rfind(" @")));
  return out;
}

// The commands `route` saw and a call's outcome are what `t` expects.
void expect_case(const Case& t, const ScriptedRoute& route, const Reply& reply,
                 const std::optional<BackendError>& error, bool reloaded) {
  EXPECT_EQ(commands(route.log), t.sends);
  EXPECT_EQ(reloaded, t.reloaded);
  EXPECT_EQ(route.functions_usable(), t.functions_usable_after);
  if (t.outcome) {
    ASSERT_FALSE(error);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->integer, *t.outcome);
  } else {
    ASSERT_TRUE(error);
    EXPECT_EQ(error->cause(), BackendErrorCause::io);
    EXPECT_FALSE(reply);
  }
}

TEST(ScriptStep, SyncCallsSendWhatEachReplyAsksFor) {
  for (const Case& t : kCases) {
    SCOPED_TRACE(t.name);
    ScriptedRoute route(t.state, t.use_functions);
    RouteCall call;
    call.slot = 5;
    call.args = {"EVALSHA", "sha", "1", "k"};
    const std::size_t reloads = ratelimit::redis::engine::run_script(route, kScript, std::span<RouteCall>(&call, 1));
    expect_case(t, route, call.reply, call.error, reloads == 1);
    EXPECT_LE(reloads, 1u);
    ASSERT_FALSE(route.deadlines.empty());
    for (const auto d : route.deadlines) EXPECT_EQ(d, route.deadlines.front());  // one deadline, reloads included
  }
}

TEST(ScriptStep, AsyncCallsSendWhatEachReplyAsksFor) {
  for (const Case& t : kCases) {
    SCOPED_TRACE(t.name);
    ScriptedRoute route(t.state, t.use_functions);
    Probe call(kScript);
    call.slot = 5;
    call.args = {"EVALSHA", "sha", "1", "k"};
    call.start(route);
    EXPECT_EQ(call.outcomes, 1);
    expect_case(t, route, call.reply, call.error, call.reloaded);
    EXPECT_EQ(call.args[2], "1");  // the call's own arguments are back after a load
    EXPECT_EQ(call.args[3], "k");
  }
}

// A batch that finds the library missing loads it once per slot, then every call goes again.
TEST(ScriptStep, BatchLoadsTheLibraryOncePerSlot) {
  ScriptedRoute route({}, true);
  std::vector<RouteCall> calls(4);
  const std::uint16_t slots[] = {7, 7, 9, 9};
  for (std::size_t i = 0; i < calls.size(); ++i) {
    calls[i].slot = slots[i];
    calls[i].args = {"EVALSHA", "sha", "1", "k" + std::to_string(i)};
  }
  EXPECT_EQ(ratelimit::redis::engine::run_script(route, kScript, calls), 4u);
  const std::vector<std::string> expected{"FCALL fn @7",      "FCALL fn @7",      "FCALL fn @9", "FCALL fn @9",
                                          "FUNCTION LOAD @7", "FUNCTION LOAD @9", "FCALL fn @7", "FCALL fn @7",
                                          "FCALL fn @9",      "FCALL fn @9"};
  EXPECT_EQ(route.log, expected);
  for (const RouteCall& c : calls) {
    ASSERT_TRUE(c.reply);
    EXPECT_EQ(c.reply->integer, 2);
  }
}

// Two calls of one key meet NOSCRIPT: the second is sent only after the first has run (as EVAL).
TEST(ScriptStep, RepeatedKeysGoInRoundsAnsweredInTurn) {
  ScriptedRoute route({}, false);
  std::vector<RouteCall> calls(3);
  const std::vector<std::string_view> order{"a", "b", "a"};
  for (std::size_t i = 0; i < calls.size(); ++i) {
    calls[i].slot = static_cast<std::uint16_t>(i);
    calls[i].args = {"EVALSHA", "sha", "1", order[i]};
  }
  EXPECT_EQ(ratelimit::redis::engine::run_script(route, kScript, calls, order), 2u);
  const std::vector<std::string> expected{"EVALSHA sha @0", "EVALSHA sha @1", "EVAL body @0", "EVAL body @1",
                                          "EVALSHA sha @2"};
  EXPECT_EQ(route.log, expected);
}

// An embedded script is a `Script` where the engine takes one: its SHA1, body, function and the library.
TEST(ScriptStep, EmbeddedScriptsConvertToTheEnginesScript) {
  const auto& embedded = ratelimit::redis::detail::script_for("gcra");
  const Script s = embedded;
  EXPECT_EQ(s.sha1, embedded.sha1);
  EXPECT_EQ(s.body, embedded.body);
  EXPECT_EQ(s.function, embedded.function);
  EXPECT_EQ(s.library, ratelimit::redis::detail::function_library_code());
}

}  // namespace
