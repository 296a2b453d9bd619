// RedisConcurrencyLimiter's on_lost callbacks of one renewal round against releases
// (include/ratelimit/concurrency/README.md "Concurrency limits", Redis): a callback never runs after its permit's
// release, a release waits only for its own permit's running callback, a release on an async completion's I/O thread
// never waits, and a child process may destroy a limiter its parent made.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include <ratelimit/redis.hpp>

#include "../../support/join_at_exit.hpp"
#include "redis_server.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::Permit;
using ratelimit::PermitResult;
using ratelimit::redis::RedisConcurrencyLimiter;
using ratelimit::redis::RedisConcurrencyOptions;
using ratelimit_test::JoinAtExit;

ratelimit::redis::RedisOptions on_lost_client_options() {
  return ratelimit_test::client_options(*ratelimit_test::shared_redis());
}

RedisConcurrencyOptions on_lost_manual_renewal() {
  RedisConcurrencyOptions o;
  o.permits = 10;
  o.expiry = 30s;
  o.renew = false;  // the tests renew by hand
  return o;
}

// A flag one thread sets and another waits for, with a bound.
class OnLostSignal {
 public:
  void set() {
    {
      std::lock_guard lock(mutex_);
      set_ = true;
    }
    cv_.notify_all();
  }
  bool wait_for(std::chrono::milliseconds bound) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, bound, [this] { return set_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool set_ = false;
};

// Permits A and B are lost in the same round; whichever callback runs first releases the other permit, whose
// callback must then not run.
TEST(RedisConcurrencyOnLost, NeverRunsAfterItsPermitWasReleasedByAnotherCallback) {
  RATELIMIT_REQUIRE_REDIS();
  RedisConcurrencyLimiter limiter(on_lost_manual_renewal(), on_lost_client_options());
  auto admin = ratelimit_test::shared_redis()->admin();
  Permit a;
  Permit b;
  int calls = 0;
  PermitResult ra = limiter.try_acquire("k", 1, [&] {
    ++calls;
    b.release();
  });
  PermitResult rb = limiter.try_acquire("k", 1, [&] {
    ++calls;
    a.release();
  });
  ASSERT_TRUE(ra);
  ASSERT_TRUE(rb);
  a = std::move(ra.permit);
  b = std::move(rb.permit);
  (void)admin.command({"DEL", limiter.redis_key("k")});
  EXPECT_EQ(limiter.renew_now(), 2u);
  EXPECT_EQ(calls, 1) << "an on_lost ran after its permit had been released";
  EXPECT_EQ(limiter.held(), 1u);  // the permit whose callback ran
  a.release();
  b.release();
  EXPECT_EQ(limiter.held(), 0u);
}

// Lost in the same round, A's callback waits for another thread's release of B: that release must not wait for
// the rest of the round (B's own callback has not started).
TEST(RedisConcurrencyOnLost, ReleaseWaitsOnlyForItsOwnPermitsCallback) {
  RATELIMIT_REQUIRE_REDIS();
  RedisConcurrencyLimiter limiter(on_lost_manual_renewal(), on_lost_client_options());
  auto admin = ratelimit_test::shared_redis()->admin();
  Permit a;
  Permit b;
  std::atomic<int> first{0};
  std::atomic<bool> released_in_time{false};
  std::thread releaser;
  auto on_lost = [&](Permit* other) {
    return [&, other] {
      if (first.fetch_add(1) != 0) return;
      auto done = std::make_shared<OnLostSignal>();
      releaser = std::thread([other, done] {
        other->release();
        done->set();
      });
      released_in_time.store(done->wait_for(2s));
    };
  };
  PermitResult ra = limiter.try_acquire("k", 1, on_lost(&b));
  PermitResult rb = limiter.try_acquire("k", 1, on_lost(&a));
  ASSERT_TRUE(ra);
  ASSERT_TRUE(rb);
  a = std::move(ra.permit);
  b = std::move(rb.permit);
  (void)admin.command({"DEL", limiter.redis_key("k")});
  (void)limiter.renew_now();
  if (releaser.joinable()) releaser.join();
  EXPECT_TRUE(released_in_time.load()) << "a release waited for another permit's on_lost";
  EXPECT_EQ(first.load(), 1) << "the released permit's on_lost ran";
  a.release();
  b.release();
  EXPECT_EQ(limiter.held(), 0u);
}

// A release on an async completion's I/O thread while its permit's on_lost runs on another thread returns at
// once (the I/O thread must never wait); the permit is released once the callback has returned.
TEST(RedisConcurrencyOnLost, ReleaseOnTheIoThreadNeverWaitsForOnLost) {
  RATELIMIT_REQUIRE_REDIS();
  // Outlive the pool, whose end completes a call still in flight (its callback sets `released`).
  OnLostSignal entered;
  OnLostSignal released;
  std::atomic<bool> released_during_on_lost{false};
  const auto options = on_lost_client_options();
  auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(options.connection(), options.limiter());
  RedisConcurrencyLimiter limiter(on_lost_manual_renewal(), pool);
  ratelimit::redis::RedisLimiter<ratelimit::Gcra> async_limiter(
      ratelimit::Gcra{.limit = 1000, .period = 1s, .burst = 1000}, pool, options.limiter());
  auto admin = ratelimit_test::shared_redis()->admin();
  auto held = std::make_shared<PermitResult>();
  *held = limiter.try_acquire("k", 1, [&] {
    entered.set();
    released_during_on_lost.store(released.wait_for(2s));
  });
  ASSERT_TRUE(*held);
  (void)admin.command({"DEL", limiter.redis_key("k")});
  std::thread renewer([&] { (void)limiter.renew_now(); });
  // On the way out on_lost waits no more for `released` (at most 2 s otherwise).
  const JoinAtExit join_renewer(renewer, [&] { released.set(); });
  ASSERT_TRUE(entered.wait_for(5s));
  async_limiter.check_async("x", 1, [&, held](std::exception_ptr, ratelimit::CheckResult) {
    held->permit.release();
    released.set();
  });
  renewer.join();
  EXPECT_TRUE(released_during_on_lost.load()) << "the I/O thread's release waited for on_lost";
  EXPECT_TRUE(released.wait_for(5s));
  EXPECT_EQ(limiter.held(), 0u) << "the release asked for on the I/O thread was not done";
}

// The renewal thread exists only in the parent: a child destroying the parent's limiter must not join it.
TEST(RedisConcurrencyOnLost, ChildMayDestroyTheParentsLimiter) {
  RATELIMIT_REQUIRE_REDIS();
  RedisConcurrencyOptions o;
  o.expiry = 1s;  // renewed in the background
  auto limiter = std::make_unique<RedisConcurrencyLimiter>(o, on_lost_client_options());
  PermitResult r = limiter->try_acquire("k");
  ASSERT_TRUE(r);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(5);  // a hang ends the child with SIGALRM
    r.permit = Permit{};
    limiter.reset();
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child hung or crashed destroying the limiter (signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0)
      << ")";
  r.permit.release();
}

}  // namespace
