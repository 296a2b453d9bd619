// A program built with RATELIMIT_SEPARATE_COMPILATION: this unit uses the five policies' limiters and
// compiles none of them (the test separate_compilation.user_compiles_no_limiter checks its object);
// limiter_src.cpp holds them. Exit 0 when every limiter decided as the policy says.
#include <chrono>
#include <cstdio>

#include <ratelimit/ratelimit.hpp>

using namespace std::chrono_literals;

namespace {

// `limit` requests admitted, the next one denied, on one key; another key is independent.
template <class P>
bool decides(const char* name, P policy, int limit) {
  ratelimit::MemoryLimiter<P> limiter(policy);
  bool ok = true;
  for (int i = 0; i < limit; ++i) ok = ok && limiter.allow("client").allowed;
  ok = ok && !limiter.allow("client").allowed && limiter.allow("other").allowed;
  ok = ok && limiter.size() == 2;
  // Settling (the out-of-line overload, at a time read here): 2 units owed keep the key denied, a give-back of
  // everything fills it again.
  const auto now = std::chrono::steady_clock::now();
  ok = ok && limiter.settle("client", 1, 3, limit, now).remaining == 0;
  ok = ok && limiter.settle("other", 1, 0, 0, now).remaining == limit;
  if constexpr (ratelimit::ReservableRules<ratelimit::RulesOf<P>>) {
    ratelimit::Reservation r = limiter.reserve("booked", 1, std::chrono::nanoseconds::max(), now);
    ok = ok && r.ok() && r.delay() == std::chrono::nanoseconds(0);
    r.cancel();
  }
  std::printf("%s: %s\n", name, ok ? "ok" : "WRONG");
  return ok;
}

}  // namespace

int main() {
  bool ok = decides("FixedWindow", ratelimit::FixedWindow{.limit = 3, .window = 1h}, 3);
  ok = decides("SlidingWindowLog", ratelimit::SlidingWindowLog{.limit = 3, .window = 1h}, 3) && ok;
  ok = decides("SlidingWindowCounter", ratelimit::SlidingWindowCounter{.limit = 3, .window = 1h}, 3) && ok;
  ok = decides("TokenBucket", ratelimit::TokenBucket{.capacity = 3, .refill_tokens = 1, .refill_period = 1h}, 3) && ok;
  ok = decides("Gcra", ratelimit::Gcra{.limit = 1, .period = 1h, .burst = 3}, 3) && ok;
  return ok ? 0 : 1;
}
