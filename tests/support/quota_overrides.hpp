// What the quota override suites share (include/ratelimit/layers/README.md "Per-key quota overrides"): a directory of
// overrides whose answers a test changes, and a race of 8 threads checking one key while its override flips.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <ratelimit/clock.hpp>
#include <ratelimit/policy/fixed_window.hpp>
#include <ratelimit/layers/quota_overrides.hpp>

namespace ratelimit_test {

/// A resolver whose answers the test changes: one policy per key, counting its calls. Thread-safe.
template <class P>
struct OverrideDirectory {
  std::mutex mutex;
  std::map<std::string, P, std::less<>> overrides;
  std::atomic<int> calls{0};
  void set(const std::string& key, std::optional<P> p) {
    std::lock_guard lock(mutex);
    if (p) {
      overrides.insert_or_assign(key, *p);
    } else {
      overrides.erase(key);
    }
  }
  ratelimit::OverrideResolver<P> resolver() {
    return [this](std::string_view key) -> std::optional<P> {
      ++calls;
      std::lock_guard lock(mutex);
      if (auto it = overrides.find(key); it != overrides.end()) return it->second;
      return std::nullopt;
    };
  }
};

struct OverrideRace {
  int admitted = 0;
  int bad = 0;  // decisions not wholly one of the two policies'
};

/// 8 threads make `checks` checks each of key "k" while `big` flips (the resolver of `overrides` answers by
/// it, between policies of limits `small` and `large`) and, alternately, the cached answer is invalidated or
/// `clock` moves by 1 ms (the TTL path), every `pause`, for as long as the checks run.
template <class Q>
OverrideRace race_while_the_override_flips(Q& overrides, std::atomic<bool>& big, ratelimit::ManualClock& clock,
                                           int checks, std::int64_t small, std::int64_t large,
                                           std::chrono::microseconds pause) {
  std::atomic<bool> stop{false};
  std::atomic<int> admitted{0};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < checks; ++i) {
        const auto d = overrides.allow("k");
        if ((d.limit != small && d.limit != large) || d.remaining > d.limit) ++bad;
        if (d.allowed) ++admitted;
      }
    });
  }
  std::thread flipper([&] {
    for (int i = 0; !stop; ++i) {
      big = !big;
      if (i % 2 == 0) {
        overrides.invalidate("k");
      } else {
        clock.advance(std::chrono::milliseconds(1));
      }
      std::this_thread::sleep_for(pause);
    }
  });
  for (auto& t : threads) t.join();
  stop = true;
  flipper.join();
  return {admitted.load(), bad.load()};
}

/// The race above on `limiter` (a `FixedWindow{50, 1 h}` limiter on `clock`) whose key "k" flips between no
/// override and `FixedWindow{100, 1 h}` (cache TTL 1 ms): every decision is one policy's, at least 50 and at
/// most 100 are admitted, and the key's count afterwards is exactly the admissions.
template <class L>
void expect_exact_while_the_override_flips(L& limiter, ratelimit::ManualClock& clock, int checks,
                                           std::chrono::microseconds pause) {
  using namespace std::chrono_literals;
  std::atomic<bool> big{false};
  ratelimit::QuotaOverrides overrides(
      limiter,
      [&](std::string_view) -> std::optional<ratelimit::FixedWindow> {
        if (big.load()) return ratelimit::FixedWindow{100, 1h};
        return std::nullopt;
      },
      ratelimit::OverrideOptions{.cache_ttl = 1ms});
  const OverrideRace race = race_while_the_override_flips(overrides, big, clock, checks, 50, 100, pause);
  EXPECT_EQ(race.bad, 0);
  EXPECT_GE(race.admitted, 50);
  EXPECT_LE(race.admitted, 100);
  big = true;
  overrides.invalidate("k");
  EXPECT_EQ(overrides.peek("k").remaining, 100 - race.admitted);
}

/// Cost 0 is always allowed (include/ratelimit/README.md "Keys, costs and validation"), also for key "k" of `limiter`
/// once its usage (6 units under the override `big`) exceeds the lowered override `small` (limit 3): the check of cost
/// 1 is denied, cost 0 admitted with nothing left, and a refund's decision (the state as a cost-0 check sees it) admits
/// too.
template <class L, class P>
void expect_cost_zero_allowed_over_a_lowered_limit(L& limiter, P big, P small) {
  using namespace std::chrono_literals;
  OverrideDirectory<P> dir;
  dir.set("k", big);
  ratelimit::QuotaOverrides overrides(limiter, dir.resolver());
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(overrides.allow("k").allowed) << P::kind << " " << i;
  dir.set("k", small);
  overrides.invalidate("k");
  EXPECT_FALSE(overrides.allow("k").allowed) << P::kind;
  const auto d = overrides.allow("k", 0);
  EXPECT_TRUE(d.allowed) << P::kind;
  EXPECT_EQ(d.limit, 3) << P::kind;
  EXPECT_EQ(d.remaining, 0) << P::kind;
  EXPECT_EQ(d.retry_after, 0ns) << P::kind;
  const auto r = overrides.refund("k", 1);
  EXPECT_TRUE(r.allowed) << P::kind;
  EXPECT_EQ(r.remaining, 0) << P::kind;
}

}  // namespace ratelimit_test
