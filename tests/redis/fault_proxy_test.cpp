// Socket-level faults (tests/support/fault_proxy.hpp) between a RedisLimiter and a real redis-server, plain
// and TLS: delay, trickle, stall, reset mid-reply, half-close, blackhole and refuse, each for sync and async
// calls. Each test checks the engine's promises (include/ratelimit/redis/README.md "Redis engine", "Circuit breaker"):
// every call ends by its deadline, every callback runs exactly once, nothing is counted twice on the server (the key's
// units consumed, read straight from the server, lie between the admitted calls and those plus the calls that failed
// after they could have been sent), and the breaker opens while the server fails, not otherwise. Connecting (TCP, TLS
// handshake, AUTH, SELECT) is bounded by `connect_timeout` in total, and a caller's own deadline ends its call even
// while a connect goes on (include/ratelimit/redis/README.md "Redis backend", "TLS").
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ratelimit/redis.hpp>

#include "../support/fault_proxy.hpp"
#include "../support/sanitizers.hpp"
#include "test_support.hpp"
#include "tls_support.hpp"

namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using ratelimit::CheckResult;
using ratelimit::FailurePolicy;
using ratelimit::ManualClock;
using ratelimit::Outcome;
using ratelimit::redis::RedisLimiter;
using ratelimit::redis::RedisOptions;
using ratelimit_test::Admission;
using ratelimit_test::Direction;
using ratelimit_test::FaultProxy;
using ratelimit_test::FaultSpec;
using Limiter = RedisLimiter<ratelimit::Gcra, ManualClock>;

// At a fixed client time nothing refills: a key's remaining is exactly kBurst minus what was consumed.
constexpr std::int64_t kBurst = 1'000'000;
const ratelimit::Gcra kBig{.limit = 1000, .period = 1s, .burst = kBurst};
constexpr auto kCommandTimeout = 100ms;
constexpr auto kConnectTimeout = 200ms;
// Scheduling on loaded shared cores, wider under the sanitizers (as in FaultTable): the faults found here held
// calls for seconds.
constexpr auto kSlack = ratelimit_test::kSchedulingSlack;
// How long a test waits for a call before it calls it hung (and lifts the fault so that it can end).
constexpr auto kHung = 3s;

/// What a run of calls saw.
struct Tally {
  int calls = 0;
  int admitted = 0;  // decided by Redis and allowed: consumed on the server
  int decided = 0;
  int failed = 0;  // answered by the failure policy: may or may not have run on the server
  Steady::duration longest{};
  void add(const CheckResult& r, Steady::duration took) {
    ++calls;
    if (r.outcome == Outcome::decided) {
      ++decided;
      if (r.decision.allowed) ++admitted;
    } else {
      ++failed;
    }
    if (took > longest) longest = took;
  }
  void add(const Tally& t) {
    calls += t.calls;
    admitted += t.admitted;
    decided += t.decided;
    failed += t.failed;
    if (t.longest > longest) longest = t.longest;
  }
};

long long ms(Steady::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

/// A proxy in front of a server, limiters through it, and the server's own view of their key.
class FaultProxyFixture : public testing::Test {
 protected:
  /// Puts a proxy in front of 127.0.0.1:`port`.
  void start_proxy(int port) { proxy_ = std::make_unique<FaultProxy>("127.0.0.1", port); }

  /// `o` (reaching the server directly) redirected through the proxy: fail_open, pool 1, short timeouts.
  RedisOptions through_proxy(RedisOptions o) {
    direct_ = o;
    o.port = proxy_->port();
    o.on_error = FailurePolicy::fail_open;
    o.pool_size = 1;
    o.command_timeout = kCommandTimeout;
    o.connect_timeout = kConnectTimeout;
    return o;
  }

  /// Units of key "k" consumed on the server, read with a peek that does not go through the proxy.
  std::int64_t consumed() {
    Limiter direct(kBig, direct_, clock_);
    return kBurst - direct.peek("k").remaining;
  }

  /// One sync check of "k", run on a thread of its own so that a hung call fails the test instead of hanging it.
  std::pair<CheckResult, Steady::duration> timed_check(Limiter& l) {
    auto f = std::async(std::launch::async, [&l] {
      const auto t0 = Steady::now();
      CheckResult r = l.check("k");
      return std::make_pair(r, Steady::now() - t0);
    });
    if (f.wait_for(kHung) != std::future_status::ready) {
      ADD_FAILURE() << "a sync check was held for more than " << ms(kHung) << " ms";
      proxy_->clear();  // lets it finish
    }
    return f.get();
  }

  /// `n` sync checks, each ending by its deadline (command_timeout from its start).
  Tally sync_calls(Limiter& l, int n) {
    Tally t;
    for (int i = 0; i < n; ++i) {
      const auto [r, took] = timed_check(l);
      EXPECT_LE(took, options_.command_timeout + kSlack) << "sync check " << i << " took " << ms(took) << " ms";
      t.add(r, took);
    }
    return t;
  }

  /// `n` async checks one after another (deadline `timeout`), each callback arriving exactly once and by its
  /// deadline.
  Tally async_calls(Limiter& l, int n, std::chrono::milliseconds timeout = kCommandTimeout) {
    Tally t;
    std::vector<std::shared_ptr<std::atomic<int>>> runs;
    for (int i = 0; i < n; ++i) {
      auto count = std::make_shared<std::atomic<int>>(0);
      runs.push_back(count);
      auto done = std::make_shared<std::promise<std::pair<CheckResult, Steady::duration>>>();
      auto f = done->get_future();
      const auto t0 = Steady::now();
      l.check_async("k", 1, timeout, [count, done, t0](std::exception_ptr, CheckResult r) {
        if (count->fetch_add(1) == 0) done->set_value({r, Steady::now() - t0});
      });
      if (f.wait_for(kHung) != std::future_status::ready) {
        ADD_FAILURE() << "async check " << i << ": no callback within " << ms(kHung) << " ms";
        proxy_->clear();
        f.wait();
      }
      const auto [r, took] = f.get();
      EXPECT_LE(took, timeout + kSlack) << "async check " << i << ": callback after " << ms(took) << " ms";
      t.add(r, took);
    }
    std::this_thread::sleep_for(20ms);  // room for a second callback, which must not come
    for (std::size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i]->load(), 1) << "callbacks of async check " << i;
    return t;
  }

  /// `n` checks, sync or async (each with the deadline `command_timeout`).
  Tally calls(Limiter& l, bool async, int n) {
    return async ? async_calls(l, n, options_.command_timeout) : sync_calls(l, n);
  }

  /// Once the fault is lifted, checks are decided by Redis again within the breaker's open period and a
  /// reconnect (2 s at most).
  Tally recover(Limiter& l) {
    proxy_->clear();
    Tally t;
    const auto until = Steady::now() + 2s;
    while (Steady::now() < until && t.decided == 0) {
      const auto [r, took] = timed_check(l);
      t.add(r, took);
      if (t.decided == 0) std::this_thread::sleep_for(10ms);
    }
    EXPECT_EQ(t.decided, 1) << "checks not back on Redis 2 s after the fault was lifted";
    return t;
  }

  /// Nothing counted twice: the server consumed every admitted unit, and at most one more per call that
  /// failed after it could have been sent (a call cut by the breaker never was).
  void expect_counted_once(const Tally& t, const Limiter& l) {
    const std::int64_t on_server = consumed();
    const auto short_circuited = static_cast<std::int64_t>(l.stats().short_circuited);
    EXPECT_GE(on_server, t.admitted) << "admitted checks the server did not count";
    EXPECT_LE(on_server, t.admitted + t.failed - short_circuited)
        << "the server counted more than every check once (" << t.calls << " checks, " << t.failed << " failed, "
        << short_circuited << " short-circuited)";
  }

  /// A connected limiter (one check decided through the proxy), then `fault` on `direction`: `n` checks
  /// (sync or async) fail by their deadlines and open the breaker (none of them reaching the server unless
  /// `reaches_server`); then the fault is lifted and checks recover.
  void expect_server_fault(Direction direction, FaultSpec fault, bool async, bool reaches_server = true, int n = 5) {
    Limiter l(kBig, options_, clock_);
    Tally all = calls(l, async, 1);
    ASSERT_EQ(all.decided, 1) << "the healthy proxy did not forward";
    proxy_->set(direction, fault);
    const Tally faulty = calls(l, async, n);
    EXPECT_EQ(faulty.decided, 0) << "checks decided through the fault";
    EXPECT_GE(l.stats().breaker_opens, 1u) << "the server's fault did not open the breaker";
    if (!reaches_server) {
      EXPECT_EQ(consumed(), 1) << "a request held on its way reached the server";
    }
    all.add(faulty);
    all.add(recover(l));
    expect_counted_once(all, l);
  }

  /// `admission` for new connections before the limiter connects: checks fail by their deadlines and open
  /// the breaker, nothing reaches the server; then checks recover.
  void expect_admission_fault(Admission admission, bool async) {
    proxy_->set_admission(admission);
    std::this_thread::sleep_for(30ms);  // the proxy's acceptor takes it up within a tick
    Limiter l(kBig, options_, clock_);
    Tally all = calls(l, async, 5);
    EXPECT_EQ(all.decided, 0);
    EXPECT_GE(l.stats().breaker_opens, 1u);
    EXPECT_EQ(consumed(), 0) << "a check reached the server";
    all.add(recover(l));
    expect_counted_once(all, l);
  }

  /// While a connect trickles (`fault` on the server's bytes): one check (sync or async) ends by its own
  /// deadline, long before connect_timeout (500 ms); the connect is given up by connect_timeout (the proxy
  /// sees the client close), never completed; then the fault is lifted and checks are decided.
  void expect_connect_bounded(FaultSpec fault, bool async) {
    proxy_->set(Direction::to_client, fault);
    options_.connect_timeout = 500ms;
    Limiter l(kBig, options_, clock_);
    const auto t0 = Steady::now();
    Tally all = calls(l, async, 1);
    EXPECT_EQ(all.decided, 0);
    while (proxy_->client_closes() == 0 && l.stats().connects == 0 && Steady::now() - t0 < kHung) {
      std::this_thread::sleep_for(5ms);
    }
    const auto ended = Steady::now() - t0;
    EXPECT_EQ(l.stats().connects, 0u) << "connected through the trickle after " << ms(ended) << " ms";
    EXPECT_LE(ended, options_.connect_timeout + kSlack) << "the connect went on for " << ms(ended) << " ms";
    all.add(recover(l));
    expect_counted_once(all, l);
  }

  ManualClock clock_;
  std::unique_ptr<FaultProxy> proxy_;
  RedisOptions options_;  // through the proxy
  RedisOptions direct_;   // straight to the server
};

/// The plain server route: a proxy in front of the shared redis-server.
class FaultProxyServer : public FaultProxyFixture {
 protected:
  void SetUp() override {
    RATELIMIT_REQUIRE_REDIS();
    start_proxy(ratelimit_test::shared_redis()->port());
    options_ = through_proxy(ratelimit_test::client_options(*ratelimit_test::shared_redis()));
  }

  /// A delay below the deadline: every check decided, the breaker closed, each unit counted once; a
  /// delay beyond it: a server fault.
  void expect_delay(bool async) {
    {
      options_.command_timeout = 500ms;  // a deadline far from the delay, also on a loaded machine
      Limiter l(kBig, options_, clock_);
      proxy_->set(Direction::to_client, FaultSpec::delay(30ms));
      const Tally t = calls(l, async, 5);
      EXPECT_EQ(t.decided, 5);
      EXPECT_GE(t.longest, 30ms);
      EXPECT_EQ(l.stats().breaker_opens, 0u);
      expect_counted_once(t, l);
      EXPECT_EQ(consumed(), 5);
      proxy_->clear();
    }
    options_.command_timeout = kCommandTimeout;
    options_.key_prefix = direct_.key_prefix = ratelimit_test::unique_prefix();  // a key of its own
    expect_server_fault(Direction::to_client, FaultSpec::delay(kCommandTimeout + 200ms), async);
  }

  /// A slow trickle (a reply's bytes take longer than the deadline) is a server fault.
  void expect_trickle(bool async) { expect_server_fault(Direction::to_client, FaultSpec::trickle(10ms), async); }
};

TEST_F(FaultProxyServer, DelaySync) { expect_delay(false); }
TEST_F(FaultProxyServer, DelayAsync) { expect_delay(true); }
TEST_F(FaultProxyServer, TrickleSync) { expect_trickle(false); }
TEST_F(FaultProxyServer, TrickleAsync) { expect_trickle(true); }
// Requests held on their way: nothing reaches the server.
TEST_F(FaultProxyServer, StallRequestsSync) {
  expect_server_fault(Direction::to_server, FaultSpec::stall(0), false, false);
}
TEST_F(FaultProxyServer, StallRequestsAsync) {
  expect_server_fault(Direction::to_server, FaultSpec::stall(0), true, false);
}
// Replies held after 3 bytes (mid-reply): the server ran each check, the client never hears.
TEST_F(FaultProxyServer, StallRepliesSync) { expect_server_fault(Direction::to_client, FaultSpec::stall(3), false); }
TEST_F(FaultProxyServer, StallRepliesAsync) { expect_server_fault(Direction::to_client, FaultSpec::stall(3), true); }
// A reset after 3 bytes of a reply: each cut check ran once on the server and is never re-sent.
TEST_F(FaultProxyServer, ResetMidReplySync) { expect_server_fault(Direction::to_client, FaultSpec::reset(3), false); }
TEST_F(FaultProxyServer, ResetMidReplyAsync) { expect_server_fault(Direction::to_client, FaultSpec::reset(3), true); }
// The server's side closed for writing after 3 bytes of a reply: end of stream mid-reply.
TEST_F(FaultProxyServer, HalfCloseMidReplySync) {
  expect_server_fault(Direction::to_client, FaultSpec::half_close(3), false);
}
TEST_F(FaultProxyServer, HalfCloseMidReplyAsync) {
  expect_server_fault(Direction::to_client, FaultSpec::half_close(3), true);
}
// Connections accepted and never answered.
TEST_F(FaultProxyServer, BlackholeSync) { expect_admission_fault(Admission::blackhole, false); }
TEST_F(FaultProxyServer, BlackholeAsync) { expect_admission_fault(Admission::blackhole, true); }
// Connections refused (ECONNREFUSED).
TEST_F(FaultProxyServer, RefuseSync) { expect_admission_fault(Admission::refuse, false); }
TEST_F(FaultProxyServer, RefuseAsync) { expect_admission_fault(Admission::refuse, true); }

// Local refusals are no server fault: async calls beyond max_in_flight on a slow (healthy) server fail at once
// and leave the breaker closed, while those in flight are decided.
TEST_F(FaultProxyServer, QueueFullAsyncLeavesTheBreakerClosed) {
  options_.max_in_flight = 2;
  options_.command_timeout = 500ms;
  std::atomic<int> decided{0}, failed{0}, done{0};  // outlive the limiter, which runs every callback
  Limiter l(kBig, options_, clock_);
  proxy_->set(Direction::to_client, FaultSpec::delay(50ms));
  constexpr int kCalls = 40;
  for (int i = 0; i < kCalls; ++i) {
    l.check_async("k", 1, [&](std::exception_ptr, CheckResult r) {
      (r.outcome == Outcome::decided ? decided : failed).fetch_add(1);
      done.fetch_add(1);
    });
  }
  const auto until = Steady::now() + kHung;
  while (done.load() < kCalls && Steady::now() < until) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(done.load(), kCalls);
  EXPECT_GE(decided.load(), 2);
  EXPECT_GE(l.stats().refused_calls, 1u);
  EXPECT_EQ(l.stats().breaker_opens, 0u) << failed.load() << " local refusals opened the breaker";
  EXPECT_EQ(consumed(), decided.load());
}

// Connecting is bounded in total (include/ratelimit/redis/README.md "Redis backend", connect_timeout): AUTH and SELECT
// replies trickling one byte every 80 ms (each read inside the per-read timeout, 800 ms for both) hold no call past its
// deadline, sync or async, and no connect past connect_timeout.
class FaultProxyConnect : public FaultProxyServer {
 protected:
  void SetUp() override {
    FaultProxyServer::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    auto admin = ratelimit_test::shared_redis()->admin();
    user_ = "faultproxy" + std::to_string(::getpid());
    ASSERT_EQ(
        ratelimit::redis::engine::text(*admin.command({"ACL", "SETUSER", user_, "reset", "on", ">pw", "~*", "+@all"})),
        "OK");
    options_.user = user_;
    options_.password = "pw";
    options_.database = 1;
    direct_.user = user_;
    direct_.password = "pw";
    direct_.database = 1;
  }
  void TearDown() override {
    if (!user_.empty()) (void)ratelimit_test::shared_redis()->admin().command({"ACL", "DELUSER", user_});
  }

  std::string user_;
};

TEST_F(FaultProxyConnect, TrickledLoginEndsSyncCallByItsDeadline) {
  expect_connect_bounded(FaultSpec::trickle(80ms), false);
}
TEST_F(FaultProxyConnect, TrickledLoginCallbackArrivesByItsDeadline) {
  expect_connect_bounded(FaultSpec::trickle(80ms), true);
}

/// TLS: a proxy in front of the TLS port of a redis-server of the suite's own (certificates made once);
/// the server's state is read on its plain port.
class FaultProxyTls : public FaultProxyFixture {
 protected:
  static void SetUpTestSuite() { suite_.start(); }
  static void TearDownTestSuite() { suite_.stop(); }
  void SetUp() override {
    RATELIMIT_REQUIRE_TLS(suite_);
    start_proxy(suite_.server->tls_port());
    options_ = through_proxy(ratelimit_test::client_options(suite_.server->server()));
    options_.tls.enabled = true;
    options_.tls.ca_file = suite_.files->path("ca.crt");
  }

  static ratelimit_test::TlsSuiteServer suite_;
};
ratelimit_test::TlsSuiteServer FaultProxyTls::suite_;

// The handshake's bytes trickling, one every 50 ms (about a minute for the server's flight).
TEST_F(FaultProxyTls, TrickledHandshakeEndsSyncCallByItsDeadline) {
  expect_connect_bounded(FaultSpec::trickle(50ms), false);
}
TEST_F(FaultProxyTls, TrickledHandshakeCallbackArrivesByItsDeadline) {
  expect_connect_bounded(FaultSpec::trickle(50ms), true);
}

// A handshake slower than a call's deadline but within connect_timeout: the first call ends by its deadline,
// the connect goes on and serves the next call (one connection in all).
TEST_F(FaultProxyTls, SlowHandshakeOutlivesTheFirstCallsDeadline) {
  options_.connect_timeout = 2s;
  proxy_->set(Direction::to_client, FaultSpec::delay(kCommandTimeout + 100ms));
  Limiter l(kBig, options_, clock_);
  Tally all = sync_calls(l, 1);
  std::this_thread::sleep_for(kCommandTimeout + 300ms);  // the server's flight arrives, the handshake ends
  proxy_->clear();
  all.add(recover(l));
  EXPECT_EQ(l.stats().connects, 1u);
  expect_counted_once(all, l);
}

TEST_F(FaultProxyTls, TrickleSync) { expect_server_fault(Direction::to_client, FaultSpec::trickle(10ms), false); }
TEST_F(FaultProxyTls, TrickleAsync) { expect_server_fault(Direction::to_client, FaultSpec::trickle(10ms), true); }
TEST_F(FaultProxyTls, StallRepliesSync) { expect_server_fault(Direction::to_client, FaultSpec::stall(3), false); }
TEST_F(FaultProxyTls, StallRepliesAsync) { expect_server_fault(Direction::to_client, FaultSpec::stall(3), true); }
TEST_F(FaultProxyTls, ResetMidReplySync) { expect_server_fault(Direction::to_client, FaultSpec::reset(3), false); }
TEST_F(FaultProxyTls, ResetMidReplyAsync) { expect_server_fault(Direction::to_client, FaultSpec::reset(3), true); }
TEST_F(FaultProxyTls, BlackholeSync) { expect_admission_fault(Admission::blackhole, false); }
TEST_F(FaultProxyTls, BlackholeAsync) { expect_admission_fault(Admission::blackhole, true); }

}  // namespace
