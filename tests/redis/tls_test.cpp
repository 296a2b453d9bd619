// TLS (README "TLS"): checks over TLS decide as over TCP (single, batch, async, layered through the
// engine's pipeline), and each verification failure (wrong CA, expired certificate, wrong host name, a
// missing client certificate, a plain server) fails the connection with a clear error and the failure
// policy. Certificates are made at test time with the `openssl` command; the server is Debian's
// redis-server with its `--tls-port`.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ratelimit/redis.hpp>

#include "test_support.hpp"
#include "tls_support.hpp"

namespace {

using ratelimit::BackendError;
using ratelimit::Decision;
using ratelimit::FixedWindow;
using ratelimit::ManualClock;
using ratelimit::Outcome;
using ratelimit::redis::RedisLimiter;
using namespace std::chrono_literals;

class Tls : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!ratelimit::redis::kTlsAvailable) return;
    if (ratelimit_test::shared_redis() == nullptr || !ratelimit_test::have_openssl_command()) return;
    files_ = new ratelimit_test::TlsFiles();
    server_ = new ratelimit_test::TlsRedisServer(ratelimit_test::redis_server_binary(), *files_);
  }
  static void TearDownTestSuite() {
    delete server_;
    delete files_;
    server_ = nullptr;
    files_ = nullptr;
  }
  void SetUp() override {
    if (!ratelimit::redis::kTlsAvailable) {
      if (std::getenv("CI") != nullptr) FAIL() << "CI builds must have TLS (OpenSSL: libssl-dev)";
      GTEST_SKIP() << "built without OpenSSL";
    }
    RATELIMIT_REQUIRE_REDIS();
    if (!ratelimit_test::have_openssl_command()) {
      if (std::getenv("CI") != nullptr) FAIL() << "CI needs the openssl command";
      GTEST_SKIP() << "no openssl command";
    }
    ASSERT_NE(server_, nullptr);
  }
  static ratelimit::redis::RedisOptions options(ratelimit::FailurePolicy on_error = ratelimit::FailurePolicy::raise) {
    return ratelimit_test::tls_options(ratelimit_test::client_options(server_->server(), on_error), *server_, *files_);
  }
  // What the first check of a limiter with `o` throws (it must throw, with `cause`).
  static std::string failure_of(const ratelimit::redis::RedisOptions& o,
                                ratelimit::BackendErrorCause cause = ratelimit::BackendErrorCause::io) {
    ManualClock clock;
    RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 3, .window = 1h}, o, clock);
    try {
      (void)l.allow("k");
    } catch (const BackendError& e) {
      EXPECT_EQ(e.cause(), cause) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "the check succeeded";
    return {};
  }
  static ratelimit_test::TlsFiles* files_;
  static ratelimit_test::TlsRedisServer* server_;
};
ratelimit_test::TlsFiles* Tls::files_ = nullptr;
ratelimit_test::TlsRedisServer* Tls::server_ = nullptr;

TEST_F(Tls, ChecksOverTlsDecideAsOverTcp) {
  ManualClock clock;
  const auto tls = options();
  RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 5, .window = 1h}, tls, clock);
  auto plain_options = tls;
  plain_options.tls = {};
  plain_options.port = server_->server().port();
  RedisLimiter<FixedWindow, ManualClock> plain(FixedWindow{.limit = 5, .window = 1h}, plain_options, clock);
  EXPECT_EQ(l.allow("k").remaining, 4);
  EXPECT_EQ(plain.allow("k").remaining, 3);  // the same key on the same server, over TCP
  EXPECT_EQ(l.peek("k").remaining, 3);
  const std::vector<ratelimit::redis::Request> batch{{"a", 2}, {"b", 1}, {"a", 2}, {"k", 1}};
  const std::vector<Decision> d = l.allow_many(batch);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].remaining, 3);
  EXPECT_EQ(d[1].remaining, 4);
  EXPECT_EQ(d[2].remaining, 1);
  EXPECT_EQ(d[3].remaining, 2);
  std::promise<std::int64_t> remaining;
  l.allow_async("k", 1, 5s, [&](std::exception_ptr e, Decision x) { remaining.set_value(e ? -1 : x.remaining); });
  auto f = remaining.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), 1);
  EXPECT_EQ(l.stats().failures, 0u);
}

TEST_F(Tls, TheNameCheckedIsTheServerNameOrTheHost) {
  ManualClock clock;
  auto o = options();
  o.tls.server_name = "localhost";  // SNI and a DNS name of the certificate, on 127.0.0.1
  RedisLimiter<FixedWindow, ManualClock> by_name(FixedWindow{.limit = 5, .window = 1h}, o, clock);
  EXPECT_EQ(by_name.allow("k").remaining, 4);
  o.tls.server_name.clear();  // the host, 127.0.0.1: the certificate's IP name
  RedisLimiter<FixedWindow, ManualClock> by_ip(FixedWindow{.limit = 5, .window = 1h}, o, clock);
  EXPECT_EQ(by_ip.allow("k").remaining, 3);
}

TEST_F(Tls, AWrongCaFailsClearlyAndTheFailurePolicyAnswers) {
  auto o = options();
  o.tls.ca_file = files_->path("other_ca.crt");
  const std::string what = failure_of(o);
  EXPECT_NE(what.find("certificate verify failed"), std::string::npos) << what;
  // OpenSSL's reason depends on whether the server sends its CA along (redis-server does: it builds the chain).
  EXPECT_TRUE(what.find("self-signed certificate in certificate chain") != std::string::npos ||
              what.find("unable to get local issuer certificate") != std::string::npos)
      << what;
  auto closed = options(ratelimit::FailurePolicy::fail_closed);
  closed.tls.ca_file = files_->path("other_ca.crt");
  ManualClock clock;
  RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 3, .window = 1h}, closed, clock);
  const auto r = l.check("k");
  EXPECT_FALSE(r.decision.allowed);
  EXPECT_EQ(r.outcome, Outcome::failure_policy);
  EXPECT_EQ(l.stats().io_errors, 1u);
}

TEST_F(Tls, AnExpiredCertificateFailsClearly) {
  ratelimit_test::TlsRedisServer expired(ratelimit_test::redis_server_binary(), *files_, "expired.crt");
  const auto o = ratelimit_test::tls_options(ratelimit_test::client_options(expired.server()), expired, *files_);
  const std::string what = failure_of(o);
  EXPECT_NE(what.find("certificate has expired"), std::string::npos) << what;
}

TEST_F(Tls, AWrongHostNameFailsClearly) {
  auto o = options();
  o.tls.server_name = "redis.example.com";
  const std::string what = failure_of(o);
  EXPECT_NE(what.find("hostname mismatch"), std::string::npos) << what;
  EXPECT_NE(what.find("redis.example.com"), std::string::npos) << what;
}

TEST_F(Tls, AServerThatVerifiesClientsTakesTheClientCertificate) {
  ratelimit_test::TlsRedisServer strict(ratelimit_test::redis_server_binary(), *files_, "server.crt", true);
  auto o = ratelimit_test::tls_options(ratelimit_test::client_options(strict.server()), strict, *files_);
  (void)failure_of(o);  // no client certificate: refused (in the handshake, or at the first read)
  o.tls.cert_file = files_->path("client.crt");
  o.tls.key_file = files_->path("client.key");
  ManualClock clock;
  RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 3, .window = 1h}, o, clock);
  EXPECT_EQ(l.allow("k").remaining, 2);
}

TEST_F(Tls, TlsToAPlainPortFailsClearly) {
  auto o = options();
  o.port = server_->server().port();
  o.connect_timeout = 200ms;  // a plain server waits for the rest of the "command" the ClientHello began
  const std::string what = failure_of(o, ratelimit::BackendErrorCause::timeout);
  EXPECT_NE(what.find("TLS to 127.0.0.1:" + std::to_string(o.port) + ": handshake timed out"), std::string::npos)
      << what;
}

TEST(TlsOptions, BadFieldsAreNamed) {
  ratelimit::redis::ConnectionOptions o;
  o.tls.enabled = true;
  o.tls.cert_file = "client.crt";  // without its key
  try {
    (void)ratelimit::redis::ConnectionPool(o);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(ratelimit::redis::kTlsAvailable ? "tls.key_file" : "tls"), std::string::npos)
        << e.what();
  }
}

}  // namespace
