#pragma once

// Redis Sentinel for tests: sentinels (`redis-server <conf> --sentinel`) on free loopback ports, each
// monitoring a master under a name with short timeouts, their config files (which sentinels rewrite) in
// a temporary directory removed afterwards.

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "redis_server.hpp"

namespace ratelimit_test {

/// One sentinel monitoring 127.0.0.1:`master_port` as `name`; stopped and cleaned up by the destructor.
class SentinelProcess {
 public:
  /// `quorum`: sentinels that must agree the master is down; `down_after`: how long it must not answer
  /// (the sentinels' `down-after-milliseconds`); the failover timeout is four times that, at least 1 s.
  SentinelProcess(const std::string& binary, int master_port, const std::string& name = "mymaster", int quorum = 1,
                  std::chrono::milliseconds down_after = std::chrono::milliseconds(500))
      : dir_(make_dir()), server_(binary, 0, false, {"--sentinel"}) {
    const std::string conf = dir_ + "/sentinel.conf";
    std::ofstream out(conf);
    const long long ms = down_after.count();
    out << "sentinel monitor " << name << " 127.0.0.1 " << master_port << " " << quorum << "\n"
        << "sentinel down-after-milliseconds " << name << " " << ms << "\n"
        << "sentinel failover-timeout " << name << " " << (4 * ms > 1000 ? 4 * ms : 1000) << "\n"
        << "sentinel parallel-syncs " << name << " 1\n";
    out.close();
    server_.use_config_file(conf);
    server_.start();
  }
  ~SentinelProcess() {
    server_.stop();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  SentinelProcess(const SentinelProcess&) = delete;
  SentinelProcess& operator=(const SentinelProcess&) = delete;

  [[nodiscard]] int port() const noexcept { return server_.port(); }
  [[nodiscard]] RedisServer& server() noexcept { return server_; }

 private:
  static std::string make_dir() {
    char pattern[] = "/tmp/rlsentinel.XXXXXX";
    const char* d = ::mkdtemp(pattern);
    if (d == nullptr) throw std::runtime_error("mkdtemp failed");
    return d;
  }
  std::string dir_;
  RedisServer server_;
};

/// Polls `done` every 20 ms until it holds or `limit` passes; false on timeout (waits for real servers).
template <class F>
bool wait_for(F done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

/// Options of a limiter on the master that the sentinels on `ports` name `name`: client time, raising
/// errors, a fresh key prefix (as `client_options`).
inline ratelimit::redis::RedisOptions sentinel_options(const std::vector<int>& ports, const std::string& name,
                                                       ratelimit::redis::RedisOptions o) {
  o.sentinel.master_name = name;
  o.sentinel.nodes.clear();
  for (const int p : ports) o.sentinel.nodes.push_back({"127.0.0.1", p});
  return o;
}

}  // namespace ratelimit_test
