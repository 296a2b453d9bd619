// Cost per check of RedisLimiter beside floors measured in the same run against the same redis-server
// (started here on a free loopback port): raw hiredis EVALSHA of the same script, synchronous and
// pipelined 16 deep, and raw INCR. Read the results as ratios (bench/summarize.py).
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <ratelimit/redis.hpp>

#include "bench_redis_server.hpp"

using namespace std::chrono_literals;

namespace {

using bench::server;
using bench::skip_without_server;

const ratelimit::Gcra kPolicy{.limit = 1'000'000, .period = 1s, .burst = 1'000'000};

ratelimit::redis::RedisOptions options(int pool_size) {
  ratelimit::redis::RedisOptions o = server()->options();
  o.pool_size = static_cast<std::size_t>(pool_size);
  o.command_timeout = 2s;
  o.key_prefix = "bench:";
  return o;
}

/// A plain hiredis context: the floor has none of the library's code.
struct RawConnection {
  std::unique_ptr<redisContext, decltype(&redisFree)> context{redisConnect("127.0.0.1", server()->port()), &redisFree};
  std::string sha1;

  RawConnection() {
    const auto& script = ratelimit::redis::detail::script_for(ratelimit::Gcra::kind);
    auto* reply = static_cast<redisReply*>(redisCommand(context.get(), "SCRIPT LOAD %b", script.body.data(), script.body.size()));
    sha1.assign(reply->str, reply->len);
    freeReplyObject(reply);
  }
};

// The same command RedisLimiter sends: EVALSHA sha 1 key "" cost mode B T (server time).
std::vector<std::string> gcra_args(const std::string& sha1, const std::string& key) {
  const auto rules = kPolicy.rules(1000);
  return {"EVALSHA", sha1, "1", key, "", "1", "0", std::to_string(rules.limit()),
          std::to_string(rules.emission_interval())};
}

void send(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lengths.data());
}

void receive(redisContext* c) {
  void* reply = nullptr;
  if (redisGetReply(c, &reply) != REDIS_OK) std::abort();
  freeReplyObject(reply);
}

void floor_incr(benchmark::State& state) {
  if (skip_without_server(state)) return;
  RawConnection raw;
  const std::vector<std::string> args{"INCR", "bench:incr"};
  for (auto _ : state) {
    send(raw.context.get(), args);
    receive(raw.context.get());
  }
  state.SetItemsProcessed(state.iterations());
}

void floor_evalsha(benchmark::State& state) {
  if (skip_without_server(state)) return;
  RawConnection raw;
  const auto args = gcra_args(raw.sha1, "bench:gcra{raw}:state");
  for (auto _ : state) {
    send(raw.context.get(), args);
    receive(raw.context.get());
  }
  state.SetItemsProcessed(state.iterations());
}

void floor_evalsha_pipelined(benchmark::State& state) {
  if (skip_without_server(state)) return;
  RawConnection raw;
  const auto depth = state.range(0);
  const auto args = gcra_args(raw.sha1, "bench:gcra{raw}:state");
  for (auto _ : state) {
    for (std::int64_t i = 0; i < depth; ++i) send(raw.context.get(), args);
    for (std::int64_t i = 0; i < depth; ++i) receive(raw.context.get());
  }
  state.SetItemsProcessed(state.iterations() * depth);
}

void limiter_allow(benchmark::State& state) {
  if (skip_without_server(state)) return;
  static std::unique_ptr<ratelimit::redis::RedisLimiter<ratelimit::Gcra>> limiter;
  if (state.thread_index() == 0) {
    limiter = std::make_unique<ratelimit::redis::RedisLimiter<ratelimit::Gcra>>(kPolicy, options(state.threads()));
    limiter->allow("warm-up");
  }
  const std::string key = "client-" + std::to_string(state.thread_index());
  for (auto _ : state) benchmark::DoNotOptimize(limiter->allow(key));
  state.SetItemsProcessed(state.iterations());
  if (limiter->stats().failures != 0) state.SkipWithError("backend failures");
}

void limiter_allow_many(benchmark::State& state) {
  if (skip_without_server(state)) return;
  ratelimit::redis::RedisLimiter<ratelimit::Gcra> limiter(kPolicy, options(1));
  std::vector<std::string> keys;
  for (std::int64_t i = 0; i < state.range(0); ++i) keys.push_back("client-" + std::to_string(i));
  std::vector<ratelimit::redis::Request> batch;
  for (const auto& k : keys) batch.push_back({k, 1});
  for (auto _ : state) benchmark::DoNotOptimize(limiter.allow_many(batch));
  state.SetItemsProcessed(state.iterations() * state.range(0));
  if (limiter.stats().failures != 0) state.SkipWithError("backend failures");
}

}  // namespace

BENCHMARK(floor_incr)->Name("redis_floor/incr")->UseRealTime();
BENCHMARK(floor_evalsha)->Name("redis_floor/evalsha_sync")->UseRealTime();
BENCHMARK(floor_evalsha_pipelined)->Name("redis_floor/evalsha_pipelined")->Arg(16)->Arg(64)->UseRealTime();
BENCHMARK(limiter_allow)->Name("redis/gcra/allow")->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(limiter_allow_many)->Name("redis/gcra/allow_many")->Arg(16)->Arg(64)->UseRealTime();

BENCHMARK_MAIN();
