// RemoteQuotaLimiter on a ManualClock: the local policy before any response, the remote's remaining counted down,
// rate and window models, Retry-After, requests in flight, stale responses, bounded partitions
// (include/ratelimit/http/README.md "Calling someone else's API").
#include <gtest/gtest.h>

#include <ratelimit/http/remote_quota.hpp>

#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
namespace http = ratelimit::http;
using ratelimit::ManualClock;

namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;
using Limiter = http::RemoteQuotaLimiter<ManualClock>;

/// A local policy far above anything the remote says, so the remote's word decides.
constexpr ratelimit::Gcra kWide{.limit = 1000, .period = std::chrono::seconds(1), .burst = 1000};

http::RemoteQuotaOptions options(http::RemoteModel model = http::RemoteModel::automatic) {
  http::RemoteQuotaOptions o;
  o.model = model;
  o.wall_clock = [] { return std::chrono::system_clock::time_point(1'700'000'000s); };
  return o;
}

/// Admits as many requests as the limiter lets through now (at most 10,000).
int drain(Limiter& limiter, const std::string& partition) {
  int n = 0;
  while (n < 10'000 && limiter.try_acquire(partition)) ++n;
  return n;
}

/// Sends one request to "k" and records `fields` as its response.
void answer(Limiter& limiter, const Fields& fields) {
  const http::RemoteAdmission sent = limiter.try_acquire("k");
  ASSERT_TRUE(sent);
  limiter.record("k", sent.ticket, 200, fields);
}

}  // namespace

TEST(RemoteQuotaLimiter, LocalPolicyBeforeAnyResponse) {
  ManualClock clock;
  Limiter limiter(ratelimit::Gcra{.limit = 2, .period = std::chrono::seconds(1), .burst = 2}, options(), clock);
  EXPECT_EQ(drain(limiter, "k"), 2);
  const http::RemoteAdmission denied = limiter.try_acquire("k");
  EXPECT_FALSE(denied);
  EXPECT_EQ(denied.retry_after, 500ms);
  EXPECT_EQ(limiter.stats().denied_local, 2);  // the one in drain and this one
  clock.advance(500ms);
  EXPECT_TRUE(limiter.try_acquire("k"));
}

TEST(RemoteQuotaLimiter, CountsSendsAgainstRemainingUntilReset) {
  ManualClock clock;
  Limiter limiter(kWide, options(), clock);
  answer(limiter, Fields{{"X-RateLimit-Limit", "5"}, {"X-RateLimit-Remaining", "3"}, {"X-RateLimit-Reset", "10"}});
  EXPECT_EQ(drain(limiter, "k"), 3);
  const http::RemoteAdmission denied = limiter.try_acquire("k");
  EXPECT_FALSE(denied);
  EXPECT_EQ(denied.retry_after, 10s);
  clock.advance(9999ms);
  EXPECT_FALSE(limiter.try_acquire("k"));
  clock.advance(1ms);
  EXPECT_EQ(drain(limiter, "k"), 5);  // the remote's window renewed at its limit
}

TEST(RemoteQuotaLimiter, WindowWithoutStatedLengthRenewsEveryUnknownReset) {
  ManualClock clock;
  Limiter limiter(kWide, options(), clock);  // unknown_reset 60 s
  limiter.record("k", limiter.try_acquire("k").ticket, 200,
                 Fields{{"X-RateLimit-Limit", "2"}, {"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "1"}});
  clock.advance(1s);
  EXPECT_EQ(drain(limiter, "k"), 2);
  const http::RemoteAdmission denied = limiter.try_acquire("k");  // not stuck: the next window is 60 s on
  EXPECT_EQ(denied.retry_after, 60s);
  clock.advance(60s);
  EXPECT_EQ(drain(limiter, "k"), 2);
}

TEST(RemoteQuotaLimiter, RateModelRefillsAtPolicyRate) {
  ManualClock clock;
  Limiter limiter(kWide, options(), clock);
  // A GCRA of 5/s with burst 10 just drained: r=0, full again in 2 s, so the rate reading fits.
  answer(limiter, Fields{{"RateLimit-Policy", "\"b\";q=10;w=2"}, {"RateLimit", "\"b\";r=0;t=2"}});
  const http::RemoteAdmission denied = limiter.try_acquire("k");
  EXPECT_FALSE(denied);
  EXPECT_EQ(denied.retry_after, 200ms);
  clock.advance(199ms);
  EXPECT_FALSE(limiter.try_acquire("k"));
  clock.advance(1ms);
  EXPECT_EQ(drain(limiter, "k"), 1);
  clock.advance(1s);
  EXPECT_EQ(drain(limiter, "k"), 5);
  clock.advance(10s);
  EXPECT_EQ(drain(limiter, "k"), 10);  // never above the quota
}

TEST(RemoteQuotaLimiter, WindowRemoteIsNotReadAsRate) {
  ManualClock clock;
  Limiter limiter(kWide, options(), clock);
  // A fixed window of 100/min, used up with 50 s to go: a rate would allow 1 every 0.6 s; the remote would not.
  answer(limiter, Fields{{"RateLimit-Policy", "\"m\";q=100;w=60"}, {"RateLimit", "\"m\";r=0;t=50"}});
  clock.advance(49s);
  const http::RemoteAdmission denied = limiter.try_acquire("k");
  EXPECT_FALSE(denied);
  EXPECT_EQ(denied.retry_after, 1s);
  clock.advance(1s);
  EXPECT_EQ(drain(limiter, "k"), 100);
  clock.advance(60s);
  EXPECT_EQ(drain(limiter, "k"), 100);  // the next window, w after the last
}

TEST(RemoteQuotaLimiter, ModelCanBeForced) {
  ManualClock clock;
  Limiter window(kWide, options(http::RemoteModel::window), clock);
  Limiter rate(kWide, options(http::RemoteModel::rate), clock);
  const Fields fields{{"RateLimit-Policy", "\"b\";q=10;w=2"}, {"RateLimit", "\"b\";r=0;t=2"}};
  window.record("k", window.try_acquire("k").ticket, 200, fields);
  rate.record("k", rate.try_acquire("k").ticket, 200, fields);
  clock.advance(1s);
  EXPECT_EQ(drain(window, "k"), 0);
  EXPECT_EQ(drain(rate, "k"), 5);
}

TEST(RemoteQuotaLimiter, RetryAfterBlocksAndIsClamped) {
  ManualClock clock;
  http::RemoteQuotaOptions o = options();
  o.maxima.retry_after = 5s;
  Limiter limiter(kWide, o, clock);
  limiter.record("k", limiter.try_acquire("k").ticket, 429, Fields{{"Retry-After", "86400"}});
  const http::RemoteAdmission denied = limiter.try_acquire("k");
  EXPECT_FALSE(denied);
  EXPECT_EQ(denied.retry_after, 5s);
  clock.advance(5s);
  EXPECT_TRUE(limiter.try_acquire("k"));
  const http::RemoteQuotaStats s = limiter.stats();
  EXPECT_EQ(s.too_many_requests, 1);
  EXPECT_EQ(s.clamped, 1);
  EXPECT_EQ(s.denied_remote, 1);
}

TEST(RemoteQuotaLimiter, ReportsBuiltByHandAreHeldToMaxima) {
  ManualClock clock;
  http::RemoteQuotaOptions o = options();
  o.maxima.retry_after = 2s;
  Limiter limiter(kWide, o, clock);
  http::RemoteReport report;
  report.retry_after = std::chrono::seconds(std::chrono::seconds::max().count() / 2);  // overflows as nanoseconds
  report.remaining = -5;                                                               // ignored
  limiter.record("k", limiter.try_acquire("k").ticket, 200, report);
  EXPECT_EQ(limiter.try_acquire("k").retry_after, 2s);
  clock.advance(2s);
  EXPECT_TRUE(limiter.try_acquire("k"));
}

TEST(RemoteQuotaLimiter, TooManyRequestsWithoutRetryAfterBacksOff) {
  ManualClock clock;
  Limiter limiter(kWide, options(), clock);
  limiter.record("a", limiter.try_acquire("a").ticket, 429, Fields{});
  EXPECT_EQ(limiter.try_acquire("a").retry_after, 1s);  // default_backoff
  limiter.record("b", limiter.try_acquire("b").ticket, 429,
                 Fields{{"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "7"}});
  EXPECT_EQ(limiter.try_acquire("b").retry_after, 7s);  // its reset
}

TEST(RemoteQuotaLimiter, RequestsInFlightCountAgainstNewerResponse) {
  ManualClock clock;
  Limiter limiter(kWide, options(), clock);
  const http::RemoteAdmission one = limiter.try_acquire("k");
  ASSERT_TRUE(limiter.try_acquire("k"));
  ASSERT_TRUE(limiter.try_acquire("k"));
  // The answer to the first says 2 left; the other two, sent after it, may not be in that number.
  limiter.record("k", one.ticket, 200, Fields{{"X-RateLimit-Remaining", "2"}, {"X-RateLimit-Reset", "10"}});
  EXPECT_EQ(drain(limiter, "k"), 0);
}

TEST(RemoteQuotaLimiter, RateModelSubtractsRequestsInFlight) {
  ManualClock clock;
  Limiter limiter(kWide, options(), clock);
  const http::RemoteAdmission one = limiter.try_acquire("k");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(limiter.try_acquire("k"));
  // 5 left after the first of four: the three sent after it leave 2 (the rate reading: 5 + 1 s x 5/s = 10 = q).
  limiter.record("k", one.ticket, 200, Fields{{"RateLimit-Policy", "\"b\";q=10;w=2"}, {"RateLimit", "\"b\";r=5;t=1"}});
  EXPECT_EQ(drain(limiter, "k"), 2);
  clock.advance(200ms);
  EXPECT_EQ(drain(limiter, "k"), 1);
}

TEST(RemoteQuotaLimiter, EarlierRequestsStillInFlightCountToo) {
  ManualClock clock;
  Limiter limiter(kWide, options(), clock);
  const http::RemoteAdmission one = limiter.try_acquire("k");
  const http::RemoteAdmission two = limiter.try_acquire("k");
  // Over two connections the second may reach the remote first: its 1 left may not count the first yet.
  limiter.record("k", two.ticket, 200, Fields{{"X-RateLimit-Remaining", "1"}, {"X-RateLimit-Reset", "10"}});
  EXPECT_EQ(drain(limiter, "k"), 0);
  limiter.release("k", one.ticket);  // the first will get no response: no longer in flight
  clock.advance(10s);                // the reset: the remote never said its limit, so the local policy again
  answer(limiter, Fields{{"X-RateLimit-Remaining", "1"}, {"X-RateLimit-Reset", "10"}});
  EXPECT_EQ(drain(limiter, "k"), 1);  // nothing in flight is subtracted now
}

TEST(RemoteQuotaLimiter, OlderResponseAfterNewerIsStale) {
  ManualClock clock;
  Limiter limiter(kWide, options(), clock);
  const http::RemoteAdmission one = limiter.try_acquire("k");
  const http::RemoteAdmission two = limiter.try_acquire("k");
  limiter.record("k", two.ticket, 200, Fields{{"X-RateLimit-Remaining", "1"}, {"X-RateLimit-Reset", "10"}});
  limiter.record("k", one.ticket, 200, Fields{{"X-RateLimit-Remaining", "9"}, {"X-RateLimit-Reset", "10"}});
  EXPECT_EQ(drain(limiter, "k"), 0);  // the newer word, less the first (in flight when it came), stands
  EXPECT_EQ(limiter.stats().stale, 1);
  clock.advance(10s);
  answer(limiter, Fields{{"X-RateLimit-Remaining", "3"}, {"X-RateLimit-Reset", "10"}});
  EXPECT_EQ(drain(limiter, "k"), 3);  // the stale response resolved the first: not subtracted again
}

TEST(RemoteQuotaLimiter, UnknownLimitReturnsToLocalPolicyAfterReset) {
  ManualClock clock;
  Limiter limiter(ratelimit::Gcra{.limit = 4, .period = std::chrono::seconds(1), .burst = 4}, options(), clock);
  limiter.record("k", limiter.try_acquire("k").ticket, 200,
                 Fields{{"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "3"}});
  EXPECT_EQ(drain(limiter, "k"), 0);
  clock.advance(3s);
  EXPECT_EQ(drain(limiter, "k"), 4);  // the local burst, refilled meanwhile
}

TEST(RemoteQuotaLimiter, HostileHeadersNeverRaiseLocalCeiling) {
  ManualClock clock;
  Limiter limiter(ratelimit::Gcra{.limit = 10, .period = std::chrono::seconds(1), .burst = 5}, options(), clock);
  const std::vector<Fields> hostile = {
      {{"X-RateLimit-Remaining", "1000000000000000000"}, {"X-RateLimit-Reset", "-5"}},
      {{"RateLimit-Policy", "\"x\";q=999999999999999;w=1"}, {"RateLimit", "\"x\";r=999999999999999;t=0"}},
      {{"X-RateLimit-Remaining", "garbage"}, {"Retry-After", "-1"}},
      {{"X-RateLimit-Limit", "99999999999999999999999"}, {"X-RateLimit-Remaining", "100000000000000000"}}};
  std::int64_t admitted = 0;
  for (int step = 0; step < 1000; ++step) {    // 10 s in 10 ms steps
    for (int sent = 0; sent < 1000; ++sent) {  // bounded, so a broken ceiling fails the test, not hangs it
      const http::RemoteAdmission a = limiter.try_acquire("k");
      if (!a) break;
      ++admitted;
      limiter.record("k", a.ticket, 200, hostile[static_cast<std::size_t>(admitted) % hostile.size()]);
    }
    clock.advance(10ms);
  }
  EXPECT_LE(admitted, 5 + 10 * 10);  // the local burst plus its rate over 10 s
  EXPECT_GE(admitted, 100);
  const http::RemoteQuotaStats s = limiter.stats();
  EXPECT_GT(s.malformed, 0);
  EXPECT_GT(s.clamped, 0);
}

TEST(RemoteQuotaLimiter, PartitionsAreBounded) {
  ManualClock clock;
  http::RemoteQuotaOptions o = options();
  o.max_partitions = 2;
  Limiter limiter(kWide, o, clock);
  limiter.record("a", limiter.try_acquire("a").ticket, 200, Fields{{"X-RateLimit-Remaining", "0"}});
  (void)limiter.try_acquire("b");
  (void)limiter.try_acquire("c");  // evicts "a", the least recently used
  EXPECT_EQ(limiter.partitions(), 2U);
  EXPECT_EQ(limiter.stats().evicted, 1);
  for (int i = 0; i < 1000; ++i) (void)limiter.try_acquire("p" + std::to_string(i));
  EXPECT_EQ(limiter.partitions(), 2U);
  EXPECT_TRUE(limiter.try_acquire("a"));  // forgotten: back to the local policy
}

TEST(RemoteQuotaLimiter, RefusesBadArguments) {
  ManualClock clock;
  Limiter limiter(kWide, options(), clock);
  try {
    (void)limiter.try_acquire(std::string(257, 'x'));
    ADD_FAILURE() << "a partition over max_partition_bytes accepted";
  } catch (const std::invalid_argument& e) {  // the size and the bound, as a key's message names them
    EXPECT_STREQ(e.what(), "partition: 257 bytes exceeds max_partition_bytes (256)");
  }
  http::RemoteQuotaOptions o = options();
  o.max_partitions = 0;
  try {
    Limiter bad(kWide, o, clock);
    ADD_FAILURE() << "max_partitions 0 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("max_partitions"), std::string::npos) << e.what();
  }
  o = options();
  o.maxima.retry_after = 0s;
  EXPECT_THROW(Limiter(kWide, o, clock), std::invalid_argument);
  EXPECT_THROW(Limiter(ratelimit::Gcra{}, options(), clock), std::invalid_argument);
}

TEST(RemoteQuotaLimiter, ConcurrentCallersNeverExceedRemaining) {
  ManualClock clock;
  Limiter limiter(kWide, options(), clock);
  limiter.record("k", limiter.try_acquire("k").ticket, 200,
                 Fields{{"X-RateLimit-Remaining", "500"}, {"X-RateLimit-Reset", "60"}});
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 400; ++i) {
        if (const http::RemoteAdmission a = limiter.try_acquire("k")) {
          admitted.fetch_add(1);
          limiter.record("k", a.ticket, 200, Fields{{"X-Other", "1"}});
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 500);
}

// A ticket of a forgotten entry is "not of this entry" (RemoteQuotaLimiter::release): its late response must not
// make the new entry's own, newer responses look stale.
TEST(RemoteQuotaLimiter, ResponseOfForgottenTicketDoesNotShadowNewerOnes) {
  ManualClock clock;
  http::RemoteQuotaOptions o = options(http::RemoteModel::window);
  o.max_partitions = 1;
  Limiter limiter(kWide, o, clock);
  http::RemoteAdmission old;
  for (int i = 0; i < 3; ++i) old = limiter.try_acquire("a");  // tickets 1..3 of the first entry of "a"
  ASSERT_TRUE(old);
  ASSERT_TRUE(limiter.try_acquire("b"));  // "a" is forgotten
  const Fields fifty{{"X-RateLimit-Limit", "100"}, {"X-RateLimit-Remaining", "50"}, {"X-RateLimit-Reset", "60"}};
  const Fields none{{"X-RateLimit-Limit", "100"}, {"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "60"}};
  limiter.record("a", old.ticket, 200, fifty);                  // a late answer to the forgotten entry's ticket 3
  const http::RemoteAdmission sent = limiter.try_acquire("a");  // the new entry's ticket 1
  ASSERT_TRUE(sent);
  limiter.record("a", sent.ticket, 200, none);  // the remote now says: nothing left for 60 s
  const http::RemoteAdmission next = limiter.try_acquire("a");
  EXPECT_FALSE(next) << "the remote said remaining 0, but the answer was taken for stale";
  EXPECT_EQ(limiter.stats().stale, 1);  // the forgotten ticket's answer, not the new one's
}
