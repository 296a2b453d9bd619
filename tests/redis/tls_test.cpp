// TLS (include/ratelimit/redis/README.md "TLS"): checks over TLS decide as over TCP (single, batch, async, layered
// through the engine's pipeline), and each verification failure (wrong CA, expired certificate, wrong host name, a
// missing client certificate, a plain server) fails the connection with a clear error and the failure policy.
// Certificates are made at test time with the `openssl` command; the server is Debian's redis-server with its
// `--tls-port`.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <ratelimit/redis.hpp>

#include "redis_cluster.hpp"
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
    suite_.start();
    files_ = suite_.files.get();
    server_ = suite_.server.get();
  }
  static void TearDownTestSuite() {
    suite_.stop();
    server_ = nullptr;
    files_ = nullptr;
  }
  void SetUp() override { RATELIMIT_REQUIRE_TLS(suite_); }
  static ratelimit::redis::RedisOptions options(ratelimit::FailurePolicy on_error = ratelimit::FailurePolicy::raise) {
    return ratelimit_test::tls_options(ratelimit_test::client_options(server_->server(), on_error), *server_, *files_);
  }
  // What the first check of a limiter with `o` (on_error raise) throws: it must throw, with `cause`. The
  // same options with fail_open and fail_closed must answer with the failure policy, counting the cause.
  static std::string failure_of(ratelimit::redis::RedisOptions o,
                                ratelimit::BackendErrorCause cause = ratelimit::BackendErrorCause::io) {
    ManualClock clock;
    std::string what;
    {
      RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 3, .window = 1h}, o, clock);
      try {
        (void)l.allow("k");
        ADD_FAILURE() << "the check succeeded";
      } catch (const BackendError& e) {
        EXPECT_EQ(e.cause(), cause) << e.what();
        what = e.what();
      }
    }
    for (const auto policy : {ratelimit::FailurePolicy::fail_open, ratelimit::FailurePolicy::fail_closed}) {
      o.on_error = policy;
      RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 3, .window = 1h}, o, clock);
      const auto r = l.check("k");
      EXPECT_EQ(r.outcome, Outcome::failure_policy) << what;
      EXPECT_EQ(r.decision.allowed, policy == ratelimit::FailurePolicy::fail_open) << what;
      const auto st = l.stats();
      EXPECT_EQ(cause == ratelimit::BackendErrorCause::io ? st.io_errors : st.timeouts, 1u) << what;
    }
    return what;
  }
  static ratelimit_test::TlsSuiteServer suite_;
  static ratelimit_test::TlsFiles* files_;
  static ratelimit_test::TlsRedisServer* server_;
};
ratelimit_test::TlsSuiteServer Tls::suite_;
ratelimit_test::TlsFiles* Tls::files_ = nullptr;
ratelimit_test::TlsRedisServer* Tls::server_ = nullptr;

// One test per server set-up (each process makes its certificates): single, batch and async checks over
// TLS beside plain TCP on one server, the name checked (server_name, or the host's IP name), and a server
// that verifies clients.
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
  // Shared with the completion: it may run after a failed wait returned (the limiter's end completes it).
  auto remaining = std::make_shared<std::promise<std::int64_t>>();
  l.allow_async("k", 1, 5s,
                [remaining](std::exception_ptr e, Decision x) { remaining->set_value(e ? -1 : x.remaining); });
  auto f = remaining->get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), 1);
  EXPECT_EQ(l.stats().failures, 0u);

  auto o = options();
  o.tls.server_name = "localhost";  // SNI and a DNS name of the certificate, on 127.0.0.1
  RedisLimiter<FixedWindow, ManualClock> by_name(FixedWindow{.limit = 5, .window = 1h}, o, clock);
  EXPECT_EQ(by_name.allow("k").remaining, 4);
  o.tls.server_name.clear();  // the host, 127.0.0.1: the certificate's IP name
  RedisLimiter<FixedWindow, ManualClock> by_ip(FixedWindow{.limit = 5, .window = 1h}, o, clock);
  EXPECT_EQ(by_ip.allow("k").remaining, 3);

  ratelimit_test::TlsRedisServer strict(ratelimit_test::redis_server_binary(), *files_, "server.crt", true);
  auto c = ratelimit_test::tls_options(ratelimit_test::client_options(strict.server()), strict, *files_);
  (void)failure_of(c);  // no client certificate: refused (in the handshake, or at the first read)
  c.tls.cert_file = files_->path("client.crt");
  c.tls.key_file = files_->path("client.key");
  RedisLimiter<FixedWindow, ManualClock> with_cert(FixedWindow{.limit = 3, .window = 1h}, c, clock);
  EXPECT_EQ(with_cert.allow("k").remaining, 2);
}

// Each verification failure, and TLS to a plain port: a clear error with raise, the failure policy else.
TEST_F(Tls, EachVerificationFailureFailsClearlyWithTheFailurePolicy) {
  auto wrong_ca = options();
  wrong_ca.tls.ca_file = files_->path("other_ca.crt");
  std::string what = failure_of(wrong_ca);
  EXPECT_NE(what.find("certificate verify failed"), std::string::npos) << what;
  // OpenSSL's reason depends on whether the server sends its CA along (redis-server does: it builds the chain).
  EXPECT_TRUE(what.find("self-signed certificate in certificate chain") != std::string::npos ||
              what.find("unable to get local issuer certificate") != std::string::npos)
      << what;

  ratelimit_test::TlsRedisServer expired(ratelimit_test::redis_server_binary(), *files_, "expired.crt");
  what = failure_of(ratelimit_test::tls_options(ratelimit_test::client_options(expired.server()), expired, *files_));
  EXPECT_NE(what.find("certificate has expired"), std::string::npos) << what;

  auto wrong_name = options();
  wrong_name.tls.server_name = "redis.example.com";
  what = failure_of(wrong_name);
  EXPECT_NE(what.find("hostname mismatch"), std::string::npos) << what;
  EXPECT_NE(what.find("redis.example.com"), std::string::npos) << what;

  auto plain_port = options();
  plain_port.port = server_->server().port();
  plain_port.connect_timeout = 200ms;  // a plain server waits for the rest of the "command" the ClientHello began
  what = failure_of(plain_port, ratelimit::BackendErrorCause::timeout);
  EXPECT_NE(what.find("TLS to 127.0.0.1:" + std::to_string(plain_port.port) + ": handshake timed out"),
            std::string::npos)
      << what;
}

// Redis Cluster over TLS (3 masters, `tls-cluster yes`: the bus and CLUSTER SLOTS over TLS name the TLS
// ports): seeded with TLS ports only, checks reach every master over TLS, each node's name checked.
TEST_F(Tls, ClusterOverTlsReachesEveryMaster) {
  const auto cli = ratelimit_test::find_redis_cli();
  if (!cli) {
    if (std::getenv("CI") != nullptr) FAIL() << "CI needs redis-cli (redis-tools)";
    GTEST_SKIP() << "no redis-cli";
  }
  std::map<int, int> tls_port_of;  // plain port -> TLS port
  ratelimit_test::RedisCluster cluster(ratelimit_test::redis_server_binary(), *cli, 3, 0, 1000,
                                       [&](int port) -> std::vector<std::string> {
                                         const int tls = ratelimit_test::free_port();
                                         tls_port_of[port] = tls;
                                         // The bus stays on port + 10000 (with tls-cluster it would follow the TLS
                                         // port), over TLS.
                                         return {"--tls-port",         std::to_string(tls),
                                                 "--tls-cert-file",    files_->path("server.crt"),
                                                 "--tls-key-file",     files_->path("server.key"),
                                                 "--tls-ca-cert-file", files_->path("ca.crt"),
                                                 "--tls-auth-clients", "no",
                                                 "--tls-cluster",      "yes",
                                                 "--cluster-port",     std::to_string(port + 10000)};
                                       });
  auto o = options();  // TLS trusting the test CA; the host and port are replaced by the seeds
  for (const auto& [plain, tls] : tls_port_of) o.cluster_nodes.push_back({"127.0.0.1", tls});
  ManualClock clock;
  RedisLimiter<FixedWindow, ManualClock> l(FixedWindow{.limit = 2, .window = 1h}, o, clock);
  std::vector<std::string> names;
  for (int i = 0; i < 60; ++i) names.push_back("user" + std::to_string(i));
  std::vector<ratelimit::redis::Request> batch;  // a Request views its key
  for (const std::string& n : names) batch.push_back({n, 1});
  for (const Decision& d : l.allow_many(batch)) EXPECT_EQ(d.remaining, 1);
  EXPECT_EQ(l.allow("user0").remaining, 0);
  EXPECT_FALSE(l.allow("user0").allowed);
  std::set<std::string> owners;  // the router's view: every owner a TLS port
  for (const auto& r : batch) owners.insert(l.cluster()->owner_of(ratelimit::redis::engine::detail::key_slot(r.key)));
  std::set<std::string> tls_endpoints;
  for (const auto& [plain, tls] : tls_port_of) tls_endpoints.insert("127.0.0.1:" + std::to_string(tls));
  EXPECT_EQ(owners, tls_endpoints);
  std::size_t keys = 0;  // and on the servers (read over their plain ports)
  for (const int port : cluster.master_ports()) {
    auto admin = ratelimit_test::RedisCluster::admin(port);
    const std::size_t here = ratelimit_test::scan_keys(admin, o.key_prefix + "*").size();
    EXPECT_GT(here, 0u) << port;
    keys += here;
  }
  EXPECT_EQ(keys, 60u);
  EXPECT_EQ(l.stats().failures, 0u);
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
