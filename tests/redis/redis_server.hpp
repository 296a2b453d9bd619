#pragma once

// A throwaway redis-server for tests: 127.0.0.1 only, a free port, no persistence; stopped by the
// destructor. Also restarts (same port) and stops for fault tests.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include <ratelimit/redis.hpp>

namespace ratelimit_test {

/// The redis-server binary: $RATELIMIT_REDIS_SERVER, else the first `redis-server` on $PATH.
inline std::optional<std::string> find_redis_server() {
  if (const char* explicit_path = std::getenv("RATELIMIT_REDIS_SERVER"); explicit_path && *explicit_path) {
    return std::string(explicit_path);
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/redis-server";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

/// A loopback port nobody listens on right now (the kernel picks it).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot find a free port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

class RedisServer {
 public:
  /// Starts redis-server on a free port (or on `port` when given, e.g. to start late on a known port).
  explicit RedisServer(std::string binary, int port = 0, bool start_now = true)
      : binary_(std::move(binary)), port_(port == 0 ? free_port() : port) {
    if (start_now) start();
  }
  ~RedisServer() { stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  [[nodiscard]] int port() const noexcept { return port_; }
  [[nodiscard]] bool running() const noexcept { return pid_ > 0; }

  void start() {
    if (pid_ > 0) return;
    const std::string port = std::to_string(port_);
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      const int devnull = ::open("/dev/null", O_RDWR);
      if (devnull >= 0) {
        ::dup2(devnull, 1);
        ::dup2(devnull, 2);
      }
      ::execl(binary_.c_str(), "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "",
              "--appendonly", "no", "--dir", "/tmp", "--enable-debug-command", "local", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    pid_ = pid;
    // Poll until it answers PING (the only wait in these tests).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("redis-server exited at start (port " + port + " taken?)");
      }
      try {
        auto c = admin();
        const auto r = c.command({"PING"});
        if (ratelimit::redis::text(*r) == "PONG") return;
      } catch (const ratelimit::BackendError&) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    stop();
    throw std::runtime_error("redis-server did not answer PING within 10 s");
  }

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
  }

  void restart() {
    stop();
    start();
  }

  /// Options reaching this server; the rest as given.
  [[nodiscard]] ratelimit::redis::RedisOptions options(ratelimit::redis::RedisOptions o = {}) const {
    o.host = "127.0.0.1";
    o.port = port_;
    return o;
  }

  /// A fresh connection for administrative commands (SCRIPT FLUSH, CLIENT PAUSE, SCAN, PTTL...).
  [[nodiscard]] ratelimit::redis::Connection admin() const {
    ratelimit::redis::RedisOptions o = options();
    o.command_timeout = std::chrono::milliseconds(5000);
    return ratelimit::redis::Connection::open(o);
  }

 private:
  std::string binary_;
  int port_;
  pid_t pid_ = -1;
};

/// The server shared by the tests of one process (started by the global environment), or null when the
/// environment skipped.
RedisServer* shared_redis();

/// The redis-server binary found by the environment.
const std::string& redis_server_binary();

}  // namespace ratelimit_test
