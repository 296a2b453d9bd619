// The benchmarks' redis-server: started once per program on a free loopback port, stopped at exit.
#pragma once

#include <benchmark/benchmark.h>

#include <memory>

#include "../tests/redis/redis_server.hpp"

namespace bench {

/// The program's server, or null when redis-server is not on PATH.
inline ratelimit_test::RedisServer* server() {
  static std::unique_ptr<ratelimit_test::RedisServer> instance = [] {
    const auto binary = ratelimit_test::find_redis_server();
    return binary ? std::make_unique<ratelimit_test::RedisServer>(*binary) : nullptr;
  }();
  return instance.get();
}

/// True (and the benchmark marked skipped) when there is no server.
inline bool skip_without_server(benchmark::State& state) {
  if (server() != nullptr) return false;
  state.SkipWithError("no redis-server on PATH");
  return true;
}

}  // namespace bench
