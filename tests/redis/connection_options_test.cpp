// What ConnectionOptions accepts (include/ratelimit/redis/README.md "Connection options"): a host that is no host (a
// port or a scheme in it, nothing at all) and TLS files that cannot be read are refused at construction, naming the
// field; and ConnectionOptions::from_url reads a Redis URL, never echoing its password.
#include <gtest/gtest.h>

#include <chrono>
#include <cctype>
#include <cstdio>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include <ratelimit/redis.hpp>

#include "../support/invalid_message.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Gcra;
using ratelimit::redis::ConnectionOptions;
using ratelimit::redis::ConnectionPool;
using ratelimit::redis::RedisLimiter;
using ratelimit::redis::RedisOptions;
using ratelimit::redis::TlsOptions;
using ratelimit_test::invalid_message;
using ratelimit_test::starts_with;

const Gcra kHostCheckPolicy{.limit = 5, .period = 1s, .burst = 5};

/// `host` refused by the pool, by make_route, and by a limiter given it through RedisOptions; returns the
/// pool's message.
std::string refused_host(const std::string& host) {
  ConnectionOptions c;
  c.host = host;
  RedisOptions r;
  r.host = host;
  EXPECT_PRED2(starts_with, invalid_message([&] { (void)ratelimit::redis::make_route(c); }), "ConnectionOptions.host")
      << host;
  EXPECT_PRED2(starts_with, invalid_message([&] { RedisLimiter limiter(kHostCheckPolicy, r); }),
               "ConnectionOptions.host")
      << host;
  EXPECT_PRED2(starts_with,
               invalid_message([&] { RedisLimiter limiter(kHostCheckPolicy, r.connection(), r.limiter()); }),
               "ConnectionOptions.host")
      << host;
  return invalid_message([&] { ConnectionPool pool(c); });
}

TEST(ConnectionOptionsHost, RefusesAPortASchemeGarbageAndNothing) {
  for (const char* bad : {"127.0.0.1:6379", "redis://127.0.0.1", "rediss://h:6380", "127.0.0.1:abc", "", "localhost:",
                          "[::1]", "[::1]:6379", "redis host", "user@host", "host/0", " 127.0.0.1", "h\n"}) {
    EXPECT_PRED2(starts_with, refused_host(bad), "ConnectionOptions.host: ") << bad;
  }
  // The message says what to do instead.
  EXPECT_NE(refused_host("127.0.0.1:6379").find("ConnectionOptions.port"), std::string::npos);
  EXPECT_NE(refused_host("redis://127.0.0.1").find("from_url"), std::string::npos);
}

TEST(ConnectionOptionsHost, NamesAndAddressesStayValid) {
  for (const char* good : {"127.0.0.1", "localhost", "redis.internal", "redis-1.example.com", "my_host", "::1",
                           "2001:db8::7", "::ffff:127.0.0.1", "fe80::1%eth0"}) {
    ConnectionOptions c;
    c.host = good;
    EXPECT_NO_THROW(ConnectionPool pool(c)) << good;
  }
  // With a Unix socket the host is not used, and not checked.
  ConnectionOptions unix_socket;
  unix_socket.unix_socket = "/tmp/redis.sock";
  unix_socket.host = "";
  EXPECT_NO_THROW(ConnectionPool pool(unix_socket));
}

TEST(ConnectionOptionsHost, ARefusedHostNeverShowsAPassword) {
  const std::string message = refused_host("redis://admin:s3cret-pw@10.0.0.1:6379");
  EXPECT_PRED2(starts_with, message, "ConnectionOptions.host");
  EXPECT_EQ(message.find("s3cret-pw"), std::string::npos) << message;
}

// A host with a ':' that is no IPv6 address may be a pasted "user:password": nothing after the ':' is shown.
TEST(ConnectionOptionsHost, NothingAfterAColonIsShown) {
  for (const char* host : {"u:SECRETPW", "u:SECRET PW", "u:SECRET:PW", "u:SECRET/PW", "::SECRET"}) {
    const std::string message = refused_host(host);
    EXPECT_PRED2(starts_with, message, "ConnectionOptions.host: ") << host;
    EXPECT_EQ(message.find("SECRET"), std::string::npos) << message;
  }
  EXPECT_NE(refused_host("u:SECRETPW").find("ConnectionOptions.port"), std::string::npos);
  // An empty IPv6 zone is no address.
  EXPECT_PRED2(starts_with, refused_host("::1%"), "ConnectionOptions.host: ");
}

// The Unix socket path must fit sockaddr_un (107 bytes and the NUL) and be absolute: connect would cut it
// short or resolve it against the working directory.
TEST(ConnectionOptionsUnixSocket, TooLongOrRelativeIsRefused) {
  for (const std::string& path :
       {std::string("redis.sock"), "/" + std::string(107, 'a'), std::string("/tmp/x\0y", 8)}) {
    ConnectionOptions o;
    o.unix_socket = path;
    EXPECT_PRED2(starts_with, invalid_message([&] { ConnectionPool pool(o); }), "ConnectionOptions.unix_socket: ")
        << path;
  }
  ConnectionOptions fits;
  fits.unix_socket = "/" + std::string(106, 'a');
  EXPECT_NO_THROW(ConnectionPool pool(fits));
}

// pool_size is bounded: every connection's pipeline is made up front.
TEST(ConnectionOptionsPoolSize, IsBounded) {
  ConnectionOptions o;
  o.pool_size = 1'000'000'000;
  EXPECT_PRED2(starts_with, invalid_message([&] { ConnectionPool pool(o); }), "ConnectionOptions.pool_size: ");
  o.pool_size = 1025;
  EXPECT_PRED2(starts_with, invalid_message([&] { ConnectionPool pool(o); }), "ConnectionOptions.pool_size: ");
  o.pool_size = 1024;
  EXPECT_NO_THROW(ConnectionPool pool(o));
}

TEST(ConnectionOptionsHost, ClusterAndSentinelNodesAreCheckedByIndex) {
  ConnectionOptions c;
  c.cluster_nodes = {{"10.0.0.1", 7000}, {"10.0.0.2", 7001}, {"10.0.0.3:7002", 7002}};
  EXPECT_PRED2(starts_with, invalid_message([&] { (void)ratelimit::redis::make_route(c); }),
               "ConnectionOptions.cluster_nodes[2].host: ");
  c.cluster_nodes[2].host = "";
  EXPECT_PRED2(starts_with, invalid_message([&] { (void)ratelimit::redis::make_route(c); }),
               "ConnectionOptions.cluster_nodes[2].host: ");
  c.cluster_nodes[2].host = "::1";
  EXPECT_NO_THROW((void)ratelimit::redis::make_route(c));

  ConnectionOptions s;
  s.sentinel.master_name = "mymaster";
  s.sentinel.nodes = {{"10.0.0.1", 26379}, {"redis://10.0.0.2", 26379}};
  EXPECT_PRED2(starts_with, invalid_message([&] { (void)ratelimit::redis::make_route(s); }),
               "SentinelOptions.nodes[1].host: ");
  // In Sentinel mode the master's host comes from the sentinels: `host` is not used, and not checked.
  s.sentinel.nodes[1].host = "10.0.0.2";
  s.host = "";
  EXPECT_NO_THROW((void)ratelimit::redis::make_route(s));
}

// ---- from_url ----

/// `s` with every byte outside [A-Za-z0-9-._~] percent-encoded (RFC 3986 unreserved characters stay).
std::string percent_encoded(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

TEST(ConnectionOptionsFromUrl, ReadsEveryPart) {
  ConnectionOptions o = ConnectionOptions::from_url("redis://127.0.0.1:6420");
  EXPECT_EQ(o.host, "127.0.0.1");
  EXPECT_EQ(o.port, 6420);
  EXPECT_EQ(o.database, 0);
  EXPECT_FALSE(o.tls.enabled);
  EXPECT_TRUE(o.user.empty());
  EXPECT_TRUE(o.password.empty());

  o = ConnectionOptions::from_url("redis://redis.internal");
  EXPECT_EQ(o.host, "redis.internal");
  EXPECT_EQ(o.port, 6379);

  o = ConnectionOptions::from_url("redis://app:p%40ss%3Aw%2F@redis.internal:6380/3");
  EXPECT_EQ(o.user, "app");
  EXPECT_EQ(o.password, "p@ss:w/");
  EXPECT_EQ(o.port, 6380);
  EXPECT_EQ(o.database, 3);

  o = ConnectionOptions::from_url("redis://:only-password@h/");  // the default user
  EXPECT_EQ(o.user, "");
  EXPECT_EQ(o.password, "only-password");
  EXPECT_EQ(o.database, 0);

  o = ConnectionOptions::from_url("redis://nopass-user@h");
  EXPECT_EQ(o.user, "nopass-user");
  EXPECT_EQ(o.password, "");

  o = ConnectionOptions::from_url("redis://[::1]:6420/2");
  EXPECT_EQ(o.host, "::1");
  EXPECT_EQ(o.port, 6420);
  EXPECT_EQ(o.database, 2);
  o = ConnectionOptions::from_url("redis://[::1]");
  EXPECT_EQ(o.host, "::1");
  EXPECT_EQ(o.port, 6379);

  o = ConnectionOptions::from_url("rediss://u:pw@cache.example.com");
  EXPECT_TRUE(o.tls.enabled);
  EXPECT_EQ(o.host, "cache.example.com");
  EXPECT_EQ(o.port, 6379);

  o = ConnectionOptions::from_url("unix:///run/redis/redis.sock?db=2");
  EXPECT_EQ(o.unix_socket, "/run/redis/redis.sock");
  EXPECT_EQ(o.database, 2);
  o = ConnectionOptions::from_url("unix://app:pw@/run/redis%20server.sock");
  EXPECT_EQ(o.unix_socket, "/run/redis server.sock");
  EXPECT_EQ(o.user, "app");
  EXPECT_EQ(o.password, "pw");
  EXPECT_EQ(o.database, 0);

  o = ConnectionOptions::from_url("REDIS://H:1");  // the scheme is case-insensitive (RFC 3986)
  EXPECT_EQ(o.host, "H");
  EXPECT_EQ(o.port, 1);
}

TEST(ConnectionOptionsFromUrl, RoundTripsEveryUserAndPasswordByte) {
  std::string all;
  for (int c = 1; c < 256; ++c) all += static_cast<char>(c);
  for (const std::string& secret : {std::string("plain"), std::string("p@ss:w/rd?#[]%"), all}) {
    for (const std::string& host : {std::string("10.1.2.3"), std::string("[2001:db8::7]")}) {
      const std::string url =
          "rediss://" + percent_encoded("user:" + secret) + ":" + percent_encoded(secret) + "@" + host + ":6380/15";
      const ConnectionOptions o = ConnectionOptions::from_url(url);
      EXPECT_EQ(o.user, "user:" + secret);
      EXPECT_EQ(o.password, secret);
      EXPECT_EQ(o.host, host.front() == '[' ? host.substr(1, host.size() - 2) : host);
      EXPECT_EQ(o.port, 6380);
      EXPECT_EQ(o.database, 15);
      EXPECT_TRUE(o.tls.enabled);
      // What it read is valid: a pool takes it.
      ConnectionOptions plain = o;
      plain.tls.enabled = false;
      EXPECT_NO_THROW(ConnectionPool pool(plain));
    }
  }
}

/// The message of from_url(url)'s std::invalid_argument.
std::string url_error(const std::string& url) {
  return invalid_message([&] { (void)ConnectionOptions::from_url(url); });
}

TEST(ConnectionOptionsFromUrl, RefusesBadUrlsSayingWhatIsWrong) {
  const struct {
    const char* url;
    const char* says;
  } cases[] = {
      {"127.0.0.1:6379", "scheme"},
      {"", "scheme"},
      {"http://h", "scheme"},
      {"redis:h", "scheme"},
      {"redis://", "host"},
      {"redis://:6379", "host"},
      {"redis://u:p@", "host"},
      {"redis://h:", "port"},
      {"redis://h:abc", "port"},
      {"redis://h:0", "port"},
      {"redis://h:65536", "port"},
      {"redis://h:99999999999999999999", "port"},
      {"redis://h:-1", "port"},
      {"redis://h:6379x", "port"},
      {"redis://h/abc", "database"},
      {"redis://h/-1", "database"},
      {"redis://h/99999999999", "database"},
      {"redis://h/1/2", "database"},
      {"redis://[::1", "']'"},
      {"redis://[::1]x", "']'"},
      {"redis://[]:6379", "host"},
      {"redis://::1", "bracket"},
      {"redis://h?db=1", "query"},
      {"redis://h#x", "fragment"},
      {"redis://u%zz:p@h", "percent"},
      {"redis://u:p%4@h", "percent"},
      {"redis://a b@h", "user"},
      {"redis://h h", "host"},
      {"unix://", "path"},
      {"unix://relative/path", "path"},
      {"unix:///s?db=x", "database"},
      {"unix:///s?timeout=1", "query"},
      {"unix:///s?db=1&db=2", "query"},
      {"unix://u:p@/tmp/x%00y", "path"},
      {"unix:///tmp/x%00", "path"},
      {"redis://[::1%]:6379", "host"},
      {"redis://[::1%25]:6379", "host"},
  };
  for (const auto& c : cases) {
    const std::string m = url_error(c.url);
    EXPECT_PRED2(starts_with, m, "ConnectionOptions::from_url: ") << c.url;
    EXPECT_NE(m.find(c.says), std::string::npos) << c.url << " -> " << m;
  }
}

// RFC 6874: the zone of an IPv6 literal follows an encoded '%' ("%25").
TEST(ConnectionOptionsFromUrl, DecodesTheIpv6Zone) {
  EXPECT_EQ(ConnectionOptions::from_url("redis://[fe80::1%25eth0]:6380").host, "fe80::1%eth0");
  EXPECT_EQ(ConnectionOptions::from_url("redis://[::1]").host, "::1");
}

TEST(ConnectionOptionsFromUrl, ASocketPathLongerThanSunPathIsRefused) {
  EXPECT_NO_THROW((void)ConnectionOptions::from_url("unix:///" + std::string(106, 'a')));
  EXPECT_NE(url_error("unix:///" + std::string(107, 'a')).find("path"), std::string::npos);
}

TEST(ConnectionOptionsFromUrl, AnErrorNeverShowsThePassword) {
  for (const char* url :
       {"redis://u:Secr3tPw@h:abc", "rediss://u:Secr3tPw@[::1", "redis://:Secr3tPw@h/x", "redis://u:Secr3tPw%zz@h",
        "unix://u:Secr3tPw@relative", "redis://u:Secr3tPw@", "http://u:Secr3tPw@h", "redis://u:Secr3tPw@h#Secr3tPw"}) {
    const std::string m = url_error(url);
    EXPECT_PRED2(starts_with, m, "ConnectionOptions::from_url: ") << url;
    EXPECT_EQ(m.find("Secr3tPw"), std::string::npos) << m;
  }
}

// ---- TLS files ----

TEST(ConnectionOptionsTls, UnreadableFilesAreRefusedAtConstruction) {
  if (!ratelimit::redis::kTlsAvailable) GTEST_SKIP() << "this build has no TLS";
  const std::string missing = "/nonexistent-" + std::to_string(::getpid()) + "/ca.pem";
  ConnectionOptions o;
  o.tls.enabled = true;
  o.tls.ca_file = missing;
  EXPECT_PRED2(starts_with, invalid_message([&] { ConnectionPool pool(o); }), "ConnectionOptions.tls.ca_file: ");
  RedisOptions r;
  r.tls = o.tls;
  EXPECT_PRED2(starts_with, invalid_message([&] { RedisLimiter limiter(kHostCheckPolicy, r); }),
               "ConnectionOptions.tls.ca_file: ");
  o.tls.ca_file = "/tmp";  // a directory is no PEM file
  EXPECT_PRED2(starts_with, invalid_message([&] { ConnectionPool pool(o); }), "ConnectionOptions.tls.ca_file: ");
  o.tls.ca_file.clear();
  o.tls.ca_dir = missing;
  EXPECT_PRED2(starts_with, invalid_message([&] { ConnectionPool pool(o); }), "ConnectionOptions.tls.ca_dir: ");
  o.tls.ca_dir.clear();
  o.tls.cert_file = missing;
  o.tls.key_file = "/etc/hostname";
  EXPECT_PRED2(starts_with, invalid_message([&] { ConnectionPool pool(o); }), "ConnectionOptions.tls.cert_file: ");
  o.tls.cert_file = "/etc/hostname";
  o.tls.key_file = missing;
  EXPECT_PRED2(starts_with, invalid_message([&] { ConnectionPool pool(o); }), "ConnectionOptions.tls.key_file: ");
  // Readable files and directories pass (whether they hold what TLS needs is checked at the connect).
  o.tls.key_file = "/etc/hostname";
  o.tls.ca_dir = "/tmp";
  EXPECT_NO_THROW(ConnectionPool pool(o));
  // A FIFO is no file: opening it would block construction until a writer comes.
  const std::string fifo = "/tmp/ratelimit-ca-fifo-" + std::to_string(::getpid());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  o.tls.ca_file = fifo;
  EXPECT_PRED2(starts_with, invalid_message([&] { ConnectionPool pool(o); }), "ConnectionOptions.tls.ca_file: ");
  o.tls.ca_file.clear();
  o.tls.ca_dir = fifo;
  EXPECT_PRED2(starts_with, invalid_message([&] { ConnectionPool pool(o); }), "ConnectionOptions.tls.ca_dir: ");
  ::unlink(fifo.c_str());
  // Without TLS, files set are a forgotten switch (the connection would go out in plain text): refused.
  o.tls.enabled = false;
  for (const auto field : {&TlsOptions::ca_file, &TlsOptions::ca_dir, &TlsOptions::cert_file, &TlsOptions::key_file}) {
    ConnectionOptions with_file = o;
    with_file.tls.*field = missing;
    EXPECT_PRED2(starts_with, invalid_message([&] { ConnectionPool pool(with_file); }),
                 "ConnectionOptions.tls.enabled: is false, but TLS files are set");
  }
  o.tls = TlsOptions{};
  EXPECT_NO_THROW(ConnectionPool pool(o));
}

}  // namespace
