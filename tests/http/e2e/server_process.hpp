#pragma once

// Starts examples/http_server on a free loopback port (--port 0; the server prints the port it got)
// and stops it (SIGTERM, then waitpid) when the object goes away; and the client helpers the e2e tests share.

#include <csignal>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

class ServerProcess {
 public:
  explicit ServerProcess(std::vector<std::string> args) {
    args.insert(args.begin(), {RATELIMIT_HTTP_SERVER, "--port", "0", "--host", "127.0.0.1"});
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    FILE* stream = fdopen(out[0], "r");
    char line[256] = {};
    const bool got = std::fgets(line, sizeof line, stream) != nullptr;
    std::fclose(stream);
    int p = 0;
    if (!got || std::sscanf(line, "listening on 127.0.0.1:%d", &p) != 1 || p <= 0) {
      stop();
      throw std::runtime_error(std::string("server did not start: ") + line);
    }
    port_ = p;
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;
  ~ServerProcess() { stop(); }

  [[nodiscard]] int port() const { return port_; }
  /// The server's process id (for signals such as SIGHUP).
  [[nodiscard]] pid_t pid() const { return pid_; }

  /// Stops the server; returns its exit status (0 when it shut down cleanly on SIGTERM).
  int stop() {
    if (pid_ <= 0) return status_;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int status_ = -1;
};

/// The value of response header `name`, or "<absent>".
inline std::string header(const httplib::Result& r, const char* name) {
  return r->has_header(name) ? r->get_header_value(name) : "<absent>";
}

/// Moves the server's manual clock (`--manual-clock`) forward by `ms` milliseconds.
inline void advance(httplib::Client& c, long ms) {
  const auto r = c.Post(("/__test/advance?ms=" + std::to_string(ms)).c_str());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
}
