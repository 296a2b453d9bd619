// The first calls on a Redis Sentinel route, before any master is known (include/ratelimit/redis/README.md
// "Redis Sentinel", "Redis engine"): a sync call ends by its deadline, `command_timeout` from its start, also
// when the discovery it waited for ended just before that deadline; and the route's own request for a
// discovery is no call, so a full worker queue refusing it counts no refused call.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "../support/fault_proxy.hpp"
#include "fork_support.hpp"
#include "sentinel_support.hpp"
#include "test_support.hpp"

namespace {
namespace sentinel_first_calls {

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

const ratelimit::Gcra kBig{.limit = 1000, .period = 1s, .burst = 1'000'000};
// Scheduling on a loaded 2-core machine (sanitizers included), as the fault proxy tests allow.
constexpr auto kSlack = 150ms;

long long ms(Steady::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

/// A master, a sentinel monitoring it, and a proxy in front of the master or of the sentinel.
class SentinelFirstCalls : public testing::Test {
 protected:
  void start(bool sentinel_behind_proxy, RedisOptions tuned) {
    RATELIMIT_REQUIRE_REDIS();
    const std::string& binary = ratelimit_test::redis_server_binary();
    master_ = std::make_unique<ratelimit_test::RedisServer>(binary);
    if (!sentinel_behind_proxy) proxy_ = std::make_unique<FaultProxy>("127.0.0.1", master_->port());
    sentinel_ = std::make_unique<ratelimit_test::SentinelProcess>(
        binary, sentinel_behind_proxy ? master_->port() : proxy_->port(), "mymaster", 1, 30s);
    if (sentinel_behind_proxy) proxy_ = std::make_unique<FaultProxy>("127.0.0.1", sentinel_->port());
    RedisOptions o = ratelimit_test::client_options(*master_);
    o.on_error = FailurePolicy::fail_open;
    o.pool_size = 1;
    o.command_timeout = tuned.command_timeout;
    o.connect_timeout = tuned.connect_timeout;
    o.max_in_flight = tuned.max_in_flight;
    options_ =
        ratelimit_test::sentinel_options({sentinel_behind_proxy ? proxy_->port() : sentinel_->port()}, "mymaster", o);
  }

  ManualClock clock_;
  std::unique_ptr<ratelimit_test::RedisServer> master_;
  std::unique_ptr<ratelimit_test::SentinelProcess> sentinel_;
  std::unique_ptr<FaultProxy> proxy_;
  RedisOptions options_;
};

/// Every reply of the master comes 350 ms late, the deadline is 400 ms: the discovery (the master's `ROLE`)
/// ends within the first call's deadline, and the call must still end by it (fail_open then), not get a
/// second `command_timeout` on the master's pipeline.
TEST_F(SentinelFirstCalls, FirstSyncCallEndsByItsDeadlineAfterASlowDiscovery) {
  RedisOptions tuned;
  tuned.command_timeout = 400ms;
  tuned.connect_timeout = 1000ms;
  start(false, tuned);
  {
    // The script loaded on the master beforehand: the check itself is one round trip (see
    // SlowServerFirstCall for the reload's).
    Limiter direct(kBig, ratelimit_test::client_options(*master_), clock_);
    ASSERT_EQ(direct.check("warm").outcome, Outcome::decided);
  }
  proxy_->set(Direction::to_client, FaultSpec::delay(350ms));
  Limiter limiter(kBig, options_, clock_);
  auto call = std::async(std::launch::async, [&limiter] {
    const auto t0 = Steady::now();
    const CheckResult r = limiter.check("k");
    return std::pair{r, Steady::now() - t0};
  });
  ASSERT_EQ(call.wait_for(5s), std::future_status::ready) << "the first check hung";
  const auto [r, took] = call.get();
  EXPECT_LE(took, 400ms + kSlack) << "the first sync check took " << ms(took) << " ms against a 400 ms deadline ("
                                  << (r.outcome == Outcome::decided ? "decided" : "failure policy") << ")";
  proxy_->clear();
}

/// `max_in_flight` 1, the sentinel blackholed: an async call occupies the worker (its discovery), a second
/// one fills the worker's queue, and a sync call then asks for a discovery, which the full queue refuses.
/// No call was refused (the async ones were queued, the sync one waited), so `refused_calls` stays 0: it
/// counts calls, and each is also in `failures`.
TEST_F(SentinelFirstCalls, RefusedDiscoveryRequestIsNoRefusedCall) {
  RedisOptions tuned;
  tuned.command_timeout = 200ms;
  tuned.connect_timeout = 200ms;
  tuned.max_in_flight = 1;
  start(true, tuned);
  proxy_->set_admission(Admission::blackhole);
  std::this_thread::sleep_for(30ms);  // the proxy's acceptor takes it up within a tick
  // Outlive the limiter, whose end completes the calls a failed wait left.
  std::promise<void> first_done;
  std::promise<void> second_done;
  std::atomic<int> async_failed{0};
  Limiter limiter(kBig, options_, clock_);
  limiter.check_async("k", 1, 1000ms, [&](std::exception_ptr, CheckResult r) {
    if (r.outcome != Outcome::decided) ++async_failed;
    first_done.set_value();
  });
  std::this_thread::sleep_for(50ms);  // the worker took the first call and asks the blackholed sentinel
  limiter.check_async("k", 1, 1000ms, [&](std::exception_ptr, CheckResult r) {
    if (r.outcome != Outcome::decided) ++async_failed;
    second_done.set_value();
  });
  const CheckResult sync = limiter.check("k");
  EXPECT_EQ(sync.outcome, Outcome::failure_policy);
  ASSERT_EQ(first_done.get_future().wait_for(5s), std::future_status::ready);
  ASSERT_EQ(second_done.get_future().wait_for(5s), std::future_status::ready);
  const auto stats = limiter.stats();
  EXPECT_LE(stats.refused_calls, stats.failures) << "refused_calls counts what is no failed call";
  EXPECT_EQ(stats.refused_calls, 0u) << "no call was refused: the route's own discovery request was counted";
  proxy_->clear();
  proxy_->drop_connections();
}

/// The sentinel knows no master of the name asked: from several threads at once, every check gets the failure
/// policy with the sentinel's answer, read by each caller while the worker replaces the stored answer every
/// 100 ms (under ThreadSanitizer: no report of one thread freeing an error text another read).
TEST_F(SentinelFirstCalls, UnknownMasterAnswerReadFromManyThreads) {
  RedisOptions tuned;
  tuned.command_timeout = 100ms;
  tuned.connect_timeout = 200ms;
  start(false, tuned);
  options_.sentinel.master_name = "nosuchmaster";
  std::atomic<int> reports{0};
  options_.on_backend_failure = [&reports](const ratelimit::BackendError& e) {
    if (std::string(e.what()).find("does not know") != std::string::npos) ++reports;
  };
  Limiter limiter(kBig, options_, clock_);
  std::vector<std::thread> threads;
  std::atomic<int> not_failed{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      const auto until = Steady::now() + 600ms;
      while (Steady::now() < until) {
        const CheckResult r = limiter.check("k");
        if (r.outcome != Outcome::failure_policy) ++not_failed;
        std::this_thread::sleep_for(1ms);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(not_failed.load(), 0);
  EXPECT_GT(reports.load(), 0) << "no failure report named the sentinel's answer";
}

/// The sentinel blackholed before any master is known, `command_timeout` 400 ms: an async first check with a
/// 100 ms timeout gets its callback by its own deadline (the failure policy), not when the worker's discovery
/// gives up on the sentinel.
TEST_F(SentinelFirstCalls, AsyncFirstCallEndsByItsDeadlineWhileTheSentinelIsBlackholed) {
  RedisOptions tuned;
  tuned.command_timeout = 400ms;
  tuned.connect_timeout = 400ms;
  start(true, tuned);
  proxy_->set_admission(Admission::blackhole);
  std::this_thread::sleep_for(30ms);  // the proxy's acceptor takes it up within a tick
  Limiter limiter(kBig, options_, clock_);
  auto done = std::make_shared<std::promise<Steady::time_point>>();
  auto f = done->get_future();
  const auto t0 = Steady::now();
  limiter.check_async("k", 1, 100ms, [done](std::exception_ptr, CheckResult) { done->set_value(Steady::now()); });
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "the async check's callback never ran";
  const auto took = f.get() - t0;
  EXPECT_LE(took, 100ms + kSlack) << "the async check's callback came after " << ms(took)
                                  << " ms against its 100 ms timeout";
  proxy_->clear();
  proxy_->drop_connections();
}

/// fork() while a parent's thread waits for the first discovery (the sentinel blackholed): the child destroys
/// the limiter it inherited (as include/ratelimit/redis/README.md "Redis engine", fork, tells it to make its
/// own) and exits; nothing there waits for the parent's threads, which the child does not have.
TEST_F(SentinelFirstCalls, ChildDestroysTheRouteWhileAParentThreadWaitsForTheFirstMaster) {
  RedisOptions tuned;
  tuned.command_timeout = 2000ms;
  tuned.connect_timeout = 1000ms;
  start(true, tuned);
  proxy_->set_admission(Admission::blackhole);
  std::this_thread::sleep_for(30ms);  // the proxy's acceptor takes it up within a tick
  auto limiter = std::make_unique<Limiter>(kBig, options_, clock_);
  std::thread waiter([&limiter] { (void)limiter->check("k"); });
  std::this_thread::sleep_for(300ms);  // the waiter waits for the worker's discovery
  const pid_t child = ::fork();
  if (child == 0) {
    limiter.reset();
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  const bool exited = ratelimit_test::exits_within(child, 5s, status);
  EXPECT_TRUE(exited) << "the child hung destroying the limiter it inherited (killed after 5 s)";
  if (exited) {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child did not exit cleanly: " << status;
  }
  waiter.join();
  proxy_->clear();
  proxy_->drop_connections();
}

}  // namespace sentinel_first_calls

namespace sentinel_first_calls {

/// The same slow server without Sentinel: the first check (its script not yet loaded there) ends by its
/// deadline too, `command_timeout` from its start, whatever round trips loading the script takes.
TEST(SlowServerFirstCall, EndsByItsDeadline) {
  RATELIMIT_REQUIRE_REDIS();
  ratelimit_test::RedisServer server(ratelimit_test::redis_server_binary());
  FaultProxy proxy("127.0.0.1", server.port());
  RedisOptions o = ratelimit_test::client_options(server);
  o.port = proxy.port();
  o.on_error = FailurePolicy::fail_open;
  o.pool_size = 1;
  o.command_timeout = 400ms;
  o.connect_timeout = 1000ms;
  proxy.set(Direction::to_client, FaultSpec::delay(300ms));
  ManualClock clock;
  Limiter limiter(kBig, o, clock);
  const auto t0 = Steady::now();
  const CheckResult r = limiter.check("k");
  const auto took = Steady::now() - t0;
  EXPECT_LE(took, 400ms + kSlack) << "the first check took " << ms(took) << " ms against a 400 ms deadline ("
                                  << (r.outcome == Outcome::decided ? "decided" : "failure policy") << ")";
  proxy.clear();
}

}  // namespace sentinel_first_calls
}  // namespace
