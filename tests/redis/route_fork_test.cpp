// A Sentinel or Cluster route made before fork() and used in the child throws std::logic_error touching
// nothing (include/ratelimit/redis/README.md "Redis engine", fork): no sentinel asked, no slot map loaded, no
// connection opened. The servers count the connections they accepted (INFO stats), read by the parent before the fork
// and after the child exited.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ratelimit/redis.hpp>

#include "cluster_support.hpp"
#include "sentinel_support.hpp"
#include "test_support.hpp"

// Named inside the anonymous namespace: a unity build puts several test files in one unit.
namespace {
namespace route_fork {

using ratelimit::redis::Route;
using ratelimit::redis::engine::PipelineOp;
using ratelimit::redis::engine::Reply;
using ratelimit::redis::engine::RouteCall;

/// Connections the server on `port` accepted so far (its own admin connection included).
std::int64_t accepted(int port) {
  ratelimit::redis::ConnectionOptions o;
  o.port = port;
  o.command_timeout = std::chrono::seconds(5);
  auto c = ratelimit::redis::engine::Connection::open(o);
  const std::string info(ratelimit::redis::engine::text(*c.command({"INFO", "stats"})));
  const auto at = info.find("total_connections_received:");
  return at == std::string::npos ? -1 : std::stoll(info.substr(at + 27));
}

/// Connections accepted by all of `ports` so far, less those of earlier readings (one per port each).
class Accepted {
 public:
  explicit Accepted(std::vector<int> ports) : ports_(std::move(ports)), start_(total()) {}
  /// Connections accepted since construction, not counting the readings'.
  [[nodiscard]] std::int64_t since() {
    return total() - start_ - ++readings_ * static_cast<std::int64_t>(ports_.size());
  }

 private:
  std::int64_t total() const {
    std::int64_t n = 0;
    for (const int p : ports_) n += accepted(p);
    return n;
  }
  std::vector<int> ports_;
  std::int64_t start_;
  std::int64_t readings_ = 0;
};

/// In a child: a sync call and an async call on `route` must each throw std::logic_error. Returns the
/// child's exit code (0: both threw).
int use_in_child(Route& route) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int code = 0;
    try {
      RouteCall c;
      c.args = {"PING"};
      route.execute(std::span<RouteCall>(&c, 1));
      code = 1;
    } catch (const std::logic_error&) {
    } catch (...) {
      code = 2;
    }
    struct Op final : PipelineOp {
      void complete(Reply, std::optional<ratelimit::BackendError>) noexcept override {}
    } op;
    op.command = "*1\r\n$4\r\nPING\r\n";
    op.args = {"PING"};
    op.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    try {
      route.submit(op);
      code = 3;
    } catch (const std::logic_error&) {
    } catch (...) {
      code = 4;
    }
    ::_exit(code);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -2;
  return WEXITSTATUS(status);
}

TEST(RouteFork, SentinelRouteTouchesNothingInAChild) {
  RATELIMIT_REQUIRE_REDIS();
  ratelimit_test::RedisServer master(ratelimit_test::redis_server_binary());
  ratelimit_test::SentinelProcess sentinel(ratelimit_test::redis_server_binary(), master.port());
  const auto o = ratelimit_test::sentinel_options({sentinel.port()}, "mymaster", {});
  auto route = ratelimit::redis::make_route(o.connection());
  Accepted accepted({sentinel.port(), master.port()});
  EXPECT_EQ(use_in_child(*route), 0);
  EXPECT_EQ(accepted.since(), 0) << "the child connected to the sentinel or the master";
}

TEST(ClusterRouteFork, TouchesNothingInAChild) {
  RATELIMIT_REQUIRE_CLUSTER();
  auto route = ratelimit::redis::make_route(ratelimit_test::shared_cluster()->options().connection());
  std::vector<int> ports;
  for (const auto& s : ratelimit_test::shared_cluster()->servers()) ports.push_back(s->port());
  Accepted accepted(ports);
  EXPECT_EQ(use_in_child(*route), 0);
  EXPECT_EQ(accepted.since(), 0) << "the child connected to a cluster node";
}

}  // namespace route_fork
}  // namespace
