// The Redis engine (include/ratelimit/redis/README.md "Redis engine"): automatic pipelining of concurrent callers, the
// async API, its bounded queue and deadlines, exactly-once completion across faults (SIGKILL + restart, CLIENT PAUSE,
// SCRIPT FLUSH, destruction with calls in flight) with no double count on the server, and forks.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "../support/sanitizers.hpp"
#include "cluster_support.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;

// 10,000 calls per fault; a fifth under the sanitizers, which are about 10x slower (tests stay < 3 s).
#ifdef RATELIMIT_TEST_SANITIZED
constexpr std::size_t kScale = 5;
#else
constexpr std::size_t kScale = 1;
#endif
using ratelimit::BackendError;
using ratelimit::BackendErrorCause;
using ratelimit::CheckResult;
using ratelimit::Decision;
using ratelimit::FailurePolicy;
using ratelimit::ManualClock;
using ratelimit::Outcome;
using ratelimit::redis::RedisLimiter;

// At a fixed client time nothing refills: a key's remaining is exactly kBurst minus what was consumed.
constexpr std::int64_t kBurst = 1'000'000;
const ratelimit::Gcra kBig{.limit = 1000, .period = 1s, .burst = kBurst};

/// Counts completions per call and wakes a waiter when all have come.
class Tally {
 public:
  explicit Tally(std::size_t n) : times_(n) {}
  void done(std::size_t i, const CheckResult& r, bool threw) {
    const int before = times_[i].fetch_add(1);
    if (before != 0) twice_.fetch_add(1);
    if (threw) {
      thrown_.fetch_add(1);
    } else if (r.outcome == Outcome::decided) {
      (r.decision.allowed ? admitted_ : denied_).fetch_add(1);
    } else {
      failed_.fetch_add(1);
    }
    // Counted under the lock: the waiter, which may destroy the tally once all are in, cannot see the
    // last count before this call is done with the tally.
    const std::size_t n = times_.size();
    const std::lock_guard lock(m_);
    if (finished_.fetch_add(1) + 1 == n) cv_.notify_all();
  }
  bool wait(std::chrono::milliseconds limit) {
    std::unique_lock lock(m_);
    return cv_.wait_for(lock, limit, [&] { return finished_.load() == times_.size(); });
  }
  void expect_each_exactly_once() const {
    EXPECT_EQ(twice_.load(), 0u);
    std::size_t missing = 0;
    for (const auto& t : times_) missing += t.load() == 0 ? 1u : 0u;
    EXPECT_EQ(missing, 0u) << "calls that never completed";
  }
  std::size_t admitted() const { return admitted_.load(); }
  std::size_t failed() const { return failed_.load() + thrown_.load(); }
  std::size_t finished() const { return finished_.load(); }

 private:
  std::vector<std::atomic<int>> times_;
  std::atomic<std::size_t> twice_{0}, finished_{0}, admitted_{0}, denied_{0}, failed_{0}, thrown_{0};
  std::mutex m_;
  std::condition_variable cv_;
};

class AsyncRedis : public testing::Test {
 protected:
  void SetUp() override { RATELIMIT_REQUIRE_REDIS(); }
  ratelimit::redis::RedisOptions options(FailurePolicy on_error = FailurePolicy::fail_open) const {
    auto o = ratelimit_test::client_options(*ratelimit_test::shared_redis(), on_error);
    o.pool_size = 1;
    return o;
  }
  ManualClock clock_;
};

TEST_F(AsyncRedis, CallbackGetsRedisDecisionOnAnotherThread) {
  RedisLimiter<ratelimit::Gcra, ManualClock> l({.limit = 10, .period = 1s, .burst = 3}, options(), clock_);
  std::promise<std::pair<Decision, std::thread::id>> p;
  l.allow_async("k", 1, [&](std::exception_ptr e, Decision d) {
    EXPECT_EQ(e, nullptr);
    p.set_value({d, std::this_thread::get_id()});
  });
  const auto [d, thread] = p.get_future().get();
  EXPECT_EQ(d, (Decision{true, 3, 2, 0s, 100ms}));
  EXPECT_NE(thread, std::this_thread::get_id());
  EXPECT_EQ(l.allow("k"), (Decision{true, 3, 1, 0s, 200ms}));  // the same state as sync calls
  std::promise<Decision> peeked;
  l.peek_async("k", [&](std::exception_ptr, Decision x) { peeked.set_value(x); });
  EXPECT_EQ(peeked.get_future().get().remaining, 1);
  std::promise<Decision> refunded;
  l.refund_async("k", 2, [&](std::exception_ptr, Decision x) { refunded.set_value(x); });
  EXPECT_EQ(refunded.get_future().get().remaining, 3);
}

TEST_F(AsyncRedis, TenThousandInFlightCompleteOnceAndCountOnce) {
  auto o = options(FailurePolicy::raise);
  o.max_in_flight = 10'000;
  constexpr std::size_t n = 10'000 / kScale;
  Tally tally(n);  // outlives the limiter, whose end completes the calls a failed wait left
  RedisLimiter<ratelimit::Gcra, ManualClock> l(kBig, o, clock_);
  for (std::size_t i = 0; i < n; ++i) {  // deadlines far off: a loaded machine must not time them out
    l.check_async("k", 1, 30s, [&, i](std::exception_ptr e, CheckResult r) { tally.done(i, r, e != nullptr); });
  }
  ASSERT_TRUE(tally.wait(60s));
  tally.expect_each_exactly_once();
  EXPECT_EQ(tally.admitted(), n);
  EXPECT_EQ(l.peek("k").remaining, kBurst - static_cast<std::int64_t>(n));
  EXPECT_EQ(l.stats().connects, 1u);
}

TEST_F(AsyncRedis, ConcurrentSyncCallersShareOneConnectionsWrites) {
  const auto o = options(FailurePolicy::raise);
  auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(o.connection(), o.limiter());
  RedisLimiter<ratelimit::Gcra, ManualClock> l(kBig, pool, clock_);
  constexpr int threads = 8, per_thread = 400;
  std::vector<std::thread> ts;
  std::atomic<int> admitted{0};
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < per_thread; ++i) admitted += l.allow("k").allowed ? 1 : 0;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(admitted.load(), threads * per_thread);
  EXPECT_EQ(l.peek("k").remaining, kBurst - threads * per_thread);
  EXPECT_EQ(pool->connects(), 1u);
  // Callers joined each other's writes (on a loaded 2-core box still far fewer writes than calls).
  EXPECT_LT(pool->pipeline().writes(), static_cast<std::uint64_t>(threads * per_thread));
}

TEST_F(AsyncRedis, BlockingCallFromACallbackThrowsLogicError) {
  RedisLimiter<ratelimit::Gcra, ManualClock> l(kBig, options(), clock_);
  std::promise<bool> threw;
  l.allow_async("k", 1, [&](std::exception_ptr, Decision) {
    try {
      (void)l.allow("k");
      threw.set_value(false);
    } catch (const std::logic_error&) {
      threw.set_value(true);
    }
  });
  EXPECT_TRUE(threw.get_future().get());
  // An async call from a callback is fine.
  std::promise<Decision> second;
  l.allow_async("k", 1, [&](std::exception_ptr, Decision) {
    l.allow_async("k", 1, [&](std::exception_ptr, Decision d) { second.set_value(d); });
  });
  EXPECT_TRUE(second.get_future().get().allowed);
}

TEST_F(AsyncRedis, InvalidArgumentsThrowWithNothingStarted) {
  auto o = options();
  o.max_key_bytes = 4;
  RedisLimiter<ratelimit::Gcra, ManualClock> l(kBig, o, clock_);
  auto never = [](std::exception_ptr, Decision) { ADD_FAILURE() << "callback of a call never started"; };
  EXPECT_THROW(l.allow_async("too long", 1, never), std::invalid_argument);
  EXPECT_THROW(l.allow_async("k", -1, never), std::invalid_argument);
  EXPECT_THROW(l.allow_async("k", 1, 0ms, never), std::invalid_argument);
  EXPECT_EQ(l.stats().calls, 0u);
}

// A paused server: a call's own deadline fails it (raise: the BackendError through the callback) long
// before command_timeout, and a full queue refuses at once with the failure policy.
TEST_F(AsyncRedis, DeadlineAndFullQueueFailFastWhileRedisIsPaused) {
  ratelimit_test::RedisServer server(ratelimit_test::redis_server_binary());
  auto o = ratelimit_test::client_options(server, FailurePolicy::raise);
  o.pool_size = 1;
  o.max_in_flight = 8;
  o.command_timeout = 1000ms;
  Tally tally(40);  // outlives the limiter, whose end completes the calls a failed wait left
  RedisLimiter<ratelimit::Gcra, ManualClock> l(kBig, o, clock_);
  EXPECT_TRUE(l.allow("k").allowed);  // connected
  auto admin = server.admin();
  admin.command({"CLIENT", "PAUSE", "400"});
  const auto start = std::chrono::steady_clock::now();
  std::promise<std::pair<BackendErrorCause, std::chrono::steady_clock::duration>> timed_out;
  l.allow_async("k", 1, 50ms, [&](std::exception_ptr e, Decision) {
    try {
      std::rethrow_exception(e);
    } catch (const BackendError& be) {
      timed_out.set_value({be.cause(), std::chrono::steady_clock::now() - start});
    }
  });
  for (std::size_t i = 0; i < 40; ++i) {
    l.check_async("k", 1, [&, i](std::exception_ptr e, CheckResult r) { tally.done(i, r, e != nullptr); });
  }
  const auto [cause, took] = timed_out.get_future().get();
  EXPECT_EQ(cause, BackendErrorCause::timeout);
  EXPECT_LT(took, 350ms);
  ASSERT_TRUE(tally.wait(5s));
  tally.expect_each_exactly_once();
  EXPECT_GE(l.stats().refused_calls, 30u);  // 8 fit the queue (the first is the timed-out one)
}

// Sync callers queued behind a driver stuck on a paused server: each call ends by its own deadline
// (command_timeout from its start), not when the driver's read times out nor a round trip after that.
TEST_F(AsyncRedis, SyncWaitsEndByTheirDeadlineWhileRedisIsPaused) {
  ratelimit_test::RedisServer server(ratelimit_test::redis_server_binary());
  auto o = ratelimit_test::client_options(server, FailurePolicy::raise);
  o.pool_size = 1;
  o.command_timeout = 300ms;
  o.breaker.failure_threshold = 0;
  RedisLimiter<ratelimit::Gcra, ManualClock> l(kBig, o, clock_);
  EXPECT_TRUE(l.allow("k").allowed);  // connected
  auto admin = server.admin();
  admin.command({"CLIENT", "PAUSE", "1500"});
  using Steady = std::chrono::steady_clock;
  std::vector<std::pair<BackendErrorCause, Steady::duration>> took(4);
  auto call = [&](std::size_t i) {
    const auto start = Steady::now();
    try {
      (void)l.allow("k");
      took[i] = {BackendErrorCause::io, Steady::now() - start};
      ADD_FAILURE() << "call " << i << " was answered during the pause";
    } catch (const BackendError& e) {
      took[i] = {e.cause(), Steady::now() - start};
    }
  };
  std::vector<std::thread> ts;
  ts.emplace_back(call, 0);  // drives: writes and waits for the reply
  std::this_thread::sleep_for(150ms);
  for (std::size_t i = 1; i < took.size(); ++i) ts.emplace_back(call, i);  // queued behind it
  for (auto& t : ts) t.join();
  for (std::size_t i = 0; i < took.size(); ++i) {
    EXPECT_EQ(took[i].first, BackendErrorCause::timeout) << "call " << i;
    EXPECT_LT(took[i].second, o.command_timeout + 100ms)
        << "call " << i << " took " << std::chrono::duration_cast<std::chrono::milliseconds>(took[i].second).count()
        << " ms";
  }
}

// 10,000 calls, async and sync, over one connection while the fault happens; every call completes
// exactly once and the server's count lies between the decided admissions and those plus the calls
// cut after they were written (they may have run): nothing is counted twice.
class AsyncRedisFault : public testing::Test {
 protected:
  void SetUp() override {
    RATELIMIT_REQUIRE_REDIS();
    server_ = std::make_unique<ratelimit_test::RedisServer>(ratelimit_test::redis_server_binary());
  }
  ratelimit::redis::RedisOptions options() const {
    auto o = ratelimit_test::client_options(*server_, FailurePolicy::fail_closed);
    o.pool_size = 1;
    o.command_timeout = 150ms;
    o.reconnect_backoff_min = 1ms;
    o.reconnect_backoff_max = 20ms;
    return o;
  }

  /// Runs 8,000 async calls and 2 threads x 1,000 sync calls; `fault` runs once a quarter are done.
  template <class Limiter, class Fault>
  void run(Limiter& l, Fault&& fault, std::size_t* admitted, std::size_t* failed) {
    constexpr std::size_t async_calls = 8000 / kScale, sync_calls = 1000 / kScale;
    // Shared with the completions: the limiter outlives this function, a failed wait included.
    const auto tally = std::make_shared<Tally>(async_calls + 2 * sync_calls);
    std::atomic<std::size_t> started{0};
    std::vector<std::thread> sync;
    for (std::size_t t = 0; t < 2; ++t) {
      sync.emplace_back([&, t] {
        for (std::size_t i = 0; i < sync_calls; ++i) {
          const CheckResult r = l.check("k", 1);
          tally->done(async_calls + t * sync_calls + i, r, false);
          if (i % 50 == 0) std::this_thread::sleep_for(1ms);
        }
      });
    }
    for (std::size_t i = 0; i < async_calls; ++i) {
      l.check_async("k", 1, [tally, i](std::exception_ptr e, CheckResult r) { tally->done(i, r, e != nullptr); });
      if (++started == async_calls / 4) fault();
      if (i % (200 / kScale) == 0) std::this_thread::sleep_for(1ms);  // spread the calls over the fault
    }
    for (auto& t : sync) t.join();
    ASSERT_TRUE(tally->wait(60s)) << tally->finished() << " of " << async_calls + 2 * sync_calls << " completed";
    tally->expect_each_exactly_once();
    *admitted = tally->admitted();
    *failed = tally->failed();
  }

  /// The server's count for "k", read by a limiter of the same identity that raises and waits long
  /// (the faulty one's own peek could meet the fault's tail and answer with the failure policy).
  std::int64_t consumed(RedisLimiter<ratelimit::Gcra, ManualClock>& l) {
    return kBurst - verifier(l).peek("k").remaining;
  }
  RedisLimiter<ratelimit::Gcra, ManualClock>& verifier(RedisLimiter<ratelimit::Gcra, ManualClock>& l) {
    if (!verifier_) {
      auto o = l.options();
      o.on_error = FailurePolicy::raise;
      o.command_timeout = 10s;
      verifier_ = std::make_unique<RedisLimiter<ratelimit::Gcra, ManualClock>>(kBig, o, clock_);
    }
    return *verifier_;
  }
  std::unique_ptr<RedisLimiter<ratelimit::Gcra, ManualClock>> verifier_;

  std::unique_ptr<ratelimit_test::RedisServer> server_;
  ManualClock clock_;
};

TEST_F(AsyncRedisFault, SigkillAndRestartMidFlight) {
  RedisLimiter<ratelimit::Gcra, ManualClock> l(kBig, options(), clock_);
  std::size_t admitted = 0, failed = 0;
  std::size_t admitted_after = 0;
  run(
      l,
      [&] {
        server_->kill_hard();
        std::this_thread::sleep_for(20ms);
        server_->start();
      },
      &admitted, &failed);
  EXPECT_GT(failed, 0u);  // (how many were admitted depends on the machine's speed; the count is below)
  // The state before the kill is gone; what was admitted since lands exactly once.
  const std::int64_t before = consumed(l);
  for (int i = 0; i < 100; ++i) admitted_after += verifier(l).allow("k").allowed ? 1u : 0u;
  EXPECT_EQ(admitted_after, 100u);
  EXPECT_EQ(consumed(l), before + 100);
}

TEST_F(AsyncRedisFault, ClientPauseMidFlight) {
  RedisLimiter<ratelimit::Gcra, ManualClock> l(kBig, options(), clock_);
  std::size_t admitted = 0, failed = 0;
  auto admin = server_->admin();
  auto paused_until = std::chrono::steady_clock::now();
  run(
      l,
      [&] {
        admin.command({"CLIENT", "PAUSE", "400"});
        paused_until = std::chrono::steady_clock::now() + 450ms;
      },
      &admitted, &failed);
  EXPECT_GT(failed, 0u);
  std::this_thread::sleep_until(paused_until);
  const std::int64_t c = consumed(l);
  EXPECT_GE(c, static_cast<std::int64_t>(admitted));
  EXPECT_LE(c, static_cast<std::int64_t>(admitted + failed));
}

TEST_F(AsyncRedisFault, ScriptFlushMidFlightLosesNothing) {
  auto o = options();
  o.command_timeout = 30s;   // only the flush may disturb the calls, not their deadlines on a loaded box
  o.max_in_flight = 20'000;  // nor a full queue (a slow server lets the 8,000 async calls pile up)
  RedisLimiter<ratelimit::Gcra, ManualClock> l(kBig, o, clock_);
  std::size_t admitted = 0, failed = 0;
  auto admin = server_->admin();
  run(
      l,
      [&] {
        for (int i = 0; i < 5; ++i) {
          admin.command({"SCRIPT", "FLUSH"});
          std::this_thread::sleep_for(2ms);
        }
      },
      &admitted, &failed);
  // NOSCRIPT never ran: each gets EVAL once.
  EXPECT_EQ(failed, 0u) << l.stats().timeouts << " timeouts, " << l.stats().refused_calls << " refused";
  EXPECT_EQ(consumed(l), static_cast<std::int64_t>(admitted));
  EXPECT_EQ(admitted, 10'000u / kScale);
  EXPECT_GT(l.stats().script_reloads, 0u);
}

// Destroying the limiter (it owns its pool) with calls queued and in flight completes every one of
// them, with the failure policy, before the destructor returns; none is sent afterwards.
TEST_F(AsyncRedisFault, LimiterDestroyedWithCallsInFlight) {
  constexpr std::size_t n = 10'000 / kScale;
  Tally tally(n);
  auto admin = server_->admin();
  auto o = options();
  o.command_timeout = 2000ms;
  std::size_t at_destruction = 0;
  {
    RedisLimiter<ratelimit::Gcra, ManualClock> l(kBig, o, clock_);
    EXPECT_TRUE(l.allow("k").allowed);  // connected; the next ones queue behind a paused server
    admin.command({"CLIENT", "PAUSE", "300"});
    for (std::size_t i = 0; i < n; ++i) {
      l.check_async("k", 1, [&, i](std::exception_ptr e, CheckResult r) { tally.done(i, r, e != nullptr); });
    }
    at_destruction = tally.finished();
  }
  EXPECT_EQ(tally.finished(), n) << at_destruction << " had completed before the destructor";
  tally.expect_each_exactly_once();
  EXPECT_EQ(tally.failed(), n - tally.admitted());
  // The server sees at most the calls written before the destruction (one write: all or none).
  std::this_thread::sleep_for(350ms);  // the pause ends; anything sent has run
  RedisLimiter<ratelimit::Gcra, ManualClock> again(kBig, o, clock_);
  const std::int64_t c = kBurst - again.peek("k").remaining;
  EXPECT_GE(c, 1 + static_cast<std::int64_t>(tally.admitted()));
  EXPECT_LE(c, 1 + static_cast<std::int64_t>(n));
}

// Redis Cluster: async calls on keys of every master complete once each, through the router's worker,
// and land exactly once.
TEST(AsyncRedisCluster, CallsOnEveryMasterCompleteOnce) {
  RATELIMIT_REQUIRE_CLUSTER();
  ManualClock clock;
  auto o = ratelimit_test::cluster_client_options(*ratelimit_test::shared_cluster());
  o.time_source = ratelimit::redis::TimeSource::client;
  o.on_error = FailurePolicy::raise;
  constexpr std::size_t keys = 30, per_key = 20;
  Tally tally(keys * per_key);  // outlives the limiter, whose end completes the calls a failed wait left
  RedisLimiter<ratelimit::Gcra, ManualClock> l(kBig, o, clock);
  // One call at a time: each batch of the router's worker then goes to one node, through that node's
  // pipelined connection (this once threw std::logic_error on the worker thread and ended the process).
  for (int i = 0; i < 3; ++i) {
    auto one = std::make_shared<std::promise<CheckResult>>();  // shared: a failed wait returns before its call ends
    l.check_async("single" + std::to_string(i), 1, [one](std::exception_ptr e, CheckResult r) {
      EXPECT_EQ(e, nullptr);
      one->set_value(r);
    });
    auto done = one->get_future();
    ASSERT_EQ(done.wait_for(10s), std::future_status::ready) << i;
    EXPECT_TRUE(done.get().decision.allowed) << i;
  }
  for (std::size_t i = 0; i < keys * per_key; ++i) {
    l.check_async("k" + std::to_string(i % keys), 1,
                  [&, i](std::exception_ptr e, CheckResult r) { tally.done(i, r, e != nullptr); });
  }
  ASSERT_TRUE(tally.wait(10s));
  tally.expect_each_exactly_once();
  EXPECT_EQ(tally.admitted(), keys * per_key);
  for (std::size_t k = 0; k < keys; ++k) {
    EXPECT_EQ(l.peek("k" + std::to_string(k)).remaining, kBurst - static_cast<std::int64_t>(per_key));
  }
}

// A child process must not use its parent's limiter (it throws std::logic_error, touching nothing the
// parent owns); a limiter it makes itself works; the parent's keeps working.
TEST(AsyncRedisFork, ChildMakesItsOwnLimiter) {
  RATELIMIT_REQUIRE_REDIS();
  ManualClock clock;
  auto o = ratelimit_test::client_options(*ratelimit_test::shared_redis(), FailurePolicy::raise);
  auto parent = std::make_unique<RedisLimiter<ratelimit::Gcra, ManualClock>>(kBig, o, clock);
  std::promise<bool> ok;
  parent->allow_async("k", 1, [&](std::exception_ptr, Decision d) { ok.set_value(d.allowed); });
  ASSERT_TRUE(ok.get_future().get());  // the parent has a connection and an I/O thread
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code = 0;
    try {
      (void)parent->allow("k");
      code = 1;
    } catch (const std::logic_error&) {
    }
    try {
      parent->allow_async("k", 1, [](std::exception_ptr, Decision) {});
      code = 2;
    } catch (const std::logic_error&) {
    }
#ifndef RATELIMIT_TEST_TSAN  // TSan cannot start threads in a child of a threaded process: a connect needs one
    try {
      RedisLimiter<ratelimit::Gcra, ManualClock> own(kBig, o, clock);
      if (!own.allow("k").allowed) code = 3;
      std::promise<bool> own_ok;
      own.allow_async("k", 1, [&](std::exception_ptr, Decision d) { own_ok.set_value(d.allowed); });
      if (!own_ok.get_future().get()) code = 4;
    } catch (...) {
      code = 5;
    }
#endif
    parent.reset();  // destroying the parent's copy does not wait for the parent's threads
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(parent->allow("k").allowed);
#ifndef RATELIMIT_TEST_TSAN
  EXPECT_EQ(parent->peek("k").remaining, kBurst - 4);  // parent 2, child 2
#else
  EXPECT_EQ(parent->peek("k").remaining, kBurst - 2);  // parent 2
#endif
}

}  // namespace
