// The default failure report (include/ratelimit/redis/README.md "Failure policy and hook"): with no hook set, an outage
// is visible without any code, as one line on stderr for a server's first failure and at most one more per server per
// 10 s, naming the server (never a password), the cause and the failure policy's answer; a hook of the user's replaces
// it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <string>

#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Gcra;
using ratelimit::ManualClock;
using ratelimit::redis::LeasedLimiter;
using ratelimit::redis::RedisLimiter;
using ratelimit::redis::RedisOptions;

const Gcra kReportPolicy{.limit = 5, .period = 1s, .burst = 5};

/// A loopback port where nothing listens, never one this process used before: the report's budget is per
/// server for the whole process, so a port seen by an earlier test would start with its budget spent.
int fresh_port() {
  static std::set<int> used;
  int port = ratelimit_test::free_port();
  while (!used.insert(port).second) port = ratelimit_test::free_port();
  return port;
}

/// Default options on a loopback port where nothing listens.
RedisOptions nothing_listening(int port) {
  RedisOptions o;
  o.port = port;
  o.password = "Secr3t-Passw0rd";
  return o;
}

/// What `fn` writes to stderr.
template <class Fn>
std::string stderr_of(Fn&& fn) {
  testing::internal::CaptureStderr();
  fn();
  return testing::internal::GetCapturedStderr();
}

long line_count(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }

TEST(FailureReport, FirstFailureWritesOneLineThenAtMostOnePer10Seconds) {
  const int port = fresh_port();
  ManualClock clock;
  RedisLimiter<Gcra, ManualClock> limiter(kReportPolicy, nothing_listening(port), clock);
  std::string first = stderr_of([&] { EXPECT_TRUE(limiter.allow("k")); });  // fail_open admits
  ASSERT_EQ(line_count(first), 1) << first;
  EXPECT_NE(first.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << first;
  EXPECT_NE(first.find("io"), std::string::npos) << first;
  EXPECT_NE(first.find("fail_open"), std::string::npos) << first;
  EXPECT_NE(first.find("admitted"), std::string::npos) << first;
  EXPECT_NE(first.find("on_backend_failure"), std::string::npos) << first;  // how to replace or silence it
  EXPECT_EQ(first.find("Secr3t-Passw0rd"), std::string::npos) << first;

  clock.advance(9s);
  EXPECT_EQ(stderr_of([&] {
              for (int i = 0; i < 5; ++i) (void)limiter.allow("k");
            }),
            "");
  // Another limiter on the same server shares the budget: one line per server, not per limiter.
  RedisLimiter<Gcra, ManualClock> other(kReportPolicy, nothing_listening(port), clock);
  EXPECT_EQ(stderr_of([&] { (void)other.allow("k"); }), "");

  clock.advance(2s);  // 11 s after the first line
  const std::string next = stderr_of([&] { (void)limiter.allow("k"); });
  ASSERT_EQ(line_count(next), 1) << next;
  EXPECT_NE(next.find("6 more"), std::string::npos) << next;  // the failures not reported since the first line
}

TEST(FailureReport, EachServerHasItsOwnLine) {
  ManualClock clock;
  RedisLimiter<Gcra, ManualClock> a(kReportPolicy, nothing_listening(fresh_port()), clock);
  auto o = nothing_listening(fresh_port());
  o.on_error = ratelimit::FailurePolicy::fail_closed;
  RedisLimiter<Gcra, ManualClock> b(kReportPolicy, o, clock);
  EXPECT_EQ(line_count(stderr_of([&] { (void)a.allow("k"); })), 1);
  const std::string line = stderr_of([&] { EXPECT_FALSE(b.allow("k")); });
  EXPECT_EQ(line_count(line), 1);
  EXPECT_NE(line.find("denied (fail_closed)"), std::string::npos) << line;
}

TEST(FailureReport, AHookOfTheUsersReplacesItAndANoOpSilencesIt) {
  ManualClock clock;
  auto o = nothing_listening(fresh_port());
  std::atomic<int> seen{0};
  o.on_backend_failure = [&seen](const ratelimit::BackendError&) { ++seen; };
  RedisLimiter<Gcra, ManualClock> hooked(kReportPolicy, o, clock);
  EXPECT_EQ(stderr_of([&] { (void)hooked.allow("k"); }), "");
  EXPECT_EQ(seen.load(), 1);

  o.port = fresh_port();
  o.on_backend_failure = ratelimit::redis::ignore_backend_failure;
  RedisLimiter<Gcra, ManualClock> silent(kReportPolicy, o, clock);
  EXPECT_EQ(stderr_of([&] { (void)silent.allow("k"); }), "");
}

TEST(FailureReport, LeasedLimiterReportsToo) {
  ManualClock clock;
  const int port = fresh_port();
  LeasedLimiter<Gcra, ManualClock, ManualClock> leased(kReportPolicy, nothing_listening(port), {}, clock, clock);
  const std::string line = stderr_of([&] { (void)leased.allow("k"); });
  ASSERT_EQ(line_count(line), 1) << line;
  EXPECT_NE(line.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << line;
}

}  // namespace

namespace report_text {

using ratelimit::BackendError;
using ratelimit::BackendErrorCause;
using ratelimit::FailurePolicy;
using ratelimit::redis::ConnectionOptions;

/// The report line for a failure of the server(s) `o` names.
std::string line_for(const ConnectionOptions& o) {
  const BackendError e(BackendErrorCause::io, "refused\r\nratelimit: forged\x1b[2J");
  return ratelimit::redis::detail::report_line(ratelimit::redis::detail::servers_of(o), e, FailurePolicy::fail_open, 0);
}

/// True when `s` holds a control character other than its last newline.
bool has_control(const std::string& s) {
  return std::any_of(s.begin(), s.end() - 1, [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

// A server name of the user's cannot forge a second line (or terminal escapes) in the report.
TEST(FailureReport, UserTextIsPrintedWithoutControlCharacters) {
  ConnectionOptions unix_socket;
  unix_socket.unix_socket = "/tmp/x\nratelimit: all good";
  ConnectionOptions sentinel;
  sentinel.sentinel.master_name = "mymaster\nratelimit: all good";
  sentinel.sentinel.nodes = {{"127.0.0.1", 26379}};
  ConnectionOptions host;
  host.host = "bad\thost\x7f";
  ConnectionOptions cluster;
  cluster.cluster_nodes = {{"seed\n", 7000}};
  for (const ConnectionOptions* o : {&unix_socket, &sentinel, &host, &cluster}) {
    const std::string line = line_for(*o);
    EXPECT_EQ(line_count(line), 1) << line;
    EXPECT_EQ(line.back(), '\n');
    EXPECT_FALSE(has_control(line)) << line;
  }
  EXPECT_NE(line_for(unix_socket).find("unix:/tmp/x\\nratelimit: all good"), std::string::npos)
      << line_for(unix_socket);
}

TEST(FailureReport, NamesTheSentinelMasterAndTheClusterOnce) {
  ConnectionOptions sentinel;
  sentinel.sentinel.master_name = "mymaster";
  sentinel.sentinel.nodes = {{"127.0.0.1", 26379}};
  EXPECT_NE(line_for(sentinel).find("ratelimit: Redis Sentinel master \"mymaster\" failed"), std::string::npos)
      << line_for(sentinel);
  ConnectionOptions cluster;
  cluster.cluster_nodes = {{"127.0.0.1", 7000}};
  EXPECT_NE(line_for(cluster).find("ratelimit: Redis Cluster (seed 127.0.0.1:7000) failed"), std::string::npos)
      << line_for(cluster);
}

}  // namespace report_text
