#pragma once

// A throwaway redis-server for tests: 127.0.0.1 only, a free port, no persistence; stopped by the
// destructor. Also restarts (same port) and stops for fault tests.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
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
#include <vector>

#include <ratelimit/redis.hpp>

namespace ratelimit_test {

/// A program: $<env_var> when set, else the first `name` on $PATH.
inline std::optional<std::string> find_program(const char* name, const char* env_var) {
  if (const char* explicit_path = std::getenv(env_var); explicit_path && *explicit_path) {
    return std::string(explicit_path);
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

/// The redis-server binary: $RATELIMIT_REDIS_SERVER, else the first `redis-server` on $PATH.
inline std::optional<std::string> find_redis_server() { return find_program("redis-server", "RATELIMIT_REDIS_SERVER"); }

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
  /// Starts redis-server on a free port (or on `port` when given, e.g. to start late on a known port),
  /// with `extra_args` appended to the command line (later options win, e.g. `--dir`).
  explicit RedisServer(std::string binary, int port = 0, bool start_now = true,
                       std::vector<std::string> extra_args = {})
      : binary_(std::move(binary)), port_(port == 0 ? free_port() : port), extra_args_(std::move(extra_args)) {
    if (start_now) start();
  }
  ~RedisServer() { stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  [[nodiscard]] int port() const noexcept { return port_; }
  /// Starts the server with this configuration file (e.g. a sentinel's, which it rewrites) from the next
  /// `start` on.
  void use_config_file(std::string path) { config_file_ = std::move(path); }
  [[nodiscard]] bool running() const noexcept { return pid_ > 0; }
  /// The server's process id (-1 when not running), e.g. to read its CPU time.
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }

  void start() {
    if (pid_ > 0) return;
    const std::string port = std::to_string(port_);
    std::vector<std::string> args{"redis-server"};
    if (!config_file_.empty()) args.push_back(config_file_);  // a config file must come first
    args.insert(args.end(), {"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", "/tmp",
                             "--enable-debug-command", "local"});
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      const int devnull = ::open("/dev/null", O_RDWR);
      if (devnull >= 0) {
        ::dup2(devnull, 1);
        ::dup2(devnull, 2);
      }
      // The server dies with the test process, even when that one crashes before its destructors run.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::execv(binary_.c_str(), argv.data());
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
        if (ratelimit::redis::engine::text(*r) == "PONG") return;
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

  /// Kills the server with SIGKILL (no shutdown, no goodbye to clients) and reaps it.
  void kill_hard() { kill_now(SIGKILL); }

  /// Kills the server with `signal` (e.g. SIGKILL, a crash) and reaps it; no-op when not running.
  void kill_now(int signal = SIGKILL) {
    if (pid_ <= 0) return;
    ::kill(pid_, signal);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  /// `connected_clients` of INFO clients, asked through `admin` (which counts itself).
  static long connected_clients(ratelimit::redis::engine::Connection& admin) {
    const auto r = admin.command({"INFO", "clients"});
    const std::string_view info = ratelimit::redis::engine::text(*r);
    const auto at = info.find("connected_clients:");
    if (at == std::string_view::npos) throw std::runtime_error("INFO clients: no connected_clients");
    return std::stol(std::string(info.substr(at + 18, 12)));
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
  [[nodiscard]] ratelimit::redis::engine::Connection admin() const {
    ratelimit::redis::RedisOptions o = options();
    o.command_timeout = std::chrono::milliseconds(5000);
    return ratelimit::redis::engine::Connection::open(o);
  }

 private:
  std::string binary_;
  int port_;
  std::vector<std::string> extra_args_;
  std::string config_file_;
  pid_t pid_ = -1;
};

/// The server shared by the tests of one process (started by the global environment), or null when the
/// environment skipped.
RedisServer* shared_redis();

/// The redis-server binary found by the environment.
const std::string& redis_server_binary();

}  // namespace ratelimit_test
