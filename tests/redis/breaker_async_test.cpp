// The circuit breaker gates async calls as it gates sync ones (include/ratelimit/redis/README.md "Circuit breaker"): a
// stalled server (SIGSTOP) opens it after a few failed async calls; while open, async calls complete at once, without
// I/O, with the failure policy, on the I/O thread, each exactly once; one probe per open period; after SIGCONT they are
// back on Redis within about one open period plus a round trip, and nothing is counted twice.
#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using ratelimit::CheckResult;
using ratelimit::Outcome;
using ratelimit::redis::RedisLimiter;

/// The outcomes of `n` async calls started together: how often each completed, how long it took, on which
/// thread. `wait` returns when every call completed once (or 2 s passed).
class Burst {
 public:
  explicit Burst(std::size_t n) : s_(std::make_shared<State>(n)) {}

  template <class L>
  void start(L& l, std::chrono::milliseconds timeout) {
    for (std::size_t i = 0; i < s_->counts.size(); ++i) {
      const auto t0 = Steady::now();
      // The state is shared: after a failed `wait` the burst goes, and the limiter completes the call later.
      l.check_async("k", 1, timeout, [s = s_, i, t0](std::exception_ptr, CheckResult r) {
        const std::lock_guard lock(s->mutex);
        s->times[i] = Steady::now() - t0;
        s->threads[i] = std::this_thread::get_id();
        s->outcomes[i] = r.outcome;
        ++s->counts[i];
        if (++s->done == s->counts.size()) s->cv.notify_all();
      });
    }
  }
  bool wait() {
    std::unique_lock lock(s_->mutex);
    return s_->cv.wait_for(lock, 2s, [this] { return s_->done >= s_->counts.size(); });
  }
  // After `wait`.
  [[nodiscard]] int fast(Steady::duration bound) const {
    int n = 0;
    for (const auto t : s_->times) n += t < bound ? 1 : 0;
    return n;
  }
  [[nodiscard]] int decided() const {
    int n = 0;
    for (const Outcome o : s_->outcomes) n += o == Outcome::decided ? 1 : 0;
    return n;
  }
  [[nodiscard]] bool each_once() const {
    for (const int c : s_->counts) {
      if (c != 1) return false;
    }
    return true;
  }
  [[nodiscard]] bool none_on(std::thread::id caller) const {
    for (const auto id : s_->threads) {
      if (id == caller) return false;
    }
    return true;
  }

 private:
  struct State {
    explicit State(std::size_t n) : times(n), counts(n), threads(n), outcomes(n) {}
    std::mutex mutex;
    std::condition_variable cv;
    std::size_t done = 0;
    std::vector<Steady::duration> times;
    std::vector<int> counts;
    std::vector<std::thread::id> threads;
    std::vector<Outcome> outcomes;
  };
  std::shared_ptr<State> s_;
};

/// SIGSTOP, and waits until the kernel shows the process stopped (a server not yet stopped would still
/// answer the calls meant to fail). False after 1 s.
bool stop(pid_t pid) {
  if (::kill(pid, SIGSTOP) != 0) return false;
  const auto deadline = Steady::now() + 1s;
  while (Steady::now() < deadline) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string field;
    for (int i = 0; i < 3 && stat >> field; ++i) {
    }
    if (field == "T" || field == "t") return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

using BreakerAsync = ratelimit_test::OwnRedisServerTest;

TEST_F(BreakerAsync, StallOpensItShortCircuitsAtOnceOnTheIoThreadOneProbeAndBackOnRedisAfterSigcont) {
  ratelimit::redis::RedisOptions o = server_->options();
  o.key_prefix = ratelimit_test::unique_prefix();
  o.command_timeout = 100ms;
  o.connect_timeout = 100ms;
  o.pool_size = 1;
  o.breaker.failure_threshold = 3;
  o.breaker.open_min = 200ms;
  o.breaker.open_max = 200ms;
  o.breaker.jitter_percent = 0;
  constexpr std::int64_t kLimit = 1000000;
  RedisLimiter l(ratelimit::FixedWindow{.limit = kLimit, .window = 1h}, o);
  const auto caller = std::this_thread::get_id();
  int admitted = 0;  // decided by Redis, each consumed one unit there
  {
    Burst warm(4);
    warm.start(l, 500ms);
    ASSERT_TRUE(warm.wait());
    ASSERT_EQ(warm.decided(), 4);
    admitted += 4;
  }
  ASSERT_TRUE(stop(server_->pid()));
  {  // the threshold of failed async calls opens it
    Burst failing(3);
    failing.start(l, 50ms);
    ASSERT_TRUE(failing.wait());
    EXPECT_EQ(failing.decided(), 0);
  }
  ASSERT_EQ(l.stats().breaker_opens, 1u) << "async failures did not open the breaker";
  const auto opened_at = Steady::now();
  {  // open: answered at once (the deadline is 300 ms), by the failure policy, on the I/O thread, once each
    const auto before = l.stats();
    Burst open(100);
    open.start(l, 300ms);
    ASSERT_TRUE(open.wait());
    EXPECT_TRUE(open.each_once());
    EXPECT_TRUE(open.none_on(caller)) << "a completion ran on the calling thread";
    EXPECT_EQ(open.fast(50ms), 100) << "short-circuited calls waited";
    EXPECT_EQ(open.decided(), 0);
    EXPECT_EQ(l.stats().short_circuited - before.short_circuited, 100u);
  }
  std::this_thread::sleep_until(opened_at + 220ms);
  {  // half-open: one probe goes (and fails: still stopped), the others are answered at once
    const auto before = l.stats();
    Burst half(20);
    half.start(l, 50ms);
    ASSERT_TRUE(half.wait());
    EXPECT_TRUE(half.each_once());
    EXPECT_EQ(l.stats().breaker_probes - before.breaker_probes, 1u);
    EXPECT_EQ(l.stats().short_circuited - before.short_circuited, 19u);
    EXPECT_EQ(half.fast(40ms), 19);
  }
  ASSERT_EQ(::kill(server_->pid(), SIGCONT), 0);
  const auto resumed = Steady::now();
  bool back = false;
  while (!back && Steady::now() - resumed < 1500ms) {
    Burst one(1);
    one.start(l, 100ms);
    ASSERT_TRUE(one.wait());
    back = one.decided() == 1;
    admitted += one.decided();
    if (!back) std::this_thread::sleep_for(2ms);
  }
  const auto recovery = std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - resumed);
  ASSERT_TRUE(back);
  EXPECT_LT(recovery, 200ms + 250ms) << "not back within one open period and a round trip";
  // Nothing counted twice, nothing short-circuited reached the server: Redis counted every decided call
  // and at most the failed calls that were written (they may have run after SIGCONT).
  const CheckResult last = l.check("k");
  ASSERT_EQ(last.outcome, Outcome::decided);
  const auto s = l.stats();
  const std::int64_t on_server = kLimit - last.decision.remaining - 1;
  EXPECT_GE(on_server, admitted);
  EXPECT_LE(on_server, admitted + static_cast<std::int64_t>(s.failures - s.short_circuited));
  std::printf(
      "async: back on Redis %lld ms after SIGCONT; %lld on the server, %d decided, %llu failures (%llu "
      "short-circuited)\n",
      static_cast<long long>(recovery.count()), static_cast<long long>(on_server), admitted,
      static_cast<unsigned long long>(s.failures), static_cast<unsigned long long>(s.short_circuited));
}

}  // namespace
