// Cross-process atomicity (include/ratelimit/README.md "Guarantees"): 8 processes x 500 requests racing on one fresh
// key with limit L admit exactly L, for every policy, repeated.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>

#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ratelimit::redis::TimeSource;

constexpr int kProcesses = 8;
constexpr int kRequests = 500;
constexpr std::int64_t kRaceLimit = 777;

// Forks the racers, releases them at once through a pipe, and returns the sum of what they admitted
// (-1 if any of them failed).
template <ratelimit::Policy P>
std::int64_t race(const P& policy, const ratelimit::redis::RedisOptions& options) {
  int go[2];
  if (::pipe(go) != 0) return -1;
  std::array<int, kProcesses> results{};
  std::array<pid_t, kProcesses> pids{};
  for (int i = 0; i < kProcesses; ++i) {
    int out[2];
    if (::pipe(out) != 0) return -1;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(go[1]);
      ::close(out[0]);
      std::int64_t admitted = 0;
      try {
        // Made after fork: each process has its own connections. ManualClock stays at 0 (client time),
        // so no window edge or refill can pass during the race.
        ratelimit::redis::RedisLimiter<P, ratelimit::ManualClock> limiter(policy, options);
        char byte = 0;
        if (::read(go[0], &byte, 1) != 1) ::_exit(2);
        for (int r = 0; r < kRequests; ++r) admitted += limiter.allow("hot") ? 1 : 0;
      } catch (...) {
        admitted = -1;
      }
      const ssize_t written = ::write(out[1], &admitted, sizeof admitted);
      ::_exit(written == sizeof admitted ? 0 : 3);
    }
    ::close(out[1]);
    pids[static_cast<std::size_t>(i)] = pid;
    results[static_cast<std::size_t>(i)] = out[0];
  }
  ::close(go[0]);
  const char start[kProcesses] = {};
  if (::write(go[1], start, sizeof start) != static_cast<ssize_t>(sizeof start)) return -1;
  ::close(go[1]);
  std::int64_t total = 0;
  bool failed = false;
  for (int i = 0; i < kProcesses; ++i) {
    std::int64_t admitted = -1;
    if (::read(results[static_cast<std::size_t>(i)], &admitted, sizeof admitted) != sizeof admitted || admitted < 0) {
      failed = true;
    }
    total += admitted;
    ::close(results[static_cast<std::size_t>(i)]);
    int status = 0;
    ::waitpid(pids[static_cast<std::size_t>(i)], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = true;
  }
  return failed ? -1 : total;
}

template <ratelimit::Policy P>
void expect_exactly_limit(const P& policy, bool server_time_too) {
  RATELIMIT_REQUIRE_REDIS();
  for (int rep = 0; rep < 3; ++rep) {
    auto options = ratelimit_test::client_options(*ratelimit_test::shared_redis());
    options.pool_size = 1;
    // The last repetition reads the server's TIME where no window edge can pass within the race.
    if (server_time_too && rep == 2) options.time_source = TimeSource::server;
    EXPECT_EQ(race(policy, options), kRaceLimit) << P::kind << " repetition " << rep;
  }
}

TEST(CrossProcessAtomicity, FixedWindow) {
  expect_exactly_limit(ratelimit::FixedWindow{.limit = kRaceLimit, .window = 1h}, false);
}
TEST(CrossProcessAtomicity, SlidingWindowLog) {
  expect_exactly_limit(ratelimit::SlidingWindowLog{.limit = kRaceLimit, .window = 1h}, true);
}
TEST(CrossProcessAtomicity, SlidingWindowCounter) {
  expect_exactly_limit(ratelimit::SlidingWindowCounter{.limit = kRaceLimit, .window = 1h}, false);
}
TEST(CrossProcessAtomicity, TokenBucket) {
  expect_exactly_limit(ratelimit::TokenBucket{.capacity = kRaceLimit, .refill_tokens = 1, .refill_period = 1h}, true);
}
TEST(CrossProcessAtomicity, Gcra) {
  expect_exactly_limit(ratelimit::Gcra{.limit = 1, .period = 1h, .burst = kRaceLimit}, true);
}

}  // namespace
