// A program built with RATELIMIT_SEPARATE_COMPILATION and linked with ratelimit::redis_compiled
// (<ratelimit/redis/src.hpp>): this unit uses RedisLimiter<Gcra> through <ratelimit/redis.hpp>, which declares it, and
// compiles none of its members nor any engine code (the test separate_compilation.redis_user_compiles_no_engine checks
// its object). Exit 0 when every decision is the one Redis (a server the program starts) or the failure policy
// (nothing listening) must give.
#include <chrono>
#include <cstdio>
#include <exception>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ratelimit/redis.hpp>

#include "separate_compilation/test_redis.hpp"

using namespace std::chrono_literals;

namespace {

using Limiter = ratelimit::redis::RedisLimiter<ratelimit::Gcra>;
const ratelimit::Gcra kThree{.limit = 1, .period = 1h, .burst = 3};

bool report(bool ok, const char* what) {
  std::printf("%s: %s\n", what, ok ? "ok" : "WRONG");
  return ok;
}

// The sync calls, a batch, the async calls (their callbacks reach the compiled limiter behind one type) and reset.
bool decides_on_redis(int port) {
  ratelimit::redis::RedisOptions o;
  o.port = port;
  o.on_error = ratelimit::FailurePolicy::raise;
  Limiter limiter(kThree, o);
  limiter.wait_ready(5s);
  bool three = true;
  for (int i = 0; i < 3; ++i) three = limiter.allow("client").allowed && three;
  bool ok = report(three && !limiter.allow("client").allowed && limiter.check("other").decision.allowed,
                   "allow: 3 admitted, the 4th denied, another key admitted");

  const std::vector<ratelimit::redis::Request> batch = {{"batch", 1}, {"batch", 1}, {"batch", 1}, {"batch", 1}};
  const std::vector<ratelimit::Decision> decisions = limiter.allow_many(batch);
  ok = report(decisions.size() == 4 && decisions[0].allowed && decisions[2].allowed && !decisions[3].allowed,
              "allow_many: 3 of 4 admitted") &&
       ok;

  std::promise<ratelimit::Decision> admitted;
  limiter.allow_async("async", 1, [&admitted](std::exception_ptr e, ratelimit::Decision d) {
    if (e) d.allowed = false;
    admitted.set_value(d);
  });
  std::promise<ratelimit::CheckResult> denied;
  limiter.check_async("client", 1, 2s,
                      [&denied](std::exception_ptr, ratelimit::CheckResult r) { denied.set_value(r); });
  const ratelimit::CheckResult full = denied.get_future().get();
  ok = report(admitted.get_future().get().allowed && !full.decision.allowed && !full.failed(),
              "allow_async admits a fresh key, check_async denies the full one") &&
       ok;

  ok = report(limiter.reset("client") && limiter.allow("client").allowed, "reset: the key admits again") && ok;
  ok =
      report(limiter.stats().failures == 0 && limiter.policy().burst == 3, "no failure counted, the policy as given") &&
      ok;
  return ok;
}

// Nothing listens on port 1: the failure policy answers, and says so.
bool failure_policy_answers() {
  ratelimit::redis::RedisOptions o;
  o.port = 1;
  o.connect_timeout = 200ms;
  o.on_error = ratelimit::FailurePolicy::fail_closed;
  o.on_backend_failure = ratelimit::redis::ignore_backend_failure;
  Limiter closed(kThree, o);
  const ratelimit::CheckResult c = closed.check("client");
  o.on_error = ratelimit::FailurePolicy::fail_open;
  Limiter open(kThree, o);
  const ratelimit::CheckResult a = open.check("client");
  return report(c.failed() && !c.decision.allowed && a.failed() && a.decision.allowed,
                "nothing listening: fail_closed denies, fail_open admits, both say the failure policy answered");
}

// A policy Redis cannot take is refused at construction, naming the field.
bool bad_policy_refused() {
  try {
    Limiter limiter(ratelimit::Gcra{.limit = 1, .period = 1500ns, .burst = 1}, ratelimit::redis::RedisOptions{});
  } catch (const std::invalid_argument& e) {
    return report(std::string(e.what()).find("Gcra.period") != std::string::npos, "a bad period names Gcra.period");
  }
  return report(false, "a bad period names Gcra.period");
}

// A refused async call (negative cost, bad timeout) throws with nothing started: the callback given as an rvalue is
// not taken (as header-only, where it is moved only once the call starts), so the caller may still answer with it.
bool refused_async_keeps_callback() {
  ratelimit::redis::RedisOptions o;
  o.port = 1;
  o.on_backend_failure = ratelimit::redis::ignore_backend_failure;
  Limiter limiter(kThree, o);
  struct Callback {
    std::unique_ptr<int> state = std::make_unique<int>(1);
    void operator()(std::exception_ptr, const ratelimit::CheckResult&) {}
    void operator()(std::exception_ptr, ratelimit::Decision) {}
  };
  Callback check, allow, timed;
  int refused = 0;
  try {
    limiter.check_async("client", -1, std::move(check));
  } catch (const std::invalid_argument&) {
    ++refused;
  }
  try {
    limiter.allow_async("client", -1, std::move(allow));
  } catch (const std::invalid_argument&) {
    ++refused;
  }
  try {
    limiter.check_async("client", 1, 0ms, std::move(timed));
  } catch (const std::invalid_argument&) {
    ++refused;
  }
  return report(refused == 3 && check.state && allow.state && timed.state,
                "a refused check_async / allow_async keeps the callback it was given");
}

}  // namespace

int main() {
  bool ok = failure_policy_answers();
  ok = bad_policy_refused() && ok;
  ok = refused_async_keeps_callback() && ok;
  const int port = separate_test::start_redis();
  if (port == 0) {
    std::printf("redis-server not found\n");
    return ok ? 0 : 1;
  }
  try {
    ok = decides_on_redis(port) && ok;
    ok = separate_test::pool_limiters_decide(port) && ok;
  } catch (const std::exception& e) {
    ok = report(false, e.what());
  }
  separate_test::stop_redis();
  return ok ? 0 : 1;
}
