// Sync callers waiting on one pipelined connection (include/ratelimit/redis/README.md "Redis engine"): a waiter
// yields, then parks on its futex, and is woken only when parked. Many threads on ONE connection with short
// deadlines while the server is stopped now and then (SIGSTOP / SIGCONT), so that deadlines fire while waiters
// are parked and posts race with their timeouts: every call ends by its deadline, gets exactly one outcome (a
// reply or an error), each reply is its own command's, and nothing runs twice. A lost wake-up shows as a call
// that ends at its deadline (or never: a watchdog aborts) although its reply came long before.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "../support/sanitizers.hpp"
#include "test_support.hpp"

namespace {
namespace waiter_park {

using namespace std::chrono_literals;
using ratelimit::ManualClock;
using ratelimit::redis::engine::Connection;
using ratelimit::redis::engine::Pipeline;
using ratelimit::redis::engine::RouteCall;
using Steady = std::chrono::steady_clock;

constexpr auto kSlack = ratelimit_test::kSchedulingSlack;
constexpr int kThreads = 32;
// INCR after a short loop: a reply takes longer than a waiter's yields, so that most waiters park.
constexpr std::string_view kIncr = "for i = 1, 300 do end return redis.call('INCR', KEYS[1])";

long long ms(Steady::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

/// Stops the server for 5 to 30 ms every 10 to 40 ms while it lives; the server runs again when it goes.
class Stalls {
 public:
  explicit Stalls(pid_t pid)
      : thread_([this, pid] {
          std::mt19937 rng(7);
          while (!stop_.load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10 + rng() % 31));
            ::kill(pid, SIGSTOP);
            stalls_.fetch_add(1);
            std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 26));
            ::kill(pid, SIGCONT);
          }
        }),
        pid_(pid) {}
  ~Stalls() {
    stop_.store(true);
    thread_.join();
    ::kill(pid_, SIGCONT);
  }
  Stalls(const Stalls&) = delete;
  Stalls& operator=(const Stalls&) = delete;
  [[nodiscard]] int stalls() const { return stalls_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> stalls_{0};
  std::thread thread_;
  pid_t pid_;
};

/// Runs `body(t)` on `kThreads` threads; a thread not back within `bound` is a hang: the test aborts (a
/// waiter that was never woken would otherwise hold the test forever).
template <class Body>
void run_threads(Body body, Steady::duration bound) {
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      body(t);
      done.fetch_add(1);
    });
  }
  const auto until = Steady::now() + bound;
  while (done.load() < kThreads && Steady::now() < until) std::this_thread::sleep_for(5ms);
  if (done.load() < kThreads) {
    std::fprintf(stderr, "PipelineWaiter: %d of %d threads still waiting %lld ms after the end: a lost wake-up\n",
                 kThreads - done.load(), kThreads, ms(bound));
    std::abort();
  }
  for (auto& th : threads) th.join();
}

/// What the callers of one run saw.
struct Tally {
  std::vector<std::vector<long long>> values = std::vector<std::vector<long long>>(kThreads);  // INCR replies
  std::atomic<long long> calls{0}, replies{0}, errors_sent{0}, errors_unsent{0}, timeouts{0}, late{0}, bad{0};
  std::atomic<long long> worst_over_ms{-1000000};  // the latest a call ended after its deadline
  std::atomic<long long> worst_reply_ms{0};        // the longest a call that got its reply took

  /// Every reply distinct (each INCR ran once and its reply went to its own caller); returns the replies.
  std::vector<long long> all_values() const {
    std::vector<long long> all;
    for (const auto& v : values) all.insert(all.end(), v.begin(), v.end());
    std::sort(all.begin(), all.end());
    return all;
  }
};

void note_max(std::atomic<long long>& a, long long v) {
  long long cur = a.load();
  while (v > cur && !a.compare_exchange_weak(cur, v)) {
  }
}

/// One caller's batch of 1 to 3 `kIncr` on `p`, all ending by `budget` from now; the batch's waiter lives on
/// the heap and goes right after its wait (a post touching it later is a use-after-free under ASan).
void incr_batch(Pipeline& p, std::mt19937& rng, Steady::duration budget, int t, Tally& tally) {
  const std::size_t n = 1 + rng() % 3;
  std::vector<RouteCall> calls(n);
  const auto t0 = Steady::now();
  const auto deadline = t0 + budget;
  for (RouteCall& c : calls) {
    c.args = {"EVAL", kIncr, "1", "counter"};
    c.deadline = deadline;
  }
  {
    auto batch = std::make_unique<ratelimit::redis::engine::detail::SyncCalls>();
    if (p.start(std::span<RouteCall>(calls), *batch, rng() % 4 != 0)) p.wait(*batch);
  }
  const auto end = Steady::now();
  note_max(tally.worst_over_ms, ms(end - deadline));
  if (end > deadline + kSlack) tally.late.fetch_add(1);
  for (RouteCall& c : calls) {
    tally.calls.fetch_add(1);
    if (c.reply != nullptr && !c.error) {
      if (c.reply->type != REDIS_REPLY_INTEGER) {
        tally.bad.fetch_add(1);
        continue;
      }
      tally.replies.fetch_add(1);
      tally.values[static_cast<std::size_t>(t)].push_back(c.reply->integer);
      note_max(tally.worst_reply_ms, ms(end - t0));
    } else if (c.reply == nullptr && c.error) {
      (c.sent ? tally.errors_sent : tally.errors_unsent).fetch_add(1);
      if (c.error->cause() == ratelimit::BackendErrorCause::timeout) tally.timeouts.fetch_add(1);
    } else {
      tally.bad.fetch_add(1);  // both or neither
    }
  }
}

class PipelineWaiter : public ratelimit_test::OwnRedisServerTest {
 protected:
  /// A pipeline on this test's server: `command_timeout` bounds each call and a silent connection.
  std::unique_ptr<Pipeline> pipeline(std::chrono::milliseconds command_timeout) {
    ratelimit::redis::RedisOptions o = server_->options();
    o.command_timeout = command_timeout;
    o.connect_timeout = 2000ms;
    return std::make_unique<Pipeline>([o] { return std::make_unique<Connection>(Connection::open(o)); }, [] {},
                                      command_timeout, 100000);
  }
  /// The server's count of INCRs run.
  long long counter() {
    auto admin = server_->admin();
    const auto r = admin.command({"GET", "counter"});
    return r->type == REDIS_REPLY_STRING ? std::stoll(std::string(ratelimit::redis::engine::text(*r))) : 0;
  }
  /// Each reply distinct, and the server ran between the replied calls and those plus the ones written.
  void expect_consistent(const Tally& tally) {
    EXPECT_EQ(tally.bad.load(), 0) << "calls with both or neither of a reply and an error, or not an integer";
    const std::vector<long long> all = tally.all_values();
    EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "two callers got the same INCR reply";
    const long long ran = counter();
    EXPECT_GE(ran, tally.replies.load());
    EXPECT_LE(ran, tally.replies.load() + tally.errors_sent.load()) << "a command ran that no caller wrote";
    if (!all.empty()) {
      EXPECT_LE(all.back(), ran);
    }
  }
};

// Deadlines of 1 to 20 ms on one connection while the server stops for 5 to 30 ms at a time: timeouts race with
// replies, hand-offs of the connection, and the posts that wake parked waiters.
TEST_F(PipelineWaiter, ShortDeadlinesOnOneConnectionWhileTheServerStallsEndInTimeExactlyOnce) {
  auto p = pipeline(50ms);
  Tally tally;
  {
    Stalls stalls(server_->pid());
    const auto stop_at = Steady::now() + 2s;
    run_threads(
        [&](int t) {
          std::mt19937 rng(static_cast<unsigned>(t) + 1);
          while (Steady::now() < stop_at) incr_batch(*p, rng, std::chrono::milliseconds(1 + rng() % 20), t, tally);
        },
        2s + 30s);
    EXPECT_GT(stalls.stalls(), 10);
  }
  std::printf(
      "%lld calls: %lld replies, %lld failed written, %lld unsent (%lld timeouts); latest end %lld ms past "
      "a deadline\n",
      tally.calls.load(), tally.replies.load(), tally.errors_sent.load(), tally.errors_unsent.load(),
      tally.timeouts.load(), tally.worst_over_ms.load());
  EXPECT_EQ(tally.late.load(), 0) << "calls ended more than " << ms(kSlack) << " ms past their deadline (latest "
                                  << tally.worst_over_ms.load() << " ms)";
  EXPECT_GT(tally.replies.load(), 0);
  EXPECT_GT(tally.timeouts.load(), 0) << "no deadline fired: the test raced nothing";
  p.reset();
  expect_consistent(tally);
}

// Without stalls and with 3 s deadlines every call is answered well before its deadline: a waiter whose reply
// came but who was not woken would sleep until its deadline (or, its calls done, forever).
TEST_F(PipelineWaiter, AnsweredCallersAreWokenLongBeforeTheirDeadline) {
  auto p = pipeline(3000ms);
  Tally tally;
  const auto stop_at = Steady::now() + 1500ms;
  run_threads(
      [&](int t) {
        std::mt19937 rng(static_cast<unsigned>(t) + 100);
        while (Steady::now() < stop_at) incr_batch(*p, rng, 3000ms, t, tally);
      },
      1500ms + 30s);
  std::printf("%lld calls answered, the slowest in %lld ms\n", tally.replies.load(), tally.worst_reply_ms.load());
  EXPECT_EQ(tally.replies.load(), tally.calls.load()) << "calls failed with the server running";
  EXPECT_LT(tally.worst_reply_ms.load(), 1500) << "a caller answered slept towards its 3 s deadline: a lost wake-up";
  p.reset();
  expect_consistent(tally);
}

// The same through the limiter: sync checks of 32 threads on one connection (pool_size 1), 10 ms command_timeout,
// stalls; each check ends by its deadline, is decided or answered by the failure policy exactly once (the stats
// agree), and Redis counted between the decided checks and those plus the failed ones.
TEST_F(PipelineWaiter, SyncChecksOfManyThreadsOnOneConnectionEndByTheirDeadlineAndCountOnce) {
  ratelimit::redis::RedisOptions o = ratelimit_test::client_options(*server_, ratelimit::FailurePolicy::fail_open);
  o.pool_size = 1;
  o.command_timeout = 10ms;
  o.connect_timeout = 2000ms;
  o.breaker.failure_threshold = 0;  // every check goes to the connection
  constexpr std::int64_t kLimit = 1'000'000'000;
  ManualClock clock;
  ratelimit::redis::RedisLimiter<ratelimit::FixedWindow, ManualClock> l(
      ratelimit::FixedWindow{.limit = kLimit, .window = 1h}, o, clock);
  std::atomic<long long> decided{0}, failed{0}, late{0}, worst{0};
  {
    Stalls stalls(server_->pid());
    const auto stop_at = Steady::now() + 2s;
    run_threads(
        [&](int) {
          while (Steady::now() < stop_at) {
            const auto t0 = Steady::now();
            const ratelimit::CheckResult r = l.check("k");
            const auto took = Steady::now() - t0;
            note_max(worst, ms(took));
            if (took > 10ms + kSlack) late.fetch_add(1);
            (r.failed() ? failed : decided).fetch_add(1);
            if (!r.failed()) {
              EXPECT_TRUE(r.decision.allowed);
            }
          }
        },
        2s + 30s);
  }
  std::printf("%lld checks decided, %lld by the failure policy; slowest %lld ms\n", decided.load(), failed.load(),
              worst.load());
  EXPECT_EQ(late.load(), 0) << "checks ended more than " << ms(kSlack) << " ms past their 10 ms deadline (slowest "
                            << worst.load() << " ms)";
  EXPECT_GT(decided.load(), 0);
  EXPECT_GT(failed.load(), 0) << "no deadline fired: the test raced nothing";
  const auto stats = l.stats();
  EXPECT_EQ(stats.calls, static_cast<std::uint64_t>(decided.load() + failed.load()));
  EXPECT_EQ(stats.failures, static_cast<std::uint64_t>(failed.load()));
  // The server is running again: one more check tells how many Redis counted.
  ratelimit::CheckResult last;
  long long retries = 0;  // failed checks here (each may have run)
  for (; retries < 100; ++retries) {
    last = l.check("k");
    if (!last.failed()) break;
  }
  ASSERT_FALSE(last.failed());
  const std::int64_t counted = kLimit - last.decision.remaining - 1;
  EXPECT_GE(counted, decided.load());
  EXPECT_LE(counted, decided.load() + failed.load() + retries);
}

}  // namespace waiter_park
}  // namespace
