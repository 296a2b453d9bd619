#pragma once

// A deterministic fleet simulation (include/ratelimit/redis/README.md "Budget leases", sizing): one process, one
// ManualClock, N real LeasedLimiters against an in-memory stand-in for Redis (the lease arithmetic behind a Route) with
// a modelled round trip, over many keys with Zipf demand. Reports fleet admissions against the bound, under-admission
// against one exact limiter fed the same requests, and Redis calls per check.

#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include <ratelimit/ratelimit.hpp>
#include <ratelimit/redis/leased_limiter.hpp>

namespace ratelimit_test {

/// Redis stand-in: runs the lease scripts' arithmetic (ratelimit::lease::GcraLease) on a map. Server time is the
/// client time sent plus half the round trip; each execute moves the shared clock by the whole round trip.
class SimulatedRedis final : public ratelimit::redis::Route {
 public:
  SimulatedRedis(const ratelimit::Gcra& policy, std::chrono::microseconds lifetime, ratelimit::ManualClock clock,
                 std::chrono::microseconds round_trip)
      : lease_(policy.rules(1000), lifetime.count()), clock_(std::move(clock)), rtt_us_(round_trip.count()) {
    options_.time_source = ratelimit::redis::TimeSource::client;
  }

  void execute(std::span<ratelimit::redis::engine::RouteCall> calls) override {
    clock_.advance(std::chrono::microseconds(rtt_us_ / 2));
    for (auto& c : calls) {
      ++calls_;
      // {"EVALSHA", sha, "1", key, now, mode, a, b, c, T, tol}
      const std::string key(c.args[3]);
      const std::int64_t now = std::stoll(std::string(c.args[4])) + rtt_us_ / 2;
      const std::string_view mode = c.args[5];
      const std::int64_t a = std::stoll(std::string(c.args[6]));
      const std::int64_t b = std::stoll(std::string(c.args[7]));
      const std::int64_t g = std::stoll(std::string(c.args[8]));
      auto& s = state_[key];
      ++calls_by_key_[key];
      std::int64_t v[9];
      if (mode == "2") {
        const auto d = lease_.give_back(s, now, a, b, g);
        fill(v, d, 0, s.tat > now ? s.tat : now, s.granted);
      } else if (mode == "1") {
        fill(v, lease_.peek(s, now), 0, 0, s.granted);
      } else {
        const auto r = lease_.grant(s, now, a, b);
        fill(v, r.decision, r.units, r.mark, r.granted_after);
      }
      c.reply = make_reply(v);
      c.error.reset();
    }
    clock_.advance(std::chrono::microseconds(rtt_us_ - rtt_us_ / 2));
  }
  /// The simulation is synchronous: an async call fails at once (the lease logic sends none).
  void submit(ratelimit::redis::engine::PipelineOp& op) override {
    op.complete(ratelimit::redis::engine::Reply{},
                ratelimit::BackendError(ratelimit::BackendErrorCause::io, "SimulatedRedis: no async calls"));
  }
  [[nodiscard]] bool sharded() const noexcept override { return false; }
  [[nodiscard]] const void* domain() const noexcept override { return this; }
  [[nodiscard]] const ratelimit::redis::ConnectionOptions& options() const noexcept override { return options_; }
  [[nodiscard]] const ratelimit::redis::LimiterOptions& limiter_defaults() const noexcept override { return options_; }
  [[nodiscard]] ratelimit::redis::RouteCounters counters() const override { return {}; }
  [[nodiscard]] std::uint64_t calls() const noexcept { return calls_; }
  /// Script calls per Redis key.
  [[nodiscard]] const std::unordered_map<std::string, std::uint64_t>& calls_by_key() const noexcept {
    return calls_by_key_;
  }

 private:
  static void fill(std::int64_t* v, const ratelimit::TickDecision& d, std::int64_t units, std::int64_t mark,
                   std::int64_t after) {
    v[0] = d.allowed ? 1 : 0;
    v[1] = d.limit;
    v[2] = d.remaining;
    v[3] = d.retry_after == ratelimit::TickDecision::never ? -1 : d.retry_after;
    v[4] = d.reset_after;
    v[5] = units;
    v[6] = mark;
    v[7] = after;
    v[8] = -1;
  }
  // A hiredis reply built by hiredis's own reader (freed by freeReplyObject like any other).
  static ratelimit::redis::engine::Reply make_reply(const std::int64_t* v) {
    std::string resp = "*9\r\n";
    for (int i = 0; i < 9; ++i) resp += ":" + std::to_string(v[i]) + "\r\n";
    redisReader* reader = redisReaderCreate();
    redisReaderFeed(reader, resp.data(), resp.size());
    void* out = nullptr;
    redisReaderGetReply(reader, &out);
    redisReaderFree(reader);
    return ratelimit::redis::engine::Reply(static_cast<redisReply*>(out));
  }

  ratelimit::lease::GcraLease lease_;
  ratelimit::ManualClock clock_;
  std::int64_t rtt_us_;
  ratelimit::redis::RedisOptions options_;
  std::unordered_map<std::string, ratelimit::lease::GcraLease::State> state_;
  std::uint64_t calls_ = 0;
  std::unordered_map<std::string, std::uint64_t> calls_by_key_;
};

struct SimulationResult {
  int instances = 0;
  std::size_t keys = 0;
  std::uint64_t checks = 0;
  std::uint64_t admitted = 0;        // fleet, leased
  std::uint64_t exact_admitted = 0;  // one exact limiter (MemoryLimiter) on the same requests
  std::uint64_t redis_calls = 0;
  std::uint64_t over_bound_intervals = 0;
  double hot_fraction_of_bound = 0;  // the hottest key: admitted / (B + floor(D / T))
  double seconds = 0;                // simulated time
  double hot_calls_per_check = 0;    // the 10 hottest keys: Redis calls per check
};

/// `instances` LeasedLimiters over `keys` keys, Zipf(1) demand at `rate` checks/s for `seconds`, each request
/// to a random instance; Gcra{limit 10/s, burst 20}, lifetime 200 ms, round trip 200 us
/// (calls are sequential: the clock moves by each call's round trip, so simulated time runs a little longer). Every
/// admitted unit's time is checked against B + floor(d / T) for every interval of length up to 4 tau, per key.
inline SimulationResult simulate(int instances, std::size_t keys, double rate, double seconds, std::uint32_t seed) {
  using namespace std::chrono_literals;
  const ratelimit::Gcra policy{.limit = 10, .period = 1s, .burst = 20};
  const std::int64_t T = 100'000, B = 20, tau = B * T;
  ratelimit::ManualClock clock;
  auto redis = std::make_shared<SimulatedRedis>(policy, 200ms, clock, 200us);
  ratelimit::redis::LeaseOptions lease;
  lease.lifetime = 200ms;
  lease.max_fraction = 0.25;
  lease.max_keys = 1'000'000;
  using Leased = ratelimit::redis::LeasedLimiter<ratelimit::Gcra, ratelimit::ManualClock, ratelimit::ManualClock>;
  std::vector<std::unique_ptr<Leased>> fleet;
  ratelimit::redis::LimiterOptions lo;
  lo.time_source = ratelimit::redis::TimeSource::client;
  for (int i = 0; i < instances; ++i) fleet.push_back(std::make_unique<Leased>(policy, redis, lo, lease, clock, clock));
  ratelimit::MemoryLimiter<ratelimit::Gcra, ratelimit::ManualClock> exact(policy, {}, clock);

  // Zipf(1) over the keys by inverse CDF on the harmonic sums.
  std::vector<double> cdf(keys);
  double h = 0;
  for (std::size_t k = 0; k < keys; ++k) cdf[k] = (h += 1.0 / static_cast<double>(k + 1));
  for (double& c : cdf) c /= h;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u01(0, 1);
  std::exponential_distribution<double> gap(rate);

  SimulationResult r;
  r.instances = instances;
  r.keys = keys;
  std::unordered_map<std::size_t, std::vector<std::int64_t>> served;
  std::uint64_t hot_checks = 0;
  double t = 0;
  while ((t += gap(rng)) < seconds) {
    const auto t_ns = std::chrono::nanoseconds(static_cast<std::int64_t>(t * 1e9));
    if (clock.now().time_since_epoch() < t_ns) clock.set(ratelimit::ManualClock::time_point(t_ns));
    const std::size_t k = static_cast<std::size_t>(std::lower_bound(cdf.begin(), cdf.end(), u01(rng)) - cdf.begin());
    const std::string key = "k" + std::to_string(k);
    auto& l = *fleet[rng() % static_cast<std::uint64_t>(instances)];
    ++r.checks;
    if (k < 10) ++hot_checks;
    if (exact.allow(key)) ++r.exact_admitted;
    if (l.allow(key)) {
      ++r.admitted;
      served[k].push_back(clock.now().time_since_epoch().count() / 1000);
    }
  }
  r.redis_calls = redis->calls();
  std::uint64_t hot_calls = 0;
  for (std::size_t k = 0; k < 10; ++k) {
    const auto it = redis->calls_by_key().find(fleet.front()->redis_key("k" + std::to_string(k)));
    if (it != redis->calls_by_key().end()) hot_calls += it->second;
  }
  r.hot_calls_per_check = static_cast<double>(hot_calls) / static_cast<double>(std::max<std::uint64_t>(1, hot_checks));
  std::size_t hottest = 0, hottest_n = 0;
  for (auto& [k, stamps] : served) {
    std::sort(stamps.begin(), stamps.end());
    if (stamps.size() > hottest_n) hottest = k, hottest_n = stamps.size();
    for (std::size_t j = 0; j < stamps.size(); ++j) {
      for (std::size_t i = j + 1; i-- > 0;) {
        const std::int64_t d = stamps[j] - stamps[i];
        if (d > 4 * tau) break;
        if (static_cast<std::int64_t>(j - i + 1) > B + d / T) {
          ++r.over_bound_intervals;
          break;
        }
      }
    }
  }
  (void)hottest;
  const std::int64_t duration_us = clock.now().time_since_epoch().count() / 1000;
  r.seconds = static_cast<double>(duration_us) / 1e6;
  r.hot_fraction_of_bound = static_cast<double>(hottest_n) / static_cast<double>(B + duration_us / T);
  return r;
}

}  // namespace ratelimit_test
