#pragma once

// TLS for tests: a CA, server certificates (valid for localhost and 127.0.0.1; one expired; one signed
// by another CA) and a client certificate, made with the `openssl` command in a temporary directory
// (removed afterwards), and a redis-server with a TLS port beside its plain one (for administration).

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ratelimit/redis.hpp>

#include "redis_server.hpp"

namespace ratelimit_test {

/// The certificates and keys, as files.
class TlsFiles {
 public:
  /// Makes them (EC P-256 keys: fast). Throws `std::runtime_error` when the `openssl` command fails.
  TlsFiles() : dir_(make_dir()) {
    const std::string d = dir_;
    write("ext.cnf", "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
    write("ca.cnf", "[ca]\ndefault_ca=ca_default\n[ca_default]\ndatabase=" + d + "/index.txt\nnew_certs_dir=" + d +
                        "\nserial=" + d +
                        "/serial\ndefault_md=sha256\npolicy=any\nunique_subject=no\n"
                        "[any]\ncommonName=supplied\n");
    write("index.txt", "");
    write("serial", "01\n");
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    run("openssl req -x509" + key + " -keyout ca.key -out ca.crt -days 3 -subj /CN=ratelimit-test-ca");
    run("openssl req -x509" + key + " -keyout other_ca.key -out other_ca.crt -days 3 -subj /CN=another-ca");
    run("openssl req" + key + " -keyout server.key -out server.csr -subj /CN=localhost");
    run("openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 3 "
        "-extfile ext.cnf");
    run("openssl x509 -req -in server.csr -CA other_ca.crt -CAkey other_ca.key -CAcreateserial -out other.crt "
        "-days 3 -extfile ext.cnf");
    run("openssl ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key -in server.csr -out expired.crt "
        "-startdate 20200101000000Z -enddate 20200102000000Z -extfile ext.cnf");
    run("openssl req" + key + " -keyout client.key -out client.csr -subj /CN=ratelimit-client");
    run("openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 3");
  }
  ~TlsFiles() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  TlsFiles(const TlsFiles&) = delete;
  TlsFiles& operator=(const TlsFiles&) = delete;

  /// `name` in the directory (ca.crt, server.crt, server.key, other_ca.crt, other.crt, expired.crt,
  /// client.crt, client.key).
  [[nodiscard]] std::string path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  static std::string make_dir() {
    char pattern[] = "/tmp/rltls.XXXXXX";
    const char* d = ::mkdtemp(pattern);
    if (d == nullptr) throw std::runtime_error("mkdtemp failed");
    return d;
  }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path(name)) << text; }
  void run(const std::string& command) const {
    const std::string full = "cd '" + dir_ + "' && " + command + " >/dev/null 2>&1";
    if (std::system(full.c_str()) != 0) throw std::runtime_error("failed: " + command);
  }
  std::string dir_;
};

/// Whether an `openssl` command is on PATH.
inline bool have_openssl_command() { return find_program("openssl", "RATELIMIT_OPENSSL").has_value(); }

/// A redis-server with TLS on `tls_port()` (certificate `cert` of `files`, clients verified when
/// `verify_clients`) and plain TCP on `port()`.
class TlsRedisServer {
 public:
  TlsRedisServer(const std::string& binary, const TlsFiles& files, const std::string& cert = "server.crt",
                 bool verify_clients = false)
      : tls_port_(free_port()),
        server_(binary, 0, true,
                {"--tls-port", std::to_string(tls_port_), "--tls-cert-file", files.path(cert), "--tls-key-file",
                 files.path("server.key"), "--tls-ca-cert-file", files.path("ca.crt"), "--tls-auth-clients",
                 verify_clients ? "yes" : "no"}) {}
  [[nodiscard]] int tls_port() const noexcept { return tls_port_; }
  [[nodiscard]] RedisServer& server() noexcept { return server_; }

 private:
  int tls_port_;
  RedisServer server_;
};

/// Options for TLS to `server` trusting `files`' CA, as `client_options` otherwise.
inline ratelimit::redis::RedisOptions tls_options(ratelimit::redis::RedisOptions o, const TlsRedisServer& server,
                                                  const TlsFiles& files) {
  o.port = server.tls_port();
  o.tls.enabled = true;
  o.tls.ca_file = files.path("ca.crt");
  o.connect_timeout = std::chrono::milliseconds(5000);
  return o;
}

/// Certificates and a TLS redis-server shared by one test suite: `start()` (in SetUpTestSuite) makes them when
/// this build has TLS, the shared redis-server runs and the `openssl` command is there;
/// `RATELIMIT_REQUIRE_TLS(suite_server)` in SetUp skips the test otherwise (fails it under CI).
struct TlsSuiteServer {
  std::unique_ptr<TlsFiles> files;
  std::unique_ptr<TlsRedisServer> server;
  void start() {
    if (!ratelimit::redis::kTlsAvailable || shared_redis() == nullptr || !have_openssl_command()) return;
    files = std::make_unique<TlsFiles>();
    server = std::make_unique<TlsRedisServer>(redis_server_binary(), *files);
  }
  void stop() {
    server.reset();
    files.reset();
  }
};

}  // namespace ratelimit_test

// Needs test_support.hpp (RATELIMIT_REQUIRE_REDIS) where it is used.
#define RATELIMIT_REQUIRE_TLS(suite_server)                                                        \
  do {                                                                                             \
    if (!ratelimit::redis::kTlsAvailable) {                                                        \
      if (std::getenv("CI") != nullptr) FAIL() << "CI builds must have TLS (OpenSSL: libssl-dev)"; \
      GTEST_SKIP() << "built without OpenSSL";                                                     \
    }                                                                                              \
    RATELIMIT_REQUIRE_REDIS();                                                                     \
    if (!::ratelimit_test::have_openssl_command()) {                                               \
      if (std::getenv("CI") != nullptr) FAIL() << "CI needs the openssl command";                  \
      GTEST_SKIP() << "no openssl command";                                                        \
    }                                                                                              \
    ASSERT_NE((suite_server).server, nullptr);                                                     \
  } while (0)
