#pragma once

// A throwaway Redis Cluster for tests: N masters with R replicas each, every node a RedisServer on
// 127.0.0.1 and a free port, no persistence, cluster config files in a private temporary directory.
// Formed with `redis-cli --cluster create`; ready once every node reports cluster_state:ok, agrees on
// the slot map, and every replica's link to its master is up. The destructor stops every node and
// removes the directory (also when a test fails).

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "redis_server.hpp"

namespace ratelimit_test {

/// The redis-cli binary: $RATELIMIT_REDIS_CLI, else the first `redis-cli` on $PATH.
inline std::optional<std::string> find_redis_cli() { return find_program("redis-cli", "RATELIMIT_REDIS_CLI"); }

/// One line of CLUSTER NODES.
struct ClusterNodeInfo {
  std::string id;
  int port = 0;
  bool master = false;
  bool failed = false;    // "fail" or "fail?" flag
  std::string master_id;  // of a replica
  int slot_count = 0;     // of a master
};

/// True when nothing listens on 127.0.0.1:`port` right now.
inline bool port_is_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

/// A free port for a cluster node: its cluster bus listens on port + 10000, so both must be free and
/// the port at most 55535.
inline int free_cluster_port() {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = free_port();
    if (port <= 55535 && port_is_free(port + 10000)) return port;
  }
  throw std::runtime_error("cannot find a free port p <= 55535 with p + 10000 free");
}

class RedisCluster {
 public:
  /// Starts and forms the cluster; throws `std::runtime_error` (with redis-cli's output) if it does not
  /// become ready within 30 s. `node_timeout_ms` is cluster-node-timeout (how soon a dead master fails over).
  /// `node_args(port)`: more arguments for the node on `port` (e.g. its TLS port), or none.
  RedisCluster(const std::string& server_binary, std::string cli_binary, int masters = 3, int replicas = 1,
               int node_timeout_ms = 1000, const std::function<std::vector<std::string>(int)>& node_args = {})
      : cli_(std::move(cli_binary)), replicas_(replicas) {
    char pattern[] = "/tmp/rltest-cluster-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
    try {
      const int total = masters * (1 + replicas);
      for (int i = 0; i < total; ++i) {
        const int port = free_cluster_port();
        std::vector<std::string> args{"--dir", dir_, "--cluster-enabled", "yes", "--cluster-config-file",
                                      dir_ + "/nodes-" + std::to_string(port) + ".conf", "--cluster-node-timeout",
                                      std::to_string(node_timeout_ms), "--cluster-replica-validity-factor", "0",
                                      // replicas sync at once (the default waits 5 s for more replicas)
                                      "--repl-diskless-sync-delay", "0"};
        if (node_args) {
          const std::vector<std::string> more = node_args(port);
          args.insert(args.end(), more.begin(), more.end());
        }
        servers_.push_back(std::make_unique<RedisServer>(server_binary, port, true, std::move(args)));
      }
      std::string cmd = cli_ + " --cluster create";
      for (const auto& s : servers_) cmd += " 127.0.0.1:" + std::to_string(s->port());
      cmd += " --cluster-replicas " + std::to_string(replicas) + " --cluster-yes 2>&1";
      const std::string out = run(cmd);
      wait_ready(std::chrono::seconds(30), out);
    } catch (...) {
      cleanup();
      throw;
    }
  }
  ~RedisCluster() { cleanup(); }
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  /// Every node as a seed (a client needs only one that answers; all make the tests robust to kills).
  [[nodiscard]] std::vector<ratelimit::redis::ClusterNode> seeds() const {
    std::vector<ratelimit::redis::ClusterNode> out;
    for (const auto& s : servers_) out.push_back({"127.0.0.1", s->port()});
    return out;
  }

  /// `o` pointed at this cluster.
  [[nodiscard]] ratelimit::redis::RedisOptions options(ratelimit::redis::RedisOptions o = {}) const {
    o.cluster_nodes = seeds();
    return o;
  }

  /// An administrative connection to the node on `port`.
  [[nodiscard]] static ratelimit::redis::engine::Connection admin(int port) {
    ratelimit::redis::RedisOptions o;
    o.host = "127.0.0.1";
    o.port = port;
    o.command_timeout = std::chrono::milliseconds(5000);
    return ratelimit::redis::engine::Connection::open(o);
  }

  /// CLUSTER NODES as seen by the node on `port`.
  [[nodiscard]] static std::vector<ClusterNodeInfo> nodes(int port) {
    auto c = admin(port);
    const auto r = c.command({"CLUSTER", "NODES"});
    std::vector<ClusterNodeInfo> out;
    std::istringstream lines{std::string(ratelimit::redis::engine::text(*r))};
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream f(line);
      std::string id, addr, flags, master, ping, pong, epoch, link;
      if (!(f >> id >> addr >> flags >> master >> ping >> pong >> epoch >> link)) continue;
      ClusterNodeInfo n;
      n.id = id;
      n.port = std::stoi(addr.substr(addr.rfind(':') + 1, addr.find('@') - addr.rfind(':') - 1));
      n.master = flags.find("master") != std::string::npos;
      n.failed = flags.find("fail") != std::string::npos;
      n.master_id = master == "-" ? "" : master;
      std::string range;
      while (f >> range) {
        if (range.front() == '[') continue;  // a migrating/importing marker
        const auto dash = range.find('-');
        n.slot_count +=
            dash == std::string::npos ? 1 : std::stoi(range.substr(dash + 1)) - std::stoi(range.substr(0, dash)) + 1;
      }
      out.push_back(n);
    }
    return out;
  }

  /// Ports of the masters that serve slots (as the first live node sees it).
  [[nodiscard]] std::vector<int> master_ports() const {
    std::vector<int> out;
    for (const ClusterNodeInfo& n : nodes(any_live_port())) {
      if (n.master && !n.failed && n.slot_count > 0) out.push_back(n.port);
    }
    return out;
  }

  /// The node id of the node on `port`.
  [[nodiscard]] static std::string id_of(int port) {
    auto c = admin(port);
    return std::string(ratelimit::redis::engine::text(*c.command({"CLUSTER", "MYID"})));
  }

  /// The server on `port` (to kill it).
  [[nodiscard]] RedisServer& server(int port) {
    for (auto& s : servers_) {
      if (s->port() == port) return *s;
    }
    throw std::runtime_error("no cluster node on port " + std::to_string(port));
  }

  /// Every node's server (masters and replicas).
  [[nodiscard]] const std::vector<std::unique_ptr<RedisServer>>& servers() const noexcept { return servers_; }

  [[nodiscard]] int any_live_port() const {
    for (const auto& s : servers_) {
      if (s->running()) return s->port();
    }
    throw std::runtime_error("no cluster node is running");
  }

  /// Polls until every running node reports cluster_state:ok and the same owner for every slot range,
  /// and every replica's link is up (and, with `all_replicas`, every master serving slots has all its
  /// replicas: not so after a failover); throws after `timeout`.
  void wait_ready(std::chrono::milliseconds timeout, const std::string& context = {}, bool all_replicas = true) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string why;
    while (std::chrono::steady_clock::now() < deadline) {
      why = not_ready(all_replicas);
      if (why.empty()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error("Redis Cluster not ready: " + why + (context.empty() ? "" : "\n" + context));
  }

 private:
  static std::string run(const std::string& cmd) {
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) throw std::runtime_error("cannot run " + cmd);
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    const int status = ::pclose(p);
    if (status != 0) throw std::runtime_error(cmd + " failed:\n" + out);
    return out;
  }

  /// Empty when ready, else the first reason it is not.
  std::string not_ready(bool all_replicas) const {
    std::string slots_seen;
    for (const auto& s : servers_) {
      if (!s->running()) continue;
      try {
        auto c = admin(s->port());
        const auto info = c.command({"CLUSTER", "INFO"});
        if (ratelimit::redis::engine::text(*info).find("cluster_state:ok") == std::string_view::npos) {
          return std::to_string(s->port()) + " not cluster_state:ok";
        }
        const auto repl = c.command({"INFO", "replication"});
        const std::string_view r = ratelimit::redis::engine::text(*repl);
        if (r.find("role:slave") != std::string_view::npos &&
            r.find("master_link_status:up") == std::string_view::npos) {
          return std::to_string(s->port()) + " replica link not up";
        }
        // A master serving slots has all its replicas attached (CLUSTER REPLICATE may still be on its way).
        if (all_replicas && r.find("role:master") != std::string_view::npos && serves_slots(c)) {
          const auto at = r.find("connected_slaves:");
          const int attached = at == std::string_view::npos ? 0 : std::atoi(std::string(r.substr(at + 17, 4)).c_str());
          if (attached < replicas_)
            return std::to_string(s->port()) + " has " + std::to_string(attached) + " replicas attached";
        }
        // Masters and their slot ranges, sorted by the node (a node's view must match the others').
        std::map<long long, long long> view;  // first slot -> master port
        const auto slots = c.command({"CLUSTER", "SLOTS"});
        for (std::size_t i = 0; i < slots->elements; ++i) {
          view[slots->element[i]->element[0]->integer] = slots->element[i]->element[2]->element[1]->integer;
        }
        std::string text;
        for (const auto& [first, port] : view) text += std::to_string(first) + ":" + std::to_string(port) + ",";
        if (view.empty()) return std::to_string(s->port()) + " serves no slots yet";
        if (slots_seen.empty()) {
          slots_seen = text;
        } else if (text != slots_seen) {
          return "nodes disagree on the slot map";
        }
      } catch (const ratelimit::BackendError& e) {
        return std::to_string(s->port()) + ": " + e.what();
      }
    }
    return {};
  }

  /// True when the node behind `c` owns at least one slot (CLUSTER NODES, its "myself" line).
  static bool serves_slots(ratelimit::redis::engine::Connection& c) {
    const auto r = c.command({"CLUSTER", "NODES"});
    std::istringstream lines{std::string(ratelimit::redis::engine::text(*r))};
    std::string line;
    while (std::getline(lines, line)) {
      if (line.find("myself") == std::string::npos) continue;
      std::istringstream f(line);
      std::string field;
      int n = 0;
      while (f >> field) ++n;
      return n > 8;  // slot ranges follow the 8 fixed fields
    }
    return false;
  }

  void cleanup() noexcept {
    servers_.clear();  // each destructor stops its server
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  std::string cli_;
  int replicas_;
  std::string dir_;
  std::vector<std::unique_ptr<RedisServer>> servers_;
};

}  // namespace ratelimit_test
