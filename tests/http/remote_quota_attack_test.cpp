// RemoteQuotaLimiter under attack: responses of tickets its partition no longer knows (a partition forgotten to stay
// within max_partitions) must not shadow the responses of the new entry's own requests
// (include/ratelimit/http/README.md "Calling someone else's API").
#include <gtest/gtest.h>

#include <ratelimit/http/remote_quota.hpp>

#include <string>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
namespace http = ratelimit::http;
using ratelimit::ManualClock;

namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;
using Limiter = http::RemoteQuotaLimiter<ManualClock>;

constexpr ratelimit::Gcra kWide{.limit = 1000, .period = std::chrono::seconds(1), .burst = 1000};

Fields window_fields(int remaining) {
  return {
      {"X-RateLimit-Limit", "100"}, {"X-RateLimit-Remaining", std::to_string(remaining)}, {"X-RateLimit-Reset", "60"}};
}

}  // namespace

// A ticket of a forgotten entry is "not of this entry" (RemoteQuotaLimiter::release): its late response must not
// make the new entry's own, newer responses look stale.
TEST(RemoteQuotaLimiter, ResponseOfForgottenTicketDoesNotShadowNewerOnes) {
  ManualClock clock;
  http::RemoteQuotaOptions o;
  o.model = http::RemoteModel::window;
  o.max_partitions = 1;
  o.wall_clock = [] { return std::chrono::system_clock::time_point(1'700'000'000s); };
  Limiter limiter(kWide, o, clock);
  http::RemoteAdmission old;
  for (int i = 0; i < 3; ++i) old = limiter.try_acquire("a");  // tickets 1..3 of the first entry of "a"
  ASSERT_TRUE(old);
  ASSERT_TRUE(limiter.try_acquire("b"));                        // "a" is forgotten
  limiter.record("a", old.ticket, 200, window_fields(50));      // a late answer to the forgotten entry's ticket 3
  const http::RemoteAdmission sent = limiter.try_acquire("a");  // the new entry's ticket 1
  ASSERT_TRUE(sent);
  limiter.record("a", sent.ticket, 200, window_fields(0));  // the remote now says: nothing left for 60 s
  const http::RemoteAdmission next = limiter.try_acquire("a");
  EXPECT_FALSE(next) << "the remote said remaining 0, but the answer was taken for stale";
  EXPECT_EQ(limiter.stats().stale, 1);  // the forgotten ticket's answer, not the new one's
}
