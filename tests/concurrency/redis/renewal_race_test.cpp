// RedisConcurrencyLimiter's renewal against releases (include/ratelimit/concurrency/README.md "Concurrency limits",
// Redis): `on_lost` runs only for a permit still held when its renewal fails, never for one released while its renewal
// was in flight (the callback usually cancels the request it captured, which is gone by then).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <ratelimit/redis.hpp>

#include "../../support/join_at_exit.hpp"
#include "redis_server.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::PermitResult;
using ratelimit::redis::RedisConcurrencyLimiter;
using ratelimit::redis::RedisConcurrencyOptions;
using ratelimit_test::JoinAtExit;

// Client options on a key prefix of their own.
ratelimit::redis::RedisOptions redis_options() {
  return ratelimit_test::client_options(*ratelimit_test::shared_redis());
}

// A 30 s expiry and no background renewal (the test renews by hand).
std::unique_ptr<RedisConcurrencyLimiter> manual_renewal_limiter() {
  RedisConcurrencyOptions o;
  o.expiry = 30s;
  o.renew = false;
  return std::make_unique<RedisConcurrencyLimiter>(o, redis_options());
}

// A healthy server and a 30 s expiry: no permit can be lost, so every on_lost call is spurious. Besides the
// renewals every 1 ms, each cycle starts a renewal on another thread and releases the permit at once, so the
// release and the renewal race on two connections.
TEST(RedisConcurrencyRenewal, ReleasedPermitIsNeverReportedLost) {
  RATELIMIT_REQUIRE_REDIS();
  RedisConcurrencyOptions o;
  o.permits = 4;
  o.expiry = 30s;
  o.renew_every = 1ms;
  RedisConcurrencyLimiter limiter(o, redis_options());
  std::atomic<int> lost{0};
  enum : int { idle, held, renewing, stop };
  std::atomic<int> phase{idle};
  std::thread renewer([&] {
    for (int p = phase.load();; p = phase.load()) {
      if (p == stop) return;
      if (p != held) {
        std::this_thread::yield();
        continue;
      }
      phase.store(renewing);
      (void)limiter.renew_now();
      phase.store(idle);
    }
  });
  const JoinAtExit join_renewer(renewer, [&] { phase.store(stop); });
  constexpr int kCycles = 2000;
  for (int i = 0; i < kCycles; ++i) {
    PermitResult r = limiter.try_acquire("k", 1 + i % 3, [&] { lost.fetch_add(1); });
    ASSERT_TRUE(r) << ratelimit::to_string(r.status) << " at cycle " << i;
    phase.store(held);
    while (phase.load() == held) std::this_thread::yield();
    r.permit.release();  // while the renewal is in flight (or about to take its snapshot)
    while (phase.load() != idle) std::this_thread::yield();
  }
  phase.store(stop);
  renewer.join();
  EXPECT_GE(limiter.renewals(), kCycles / 10) << "too few renewals to test anything";
  EXPECT_EQ(lost.load(), 0) << "on_lost ran for released permits in " << kCycles << " cycles";
  EXPECT_EQ(limiter.held(), 0u);
}

// A permit still held whose units were taken from Redis is reported lost, once (the check above must not hide it).
TEST(RedisConcurrencyRenewal, HeldPermitWhoseUnitsVanishedIsReportedOnce) {
  RATELIMIT_REQUIRE_REDIS();
  const auto owned = manual_renewal_limiter();
  RedisConcurrencyLimiter& limiter = *owned;
  auto admin = ratelimit_test::shared_redis()->admin();
  int lost = 0;
  PermitResult r = limiter.try_acquire("k", 1, [&] { ++lost; });
  ASSERT_TRUE(r);
  (void)admin.command({"DEL", limiter.redis_key("k")});
  EXPECT_EQ(limiter.renew_now(), 1u);
  EXPECT_EQ(limiter.renew_now(), 0u);
  EXPECT_EQ(lost, 1);
  EXPECT_FALSE(r.permit.valid());
}

// A release while the permit's on_lost runs on another thread returns only once the callback has: the holder may
// free what the callback captured as soon as its release returns.
TEST(RedisConcurrencyRenewal, ReleaseWaitsForARunningOnLost) {
  RATELIMIT_REQUIRE_REDIS();
  const auto owned = manual_renewal_limiter();
  RedisConcurrencyLimiter& limiter = *owned;
  auto admin = ratelimit_test::shared_redis()->admin();
  std::atomic<bool> entered{false};
  std::atomic<bool> finished{false};
  PermitResult r = limiter.try_acquire("k", 1, [&] {
    entered.store(true);
    std::this_thread::sleep_for(200ms);  // long enough for the release below to overtake a callback not waited for
    finished.store(true);
  });
  ASSERT_TRUE(r);
  (void)admin.command({"DEL", limiter.redis_key("k")});
  std::thread renewer([&] { (void)limiter.renew_now(); });
  while (!entered.load()) std::this_thread::yield();
  r.permit.release();
  EXPECT_TRUE(finished.load()) << "release returned while on_lost still ran";
  renewer.join();
  EXPECT_EQ(limiter.held(), 0u);
}

// on_lost may release its own permit (on the thread that runs it: no wait for itself).
TEST(RedisConcurrencyRenewal, OnLostMayReleaseItsOwnPermit) {
  RATELIMIT_REQUIRE_REDIS();
  const auto owned = manual_renewal_limiter();
  RedisConcurrencyLimiter& limiter = *owned;
  auto admin = ratelimit_test::shared_redis()->admin();
  ratelimit::Permit permit;
  PermitResult r = limiter.try_acquire("k", 1, [&] { permit.release(); });
  ASSERT_TRUE(r);
  permit = std::move(r.permit);
  (void)admin.command({"DEL", limiter.redis_key("k")});
  EXPECT_EQ(limiter.renew_now(), 1u);
  EXPECT_FALSE(permit.valid());
  EXPECT_EQ(limiter.held(), 0u);
}

}  // namespace
