// A user's program: includes the umbrella header, checks the version it was built against and that a
// limiter decides as include/ratelimit/README.md "Policy formulas" says. Exits non-zero on any mismatch.
#include <chrono>
#include <cstdio>
#include <string_view>

#include <ratelimit/ratelimit.hpp>

using namespace std::chrono_literals;

namespace {
int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "consumer: FAILED %s\n", what);
    ++failures;
  }
}
}  // namespace

int main() {
  check(std::string_view(ratelimit::version_string) == EXPECTED_VERSION, "version_string == EXPECTED_VERSION");

  // GCRA, 2 per second, burst 2: T = 500 ms, tau = 1 s. From idle exactly two pass; the third must
  // wait new_tat - t - tau = 1.5 s - 0 - 1 s = 500 ms.
  ratelimit::ManualClock clock;
  ratelimit::MemoryLimiter limiter(ratelimit::Gcra{.limit = 2, .period = 1s, .burst = 2}, {}, clock);
  check(static_cast<bool>(limiter.allow("user")), "first request allowed");
  check(static_cast<bool>(limiter.allow("user")), "second request allowed");
  const ratelimit::Decision denied = limiter.allow("user");
  check(!denied.allowed, "third request denied");
  check(denied.retry_after == 500ms, "retry_after == 500ms");
  clock.advance(500ms);
  check(static_cast<bool>(limiter.allow("user")), "allowed again after retry_after");

  if (failures == 0) std::printf("consumer: ratelimit %s OK\n", ratelimit::version_string);
  return failures == 0 ? 0 : 1;
}
