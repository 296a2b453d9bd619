// Runs the five policies on the same burst and prints each decision: the numbers a service puts in
// its 429 responses and RateLimit headers. Time is simulated with ManualClock, so the output is exact.
#include <chrono>
#include <cstdio>
#include <string_view>

#include <ratelimit/ratelimit.hpp>

using namespace std::chrono_literals;

namespace {

double ms(std::chrono::nanoseconds d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Sends 7 requests at once, then one more every 250 ms for a second.
template <ratelimit::Policy P>
void run(std::string_view name, P policy) {
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter limiter(policy, {}, clock);
  std::printf("\n%s\n  %8s  %-7s %5s %9s %12s %12s\n", name.data(), "time", "result", "limit", "remaining",
              "retry_after", "reset_after");
  for (int i = 0; i < 11; ++i) {
    if (i >= 7) clock.advance(250ms);
    const ratelimit::Decision d = limiter.allow("client-42");
    std::printf("  %6.0fms  %-7s %5lld %9lld %10.0fms %10.0fms\n", ms(clock.now().time_since_epoch()),
                d ? "allowed" : "DENIED", static_cast<long long>(d.limit), static_cast<long long>(d.remaining),
                ms(d.retry_after), ms(d.reset_after));
  }
}

}  // namespace

int main() {
  std::printf("5 requests per second, burst 5: seven requests at t=0, then one every 250 ms\n");
  run("FixedWindow{5, 1s}", ratelimit::FixedWindow{.limit = 5, .window = 1s});
  run("SlidingWindowLog{5, 1s}", ratelimit::SlidingWindowLog{.limit = 5, .window = 1s});
  run("SlidingWindowCounter{5, 1s}", ratelimit::SlidingWindowCounter{.limit = 5, .window = 1s});
  run("TokenBucket{capacity 5, 5 per 1s}",
      ratelimit::TokenBucket{.capacity = 5, .refill_tokens = 5, .refill_period = 1s});
  run("Gcra{5 per 1s, burst 5}", ratelimit::Gcra{.limit = 5, .period = 1s, .burst = 5});
}
