#pragma once

// Differential traces (include/ratelimit/README.md "Guarantees", "Backends agree"): thousands of random calls (time,
// key, cost, peek, reset, batches) against MemoryLimiter and RedisLimiter (client time) must give identical decisions
// on every field. Times, windows, periods and emission intervals are whole microseconds.
//
// One legitimate difference is steered around: a key whose state is full again may be forgotten (memory
// reclaims it on touch or while sweeping; Redis when its TTL ends), and forgetting also forgets the
// latest write time that a clock stepping back is held to. A shadow model (the pure rules, never
// forgetting) records when each key was first seen full; a call on that key is never placed before that
// time, where the two backends may disagree by design.
//
// A second one is measured, not hidden: SlidingWindowCounter's retry_after floors a*W/prev (and
// (L-n)*W/cur) in the backend's tick, so in memory it can be a fraction of a microsecond, and Redis's
// answer is then exactly that rounded up to the next microsecond (the first whole microsecond at which
// the request passes). Every other field, and retry_after whenever memory's is whole microseconds, must be
// identical; a window that is a multiple of lcm(1..L) microseconds makes every retry_after whole, and
// that trace must be identical on every field.
//
// The machinery lives here so that every Redis deployment (one server, a cluster) runs the same traces.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis.hpp>

namespace ratelimit_test::differential {

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::ManualClock;

/// Where a trace runs: options reaching the Redis deployment (fresh prefix, client time, raise), and the
/// check that every key under a prefix has a TTL (returning how many keys there were).
struct TraceTarget {
  std::function<ratelimit::redis::RedisOptions()> options;
  std::function<std::size_t(const std::string& prefix)> expect_all_keys_expire;
};

inline std::string show(const Decision& d) {
  std::ostringstream s;
  s << "{" << d.allowed << ", " << d.limit << ", " << d.remaining << ", " << d.retry_after.count() << "ns, "
    << d.reset_after.count() << "ns}";
  return s.str();
}

template <ratelimit::Policy P>
class Trace {
 public:
  Trace(const TraceTarget& target, P policy, std::int64_t scale_us, std::int64_t start_us, std::uint64_t seed)
      : target_(target), policy_(policy), rules_(policy.rules(1)), scale_us_(scale_us), t_us_(start_us), rng_(seed),
        opts_(target.options()), memory_(policy, {}, clock_), redis_(policy, opts_, clock_) {}

  /// Runs `calls` random operations; returns the number of checks compared.
  int run(int calls) {
    const std::int64_t limit = rules_.limit();
    int compared = 0;
    for (int i = 0; i < calls && mismatches_ < 5; ++i) {
      step_time();
      const int op = pick(0, 99);
      if (op < 70) {
        const std::string& key = random_key();
        const std::int64_t cost = random_cost(limit);
        place(key);
        const Decision m = memory_.allow(key, cost);
        const Decision r = redis_.allow(key, cost);
        shadow_allow(key, cost, m);
        compare(m, r, "allow", key, cost);
        ++compared;
      } else if (op < 82) {
        const std::string& key = random_key();
        place(key);
        const Decision m = memory_.peek(key);
        const Decision r = redis_.peek(key);
        const ratelimit::TickDecision s = ratelimit::peek(rules_, shadow_[key], now_ns());
        compare_shadow(m, s, "peek", key, 1);
        observe();
        compare(m, r, "peek", key, 1);
        ++compared;
      } else if (op < 84) {
        const std::string& key = random_key();
        memory_.reset(key);
        EXPECT_TRUE(redis_.reset(key));
        shadow_.erase(key);
        forget_at_.erase(key);
      } else {
        std::vector<std::string> keys;
        std::vector<ratelimit::redis::Request> batch;
        const int n = pick(2, 6);
        for (int j = 0; j < n; ++j) keys.push_back(random_key());
        for (const std::string& k : keys) place(k);
        for (int j = 0; j < n; ++j) batch.push_back({keys[static_cast<std::size_t>(j)], random_cost(limit)});
        const std::vector<Decision> r = redis_.allow_many(batch);
        EXPECT_EQ(r.size(), batch.size());
        for (std::size_t j = 0; j < batch.size() && j < r.size(); ++j) {
          const Decision m = memory_.allow(batch[j].key, batch[j].cost);
          shadow_allow(keys[j], batch[j].cost, m);
          compare(m, r[j], "allow_many", keys[j], batch[j].cost);
          ++compared;
        }
      }
    }
    EXPECT_EQ(mismatches_, 0);
    EXPECT_EQ(redis_.stats().failures, 0u);
    EXPECT_GT(target_.expect_all_keys_expire(opts_.key_prefix), 0u);
    return compared;
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::int64_t pick64(std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_); }
  std::int64_t now_ns() const { return t_us_ * 1000; }

  void step_time() {
    const int r = pick(0, 99);
    if (r < 45) {
      t_us_ += pick64(0, scale_us_ / 4);
    } else if (r < 60) {
      // same time
    } else if (r < 85) {
      t_us_ += pick64(0, 2 * scale_us_);
    } else if (r < 93) {
      t_us_ -= pick64(1, scale_us_ / 2);  // the clock steps back
    } else {
      t_us_ += pick64(0, 5 * scale_us_);
    }
    set_clock();
  }
  void set_clock() { clock_.set(ManualClock::time_point(std::chrono::microseconds(t_us_))); }

  const std::string& random_key() {
    static const std::vector<std::string> keys{"", "a", "{x}", std::string("n\0ul:", 5), "b}:%7D", "\xff\x80{"};
    return keys[static_cast<std::size_t>(pick(0, static_cast<int>(keys.size()) - 1))];
  }

  std::int64_t random_cost(std::int64_t limit) {
    const int r = pick(0, 99);
    if (r < 70) return 1;
    if (r < 82) return 0;
    if (r < 95) return limit >= 2 ? pick64(2, limit) : 1;
    return pick64(limit + 1, limit + 3);
  }

  /// Never before the time the key was first seen full (see the file comment).
  void place(const std::string& key) {
    const auto it = forget_at_.find(key);
    if (it != forget_at_.end() && now_ns() < it->second) {
      t_us_ = it->second / 1000;
      set_clock();
    }
  }

  void shadow_allow(const std::string& key, std::int64_t cost, const Decision& memory_decision) {
    const ratelimit::TickDecision s = ratelimit::decide(rules_, shadow_[key], now_ns(), cost);
    compare_shadow(memory_decision, s, "allow", key, cost);
    if (s.allowed && cost > 0) forget_at_.erase(key);
    observe();
  }

  /// Memory may reclaim any key that is full at the time of any call.
  void observe() {
    for (const auto& [k, state] : shadow_) {
      if (!forget_at_.contains(k) && rules_.is_full(state, now_ns())) forget_at_[k] = now_ns();
    }
  }

  void compare(const Decision& m, const Decision& r, const char* op, const std::string& key, std::int64_t cost) {
    if (m == r) return;
    if constexpr (std::is_same_v<P, ratelimit::SlidingWindowCounter>) {
      Decision rounded = m;
      rounded.retry_after = std::chrono::ceil<std::chrono::microseconds>(m.retry_after);
      if (m.retry_after % 1us != 0ns && rounded == r) {
        ++rounded_;
        return;
      }
    }
    ++mismatches_;
    ADD_FAILURE() << P::kind << " " << op << " key.size()=" << key.size() << " cost=" << cost << " t_us=" << t_us_
                  << "\n  memory " << show(m) << "\n  redis  " << show(r);
  }
  void compare_shadow(const Decision& m, const ratelimit::TickDecision& s, const char* op, const std::string& key,
                      std::int64_t cost) {
    const Decision d = ratelimit::to_decision(s, 1);
    if (m == d) return;
    ++mismatches_;
    ADD_FAILURE() << "shadow model disagrees with MemoryLimiter (test bug): " << op << " key.size()=" << key.size()
                  << " cost=" << cost << "\n  memory " << show(m) << "\n  shadow " << show(d);
  }

  const TraceTarget& target_;
  P policy_;
  ratelimit::RulesOf<P> rules_;
  std::int64_t scale_us_;
  std::int64_t t_us_;
  std::mt19937_64 rng_;
  ManualClock clock_;
  ratelimit::redis::RedisOptions opts_;
  ratelimit::MemoryLimiter<P, ManualClock> memory_;
  ratelimit::redis::RedisLimiter<P, ManualClock> redis_;
  std::map<std::string, ratelimit::StateOf<P>> shadow_;
  std::map<std::string, std::int64_t> forget_at_;  // ns
  int mismatches_ = 0;

 public:
  /// SlidingWindowCounter only: checks whose retry_after Redis gave as memory's rounded up to 1 us.
  int rounded_ = 0;
};

inline constexpr std::int64_t kNearEpoch = -100'000'017;            // crosses the epoch (negative times)
inline constexpr std::int64_t kToday = 1'700'000'000'000'123;       // a system_clock-sized time in us
inline constexpr int kCalls = 6000;                                 // per trace; two traces per policy

template <ratelimit::Policy P>
int trace(const TraceTarget& target, P policy, std::int64_t scale_us, std::int64_t start_us, std::uint64_t seed,
          int* rounded = nullptr) {
  Trace<P> t(target, policy, scale_us, start_us, seed);
  const int n = t.run(kCalls);
  if (rounded != nullptr) *rounded = t.rounded_;
  return n;
}

inline void differential_fixed_window(const TraceTarget& target) {
  int n = trace(target, ratelimit::FixedWindow{.limit = 5, .window = 100ms}, 100'000, kNearEpoch, 1);
  n += trace(target, ratelimit::FixedWindow{.limit = 3, .window = 7013us}, 7013, kToday, 2);
  EXPECT_GE(n, 10000);
}

inline void differential_sliding_window_log(const TraceTarget& target) {
  int n = trace(target, ratelimit::SlidingWindowLog{.limit = 5, .window = 100ms}, 100'000, kNearEpoch, 3);
  n += trace(target, ratelimit::SlidingWindowLog{.limit = 4, .window = 3001us}, 3001, kToday, 4);
  EXPECT_GE(n, 10000);
}

inline void differential_sliding_window_counter(const TraceTarget& target) {
  // W = 100.8 ms = 40 * lcm(1..10) us: every retry_after is whole microseconds, so all fields identical.
  int rounded_exact = -1;
  int n = trace(target, ratelimit::SlidingWindowCounter{.limit = 10, .window = 100800us}, 100'800, kNearEpoch, 5,
                &rounded_exact);
  EXPECT_EQ(rounded_exact, 0);
  // W = 4999 us, L = 7: memory's retry_after is often a fraction of a microsecond (see the file comment).
  int rounded = 0;
  n += trace(target, ratelimit::SlidingWindowCounter{.limit = 7, .window = 4999us}, 4999, kToday, 6, &rounded);
  EXPECT_GT(rounded, 0) << "the trace should reach sub-microsecond retry_after in memory";
  testing::Test::RecordProperty("swc_retry_after_rounded_to_us", rounded);
  std::printf("SlidingWindowCounter W=4999us: %d of the checks had memory retry_after rounded up to 1 us on Redis\n",
              rounded);
  EXPECT_GE(n, 10000);
}

inline void differential_token_bucket(const TraceTarget& target) {
  // T = 25 ms and T = 1013 us: whole microseconds, as include/ratelimit/README.md "Guarantees" requires for agreement.
  int n = trace(target, ratelimit::TokenBucket{.capacity = 5, .refill_tokens = 4, .refill_period = 100ms}, 100'000,
                kNearEpoch, 7);
  n += trace(target, ratelimit::TokenBucket{.capacity = 3, .refill_tokens = 1, .refill_period = 1013us}, 3039, kToday, 8);
  EXPECT_GE(n, 10000);
}

inline void differential_gcra(const TraceTarget& target) {
  int n = trace(target, ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 4}, 400'000, kNearEpoch, 9);
  n += trace(target, ratelimit::Gcra{.limit = 3, .period = 3069us, .burst = 5}, 5115, kToday, 10);  // T = 1023 us
  EXPECT_GE(n, 10000);
}


}  // namespace ratelimit_test::differential
