// RedisConcurrencyLimiter (include/ratelimit/concurrency/README.md "Concurrency limits", Redis): never more than
// `permits` units in flight across processes, a killed holder's permits back within expiry + 1 s, a release after
// expiry frees nothing of anyone else's, renewal keeps long permits and reports a lost one at once.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ratelimit/redis.hpp>

#include "redis_server.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::PermitResult;
using ratelimit::PermitStatus;
using ratelimit::redis::RedisConcurrencyLimiter;
using ratelimit::redis::RedisConcurrencyOptions;

RedisConcurrencyOptions concurrency(std::int64_t permits, std::chrono::milliseconds expiry = 10s) {
  RedisConcurrencyOptions o;
  o.permits = permits;
  o.expiry = expiry;
  return o;
}

ratelimit::redis::RedisOptions server_options(const std::string& prefix) {
  ratelimit::redis::RedisOptions o = ratelimit_test::client_options(*ratelimit_test::shared_redis());
  o.key_prefix = prefix;
  return o;
}

long long zcard(ratelimit::redis::engine::Connection& admin, const std::string& key) {
  const auto r = admin.command({"ZCARD", key});
  return r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
}

TEST(RedisConcurrencyLimiterBasics, HoldsAtMostPermitsAndReleasesIdempotently) {
  RATELIMIT_REQUIRE_REDIS();
  const std::string prefix = ratelimit_test::unique_prefix();
  RedisConcurrencyLimiter limiter(concurrency(3), server_options(prefix));
  auto admin = ratelimit_test::shared_redis()->admin();
  PermitResult a = limiter.try_acquire("k", 2);
  ASSERT_TRUE(a) << ratelimit::to_string(a.status);
  EXPECT_EQ(a.in_flight, 2);
  PermitResult b = limiter.try_acquire("k");
  ASSERT_TRUE(b);
  const PermitResult c = limiter.try_acquire("k");
  EXPECT_EQ(c.status, PermitStatus::busy);
  EXPECT_EQ(c.in_flight, 3);
  EXPECT_EQ(zcard(admin, limiter.redis_key("k")), 3);
  EXPECT_EQ(limiter.in_flight("k"), 3);
  EXPECT_GT(ratelimit_test::pttl(admin, limiter.redis_key("k")), 0);  // every write keeps a TTL
  EXPECT_TRUE(a.permit.valid());
  a.permit.release();
  a.permit.release();
  EXPECT_FALSE(a.permit.valid());
  EXPECT_EQ(zcard(admin, limiter.redis_key("k")), 1);
  EXPECT_EQ(limiter.try_acquire("k", 4).status, PermitStatus::too_many_units);
  b.permit.release();
  EXPECT_EQ(zcard(admin, limiter.redis_key("k")), 0);  // the empty set is gone
  EXPECT_EQ(limiter.held(), 0u);
}

TEST(RedisConcurrencyLimiterValidation, BadInputNamesTheField) {
  RATELIMIT_REQUIRE_REDIS();
  const auto redis = server_options(ratelimit_test::unique_prefix());
  auto throws_naming = [](auto make, const std::string& field) {
    try {
      make();
      ADD_FAILURE() << "no exception for " << field;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(field + ":", 0), 0u) << e.what();
    }
  };
  auto with = [&](auto edit) {
    RedisConcurrencyOptions o;
    edit(o);
    return [o, redis] { RedisConcurrencyLimiter l(o, redis); };
  };
  throws_naming(with([](auto& o) { o.permits = 0; }), "RedisConcurrencyOptions.permits");
  throws_naming(with([](auto& o) { o.permits = 100'001; }), "RedisConcurrencyOptions.permits");
  throws_naming(with([](auto& o) { o.expiry = 5ms; }), "RedisConcurrencyOptions.expiry");
  throws_naming(with([](auto& o) { o.renew_every = o.expiry; }), "RedisConcurrencyOptions.renew_every");
  throws_naming(with([](auto& o) { o.poll_min = 0ms; }), "RedisConcurrencyOptions.poll_min");
  throws_naming(with([](auto& o) { o.poll_max = 11s; }), "RedisConcurrencyOptions.poll_max");
  throws_naming(with([](auto& o) { o.name = "a{b"; }), "RedisConcurrencyOptions.name");
  RedisConcurrencyLimiter limiter(concurrency(2), redis);
  throws_naming([&] { (void)limiter.try_acquire("k", 0); }, "units");
  throws_naming([&] { (void)limiter.acquire("k", 1, -1ns); }, "max_wait");
  throws_naming([&] { (void)limiter.try_acquire(std::string(513, 'x')); }, "key");
}

// A permit that expired (its holder stalled, no renewal) no longer counts; its late release removes
// only its own members, never the permit someone took in its place.
TEST(RedisConcurrencyLimiterExpiry, ReleaseAfterExpiryFreesNothingElse) {
  RATELIMIT_REQUIRE_REDIS();
  const std::string prefix = ratelimit_test::unique_prefix();
  RedisConcurrencyOptions o = concurrency(1, 200ms);
  o.renew = false;
  RedisConcurrencyLimiter stalled(o, server_options(prefix));
  RedisConcurrencyLimiter other(o, server_options(prefix));
  auto admin = ratelimit_test::shared_redis()->admin();
  PermitResult late = stalled.try_acquire("k");
  ASSERT_TRUE(late);
  EXPECT_EQ(other.try_acquire("k").status, PermitStatus::busy);
  std::this_thread::sleep_for(250ms);  // the real server's time passes the expiry
  EXPECT_FALSE(late.permit.valid());   // the holder knows without asking
  PermitResult next = other.try_acquire("k");
  ASSERT_TRUE(next) << ratelimit::to_string(next.status);
  late.permit.release();
  EXPECT_EQ(zcard(admin, other.redis_key("k")), 1);
  EXPECT_EQ(other.in_flight("k"), 1);
  EXPECT_EQ(stalled.try_acquire("k").status, PermitStatus::busy);
  EXPECT_TRUE(next.permit.valid());
}

TEST(RedisConcurrencyLimiterRenewal, KeepsALongPermitAndReportsALostOneAtOnce) {
  RATELIMIT_REQUIRE_REDIS();
  const std::string prefix = ratelimit_test::unique_prefix();
  RedisConcurrencyOptions o = concurrency(1, 300ms);
  o.renew_every = 50ms;
  RedisConcurrencyLimiter limiter(o, server_options(prefix));
  auto admin = ratelimit_test::shared_redis()->admin();
  std::atomic<int> lost{0};
  PermitResult p = limiter.try_acquire("k", 1, [&] { lost.fetch_add(1); });
  ASSERT_TRUE(p);
  std::this_thread::sleep_for(700ms);  // over twice the expiry: renewed meanwhile
  EXPECT_TRUE(p.permit.valid());
  EXPECT_EQ(lost.load(), 0);
  EXPECT_GT(limiter.renewals(), 0u);
  EXPECT_EQ(limiter.try_acquire("k").status, PermitStatus::busy);
  admin.command({"DEL", limiter.redis_key("k")});  // the permit is gone from Redis (e.g. a failover lost it)
  const auto start = std::chrono::steady_clock::now();
  while (p.permit.valid() && std::chrono::steady_clock::now() - start < 2s) std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(p.permit.valid());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 200ms);  // by the next renewal
  EXPECT_EQ(lost.load(), 1);
  EXPECT_EQ(limiter.renew_now(), 0u);  // told once
  EXPECT_EQ(lost.load(), 1);
}

TEST(RedisConcurrencyLimiterRenewal, RedisDownMakesThePermitInvalid) {
  RATELIMIT_REQUIRE_REDIS();
  auto binary = ratelimit_test::find_redis_server();
  ASSERT_TRUE(binary);
  ratelimit_test::RedisServer own(*binary);
  ratelimit::redis::RedisOptions ro = own.options(ratelimit::redis::RedisOptions{});
  ro.key_prefix = ratelimit_test::unique_prefix();
  RedisConcurrencyOptions o = concurrency(1, 1s);
  o.renew_every = 50ms;
  RedisConcurrencyLimiter limiter(o, ro);
  std::atomic<bool> lost{false};
  PermitResult p = limiter.try_acquire("k", 1, [&] { lost = true; });
  ASSERT_TRUE(p);
  own.kill_hard();
  const auto start = std::chrono::steady_clock::now();
  while (!lost && std::chrono::steady_clock::now() - start < 2s) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(lost);
  EXPECT_FALSE(p.permit.valid());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms);
  EXPECT_EQ(limiter.try_acquire("k").status, PermitStatus::backend_failed);
  p.permit.release();  // never throws, Redis down
  EXPECT_EQ(limiter.failed_releases(), 1u);
}

TEST(RedisConcurrencyLimiterWait, AcquireWaitsForALocalReleaseAndTimesOut) {
  RATELIMIT_REQUIRE_REDIS();
  const std::string prefix = ratelimit_test::unique_prefix();
  RedisConcurrencyOptions o = concurrency(1);
  o.poll_max = 1s;  // a local release must wake the waiter, not its next poll
  RedisConcurrencyLimiter limiter(o, server_options(prefix));
  PermitResult holder = limiter.try_acquire("k");
  const PermitResult timed_out = limiter.acquire("k", 1, 50ms);
  EXPECT_EQ(timed_out.status, PermitStatus::timed_out);
  std::thread releaser([&] {
    std::this_thread::sleep_for(100ms);
    holder.permit.release();
  });
  const auto start = std::chrono::steady_clock::now();
  PermitResult got = limiter.acquire("k", 1, 5s);
  const auto waited = std::chrono::steady_clock::now() - start;
  releaser.join();
  ASSERT_TRUE(got);
  EXPECT_LT(waited, 600ms);
}

// A child process: holds a permit and signals the parent, then waits to be killed.
[[noreturn]] void hold_until_killed(const std::string& prefix, int fd) {
  RedisConcurrencyOptions o = concurrency(2, 1s);
  o.renew_every = 100ms;
  RedisConcurrencyLimiter limiter(o, server_options(prefix));
  PermitResult p = limiter.try_acquire("k", 2);
  const char ok = p ? '1' : '0';
  (void)!::write(fd, &ok, 1);
  for (;;) ::pause();
}

TEST(RedisConcurrencyLimiterCrash, AKilledHoldersPermitsComeBackWithinExpiryPlusOneSecond) {
  RATELIMIT_REQUIRE_REDIS();
  const std::string prefix = ratelimit_test::unique_prefix();
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) hold_until_killed(prefix, fds[1]);
  char ok = 0;
  ASSERT_EQ(::read(fds[0], &ok, 1), 1);
  ::close(fds[0]);
  ::close(fds[1]);
  ASSERT_EQ(ok, '1');
  RedisConcurrencyLimiter limiter(concurrency(2, 1s), server_options(prefix));
  std::this_thread::sleep_for(1200ms);  // the child's renewals keep its permit past the expiry
  EXPECT_EQ(limiter.try_acquire("k").status, PermitStatus::busy);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  const auto killed = std::chrono::steady_clock::now();
  PermitResult back = limiter.acquire("k", 2, 3s);
  const auto took = std::chrono::steady_clock::now() - killed;
  ASSERT_TRUE(back) << ratelimit::to_string(back.status);
  EXPECT_LE(took, 2s) << "expiry 1 s + 1 s";
  std::printf("permits back %lld ms after SIGKILL (expiry 1000 ms, renewal every 100 ms)\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
}

// 8 processes x 100 acquisitions on one key with 3 permits: never more than 3 in flight, as counted by
// the holders (a counter in shared memory, inside the critical section) and by the sorted set.
TEST(RedisConcurrencyLimiterProcesses, EightProcessesNeverExceedPermits) {
  RATELIMIT_REQUIRE_REDIS();
  constexpr int kProcesses = 8;
  constexpr int kIterations = 100;
  constexpr std::int64_t kPermits = 3;
  struct Shared {
    std::atomic<std::int64_t> inside;
    std::atomic<std::int64_t> peak;
    std::atomic<std::int64_t> over_by_holders;
    std::atomic<std::int64_t> over_by_set;
    std::atomic<std::int64_t> acquired;
    std::atomic<std::int64_t> failed;
  };
  void* mem = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* shared = new (mem) Shared{};
  const std::string prefix = ratelimit_test::unique_prefix();
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        RedisConcurrencyLimiter limiter(concurrency(kPermits), server_options(prefix));
        auto admin = ratelimit_test::shared_redis()->admin();
        for (int i = 0; i < kIterations; ++i) {
          PermitResult r = limiter.acquire("hot", 1, 10s);
          if (!r) {
            shared->failed.fetch_add(1);
            continue;
          }
          const std::int64_t now_inside = shared->inside.fetch_add(1) + 1;
          if (now_inside > kPermits) shared->over_by_holders.fetch_add(1);
          std::int64_t peak = shared->peak.load();
          while (now_inside > peak && !shared->peak.compare_exchange_weak(peak, now_inside)) {
          }
          if (zcard(admin, limiter.redis_key("hot")) > kPermits) shared->over_by_set.fetch_add(1);
          shared->acquired.fetch_add(1);
          shared->inside.fetch_sub(1);
          r.permit.release();
        }
      } catch (...) {
        code = 2;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid;
  }
  EXPECT_EQ(shared->over_by_holders.load(), 0);
  EXPECT_EQ(shared->over_by_set.load(), 0);
  EXPECT_EQ(shared->failed.load(), 0);
  EXPECT_EQ(shared->acquired.load(), kProcesses * kIterations);
  EXPECT_EQ(shared->peak.load(), kPermits);  // they did overlap
  ::munmap(mem, sizeof(Shared));
}

}  // namespace
