#pragma once

/// @file
/// `LeasedLimiter`: slices of a key's Redis budget leased and served from memory
/// (include/ratelimit/redis/README.md "Budget leases").

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ratelimit/clock.hpp"
#include "ratelimit/decision.hpp"
#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/policy/lease.hpp"
#include "ratelimit/policy/policy.hpp"
#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/denial_cache.hpp"
#include "ratelimit/redis/detail/answer.hpp"
#include "ratelimit/redis/detail/decision_reply.hpp"
#include "ratelimit/redis/detail/key_encoding.hpp"
#include "ratelimit/redis/detail/limiter_setup.hpp"
#include "ratelimit/redis/detail/script_binding.hpp"
#include "ratelimit/redis/engine/routes.hpp"
#include "ratelimit/redis/options.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {

/// How `LeasedLimiter` sizes and keeps its leases. A plain aggregate; every field has a working default.
struct LeaseOptions {
  /// The lease lifetime L: every unit of a lease is served within 7/8 L of the lease request (monotonic clock). In
  /// (0, 1 h], whole microseconds; the same in every process sharing a limit (it is part of the Redis key).
  std::chrono::microseconds lifetime{200'000};
  /// Most units one lease asks for; >= 1.
  std::int64_t max_slice = 1000;
  /// Most of the lease-mode limit one lease asks for, as a fraction; in (0, 1] (about 1/N for N processes).
  double max_fraction = 0.1;
  /// Most keys kept in process memory (leases and denials); >= 1. A key beyond it is checked per request.
  std::size_t max_keys = 100'000;
  /// Deny a key's requests locally after Redis denied them, until the slice asked for fits.
  bool deny_cache = true;
};

/// What a `LeasedLimiter` has done (each counter read atomically, not all at one instant), with the fallback's.
struct LeaseStats : FallbackCounters {
  /// Checks (`allow`, `check`, `peek`).
  std::uint64_t checks = 0;
  /// Script calls sent to Redis (grants, peeks, returns), and of them the returns.
  std::uint64_t redis_calls = 0;
  std::uint64_t returns = 0;
  /// Checks answered from a lease, and denials answered by the denial cache, without Redis.
  std::uint64_t lease_admits = 0;
  std::uint64_t cached_denials = 0;
  /// Units received in grants, and units sent back unused.
  std::uint64_t units_granted = 0;
  std::uint64_t units_returned = 0;
  /// Checks that Redis failed (the failure policy answered or `raise` threw), and failed returns (units lost).
  std::uint64_t failures = 0;
  std::uint64_t failed_returns = 0;
};

/// A Redis limiter that leases slices of each key's budget and serves them from memory, never over-admitting across
/// processes; unused units go back when a lease expires and on destruction (include/ratelimit/redis/README.md "Budget
/// leases": bounds, lease-mode limit). Thread-safe. Throws `std::invalid_argument` for bad options (naming the
/// field), a negative cost or a key over `max_key_bytes`; `BackendError` under `FailurePolicy::raise`.
/// @tparam P `Gcra`, `TokenBucket` or `FixedWindow` (durations whole microseconds, as for `RedisLimiter`).
/// @tparam C the clock whose time is sent with `time_source = client` (tests: `ManualClock`).
/// @tparam M the monotonic clock measuring lease lifetimes (tests: the same `ManualClock`).
/// Example:
///   // One hot key of 100,000 per minute shared by a fleet: each process leases slices of it. A burst
///   // then admits about burst - lifetime / T at once (4,667 here, T = 0.6 ms): a lease lifetime is held back.
///   ratelimit::redis::RedisOptions options;
///   options.connection() = ratelimit::redis::ConnectionOptions::from_url("redis://redis.internal:6379");
///   ratelimit::redis::LeasedLimiter<ratelimit::Gcra> limiter(
///       ratelimit::Gcra{.limit = 100'000, .period = std::chrono::minutes(1), .burst = 5'000}, options,
///       ratelimit::redis::LeaseOptions{.lifetime = std::chrono::milliseconds(200)});
///   if (!limiter.allow("search-api")) { /* answer 429 */ }  // most checks never leave the process
template <Policy P, Clock C = std::chrono::system_clock, Clock M = std::chrono::steady_clock>
class LeasedLimiter {
  using Arithmetic = lease::LeaseOf<P>;

 public:
  using policy_type = P;

  /// Its own connection pool (or cluster router) from `options`; connects nothing yet. Throws
  /// `std::invalid_argument` naming the field (e.g. `LeaseOptions.lifetime`, `ConnectionOptions.host`).
  LeasedLimiter(P policy, const RedisOptions& options, LeaseOptions lease = {}, C clock = {}, M mono = {})
      : LeasedLimiter(std::move(policy), make_route(options.connection()), options.limiter(), lease, std::move(clock),
                      std::move(mono)) {}

  /// Sharing `route` (a `ConnectionPool`, `ClusterRouter` or `SentinelRoute`), with its own limiter options.
  template <class R>
  LeasedLimiter(P policy, std::shared_ptr<R> route, const LimiterOptions& limiter, LeaseOptions lease = {},
                C clock = {}, M mono = {})
      : LeasedLimiter(std::move(policy), detail::route_of(std::move(route)), limiter, lease, std::move(clock),
                      std::move(mono)) {}

  /// Over any `Route` (also a simulation's stand-in). Throws `std::invalid_argument` for a null route or bad options.
  LeasedLimiter(P policy, std::shared_ptr<Route> route, const LimiterOptions& limiter, LeaseOptions lease, C clock,
                M mono)
      : policy_(std::move(policy)),
        rules_(policy_.rules(detail::kTickNs)),
        lease_(checked(lease)),
        arithmetic_(rules_, lease_.lifetime.count()),
        route_(std::move(route)),
        options_(detail::options_on(route_.get(), &limiter)),
        script_(&detail::script_for(std::is_same_v<P, FixedWindow> ? "fixed_window_lease" : "gcra_lease")),
        clock_(std::move(clock)),
        mono_(std::move(mono)),
        answer_(policy_, options_, clock_, mono_, false) {
    (void)detail::bind<P>(rules_);  // the Lua exactness bounds
    if constexpr (std::is_same_v<P, FixedWindow>) {
      params_ = {std::to_string(rules_.limit()), std::to_string(rules_.window())};
      identity_ = detail::limiter_identity(P::kind, options_.name, params_);
    } else {
      params_ = {std::to_string(rules_.emission_interval()), std::to_string(arithmetic_.tolerance())};
      identity_ = detail::limiter_identity(P::kind, options_.name, detail::bind<P>(rules_).params);
    }
    const std::int64_t effective = arithmetic_.leasable() ? lease_.lifetime.count() : 0;
    identity_ += ":lease" + std::to_string(effective);
    serve_window_ns_ = effective * detail::kTickNs / 8 * 7;
    const auto frac = static_cast<std::int64_t>(lease_.max_fraction * static_cast<double>(arithmetic_.limit()));
    cap_ = std::max<std::int64_t>(1, std::min(lease_.max_slice, frac));
    per_shard_ = std::max<std::size_t>(1, lease_.max_keys / kShards);
  }

  LeasedLimiter(const LeasedLimiter&) = delete;
  LeasedLimiter& operator=(const LeasedLimiter&) = delete;

  /// Returns every lease's unused units (one batch; failures counted). In a forked child it returns nothing and
  /// touches no lock or condition variable (they are the parent's).
  ~LeasedLimiter() {
    if (engine::detail::fork_generation().load(std::memory_order_relaxed) != generation_) {
      for (Shard& s : shards_) (void)s.cv.release();  // may count a parent's waiting thread: never destroyed
      return;
    }
    try {
      std::vector<Return> all;
      for (Shard& s : shards_) {
        std::lock_guard<std::mutex> lock(s.mutex);
        for (auto& [key, e] : s.entries) take_return(key, e, all);
      }
      send_returns(all);
    } catch (...) {  // a destructor must not throw; units not returned are lost (under-admission only)
    }
  }

  /// Checks `cost` units for `key`: from its lease when it holds enough, else through Redis. Throws as the class.
  Decision allow(std::string_view key, std::int64_t cost = 1) { return check(key, cost).decision; }

  /// As `allow`, and says who decided (`Outcome::failure_policy` when Redis failed and `on_error` answered).
  CheckResult check(std::string_view key, std::int64_t cost = 1) {
    check_key(key);
    ratelimit::detail::require_cost(cost);
    checks_.fetch_add(1, std::memory_order_relaxed);
    return run(key, cost);
  }

  /// What a cost-1 request would see, consuming nothing (the lease's answer, else Redis's). Throws as `allow`.
  Decision peek(std::string_view key) {
    check_key(key);
    checks_.fetch_add(1, std::memory_order_relaxed);
    Shard& shard = shard_of(key);
    {
      std::lock_guard<std::mutex> lock(shard.mutex);
      const auto it = shard.entries.find(key);
      if (it != shard.entries.end() && live(it->second, mono_ns())) return local_decision(it->second, mono_ns(), true);
    }
    Ticket ticket = answer_.admit();
    if (!ticket) return answer_.serve(key, 1, Mode::peek).decision;
    try {
      return send_one(call(key, "1", 1, 1), &ticket).decision;
    } catch (const BackendError& e) {
      return failure(e, key, 1, true).decision;
    }
  }

  /// Forgets `key`: drops its local lease unreturned and resets its Redis state (other processes' leases keep
  /// serving; their returns give the fresh state nothing). False when Redis failed and `on_error` is not `raise`.
  bool reset(std::string_view key) {
    check_key(key);
    answer_.fallback.reset(key);
    {
      Shard& shard = shard_of(key);
      std::lock_guard<std::mutex> lock(shard.mutex);
      shard.entries.erase(std::string(key));
    }
    try {
      (void)send_one(call(key, "3", 0, 0), nullptr);
      return true;
    } catch (const BackendError& e) {
      return answer_.failed_reset(e);
    }
  }

  /// Returns every expired lease's unused units now (one batch); how many leases went back. Call it now and then
  /// when keys go quiet (each Redis call also returns a few of its shard's).
  std::size_t sweep() {
    std::vector<Return> out;
    const std::int64_t now = mono_ns();
    for (Shard& s : shards_) {
      std::lock_guard<std::mutex> lock(s.mutex);
      for (auto& [key, e] : s.entries) {
        if (!e.busy && e.units > 0 && now >= e.deadline) take_return(key, e, out);
      }
      std::erase_if(s.expiries, [now](const auto& expiry) { return expiry.first <= now; });
    }
    send_returns(out);
    return out.size();
  }

  /// The counters. Thread-safe.
  [[nodiscard]] LeaseStats stats() const noexcept {
    LeaseStats s;
    s.checks = checks_.load(std::memory_order_relaxed);
    s.redis_calls = redis_calls_.load(std::memory_order_relaxed);
    s.returns = returns_.load(std::memory_order_relaxed);
    s.lease_admits = lease_admits_.load(std::memory_order_relaxed);
    s.cached_denials = cached_denials_.load(std::memory_order_relaxed);
    s.units_granted = units_granted_.load(std::memory_order_relaxed);
    s.units_returned = units_returned_.load(std::memory_order_relaxed);
    s.failures = answer_.failures.load(std::memory_order_relaxed);
    s.failed_returns = failed_returns_.load(std::memory_order_relaxed);
    static_cast<FallbackCounters&>(s) = answer_.fallback.counters();
    return s;
  }

  /// Gives nothing back (a refunded unit could outlive its grant: include/ratelimit/redis/README.md "Budget leases")
  /// and returns `peek(key)`; for layers that refund. Throws `std::invalid_argument` for a negative cost, and as
  /// `peek`.
  Decision refund(std::string_view key, std::int64_t cost) {
    ratelimit::detail::require_cost(cost);
    return peek(key);
  }

  [[nodiscard]] const P& policy() const noexcept { return policy_; }
  /// The clock whose time is sent with `time_source = client` (layers read it too).
  [[nodiscard]] C& clock() noexcept { return clock_; }

  /// The lease-mode limit (`Decision::limit`).
  [[nodiscard]] std::int64_t limit() const noexcept { return arithmetic_.limit(); }
  /// False when the policy cannot cover a lease (`B * T <= L`): every check is then one Redis call.
  [[nodiscard]] bool leasable() const noexcept { return arithmetic_.leasable(); }
  /// The Redis key of `key`: `<prefix><identity>:lease<L_us>{<encoded key>}:lease` (never a `RedisLimiter`'s).
  [[nodiscard]] std::string redis_key(std::string_view key) const {
    return detail::redis_key(options_.key_prefix, identity_, key, ":lease");
  }
  /// The options in effect (immutable, as `policy()` and `lease_options()`).
  [[nodiscard]] const RedisOptions& options() const noexcept { return options_; }
  [[nodiscard]] const LeaseOptions& lease_options() const noexcept { return lease_; }
  /// Where this limiter's commands go.
  [[nodiscard]] const std::shared_ptr<Route>& route() const noexcept { return route_; }

 private:
  static constexpr std::size_t kShards = 16;
  static constexpr std::size_t kReturnsPerCall = 8;

  struct Entry {
    std::int64_t units = 0;     // lease units left
    std::int64_t deadline = 0;  // monotonic ns: serve while now < deadline
    std::int64_t mark = 0;      // the grant's mark and counter, for its return
    std::int64_t granted_after = 0;
    detail::Denial denial;  // the denial cache's entry (monotonic ns)
    Decision last{};        // Redis's last answer (remaining: unleased units then)
    std::int64_t last_at = 0;
    double demand = 0;       // EWMA of units asked per serving window
    std::int64_t asked = 0;  // units asked since `asked_since`
    std::int64_t asked_since = 0;
    bool busy = false;  // a Redis call for this key is in flight
  };
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view k) const noexcept { return std::hash<std::string_view>{}(k); }
  };
  struct Shard {
    std::mutex mutex;
    std::unique_ptr<std::condition_variable> cv = std::make_unique<std::condition_variable>();
    std::unordered_map<std::string, Entry, Hash, std::equal_to<>> entries;
    std::deque<std::pair<std::int64_t, std::string>> expiries;  // (deadline, key) of leases handed out
  };
  struct Return {
    std::string key;
    std::int64_t unused, mark, granted_after;
  };
  struct Call {
    std::string key;
    std::array<std::string, 5> argv;  // now, mode, a, b, c
    engine::RouteCall route;
  };
  struct Parsed {
    Decision decision;
    std::int64_t units = 0, mark = 0, granted_after = 0, serve_for_ns = 0;
  };
  using Answer = detail::Answer<P, C, M>;
  using Ticket = typename Answer::Ticket;
  using Mode = detail::Mode;

  void check_key(std::string_view key) const { ratelimit::detail::check_key_length(key, options_.max_key_bytes); }
  Shard& shard_of(std::string_view key) { return shards_[(std::hash<std::string_view>{}(key) >> 7) % kShards]; }
  std::int64_t mono_ns() { return ratelimit::detail::now_ns(mono_); }
  static bool live(const Entry& e, std::int64_t now) { return e.units > 0 && now < e.deadline; }
  std::int64_t now_us() { return detail::now_us(clock_); }

  static LeaseOptions checked(LeaseOptions o) {
    if (o.lifetime.count() <= 0 || o.lifetime > std::chrono::hours(1)) {
      ratelimit::detail::invalid("LeaseOptions.lifetime", "must be in (0, 1 h]");
    }
    if (o.max_slice < 1) ratelimit::detail::invalid("LeaseOptions.max_slice", "must be >= 1");
    if (!(o.max_fraction > 0.0 && o.max_fraction <= 1.0)) {
      ratelimit::detail::invalid("LeaseOptions.max_fraction", "must be in (0, 1]");
    }
    if (o.max_keys < 1) ratelimit::detail::invalid("LeaseOptions.max_keys", "must be >= 1");
    return o;
  }

  /// The slice to ask for: the key's demand per serving window (past average, or this window's if more), in
  /// [need, cap].
  std::int64_t want_for(Entry& e, std::int64_t need, std::int64_t now) {
    if (!arithmetic_.leasable() || serve_window_ns_ <= 0) return need;
    double demand = static_cast<double>(e.asked);
    if (const std::int64_t elapsed = now - e.asked_since; elapsed >= serve_window_ns_) {
      const double observed = demand * static_cast<double>(serve_window_ns_) / static_cast<double>(elapsed);
      e.demand = e.demand == 0 ? observed : (e.demand + observed) / 2;
      e.asked = 0;
      e.asked_since = now;
      demand = 0;
    }
    const auto want = static_cast<std::int64_t>(std::max(e.demand, demand) + 0.999);
    return std::max(need, std::min(want, cap_));
  }

  /// The entry's answer at `now` without Redis: an admission from its lease, or its cached denial.
  Decision local_decision(const Entry& e, std::int64_t now, bool allowed) const {
    Decision d;
    d.allowed = allowed;
    d.limit = arithmetic_.limit();
    d.remaining = std::min(d.limit, e.units + e.last.remaining);
    if (!allowed) d.retry_after = e.denial.retry_after(now);
    const auto since = std::chrono::nanoseconds(now - e.last_at);
    d.reset_after = std::max(std::chrono::nanoseconds(0), e.last.reset_after - since);
    return d;
  }

  /// Moves the entry's lease units (if any) into `out` as a return.
  static void take_return(std::string_view key, Entry& e, std::vector<Return>& out) {
    if (e.units > 0) out.push_back(Return{std::string(key), e.units, e.mark, e.granted_after});
    e.units = 0;
    e.deadline = 0;
  }

  /// Takes up to `kReturnsPerCall` expired leases of `shard` (lock held) into `out`.
  void expired_returns(Shard& shard, std::int64_t now, std::vector<Return>& out) {
    std::size_t n = 0;
    while (!shard.expiries.empty() && shard.expiries.front().first <= now && n < kReturnsPerCall) {
      const auto it = shard.entries.find(shard.expiries.front().second);
      if (it != shard.entries.end() && !it->second.busy && it->second.deadline == shard.expiries.front().first) {
        take_return(it->first, it->second, out);
        ++n;
      }
      shard.expiries.pop_front();
    }
  }

  /// The lease script's call of `key` in `mode` ("0" grant, "1" peek, "2" return, "3" reset) with `a`, `b`, `c`.
  Call call(std::string_view key, std::string_view mode, std::int64_t a, std::int64_t b, std::int64_t c = 0) {
    return Call{redis_key(key),
                {detail::time_arg(options_, now_us()), std::string(mode), std::to_string(a), std::to_string(b),
                 std::to_string(c)},
                {}};
  }
  Call return_call(const Return& r) { return call(r.key, "2", r.unused, r.mark, r.granted_after); }

  /// Sends every call pipelined, each key's calls in order.
  void execute(std::vector<Call>& calls) {
    if (calls.empty()) return;
    std::vector<engine::RouteCall> route_calls;
    route_calls.reserve(calls.size());
    for (const Call& c : calls) {
      const auto& a = c.argv;
      route_calls.push_back(detail::script_call(*script_, c.key, {a[0], a[1], a[2], a[3], a[4]}, params_));
    }
    redis_calls_.fetch_add(calls.size(), std::memory_order_relaxed);
    answer_.run(*route_, *script_, route_calls);
    for (std::size_t i = 0; i < calls.size(); ++i) calls[i].route = std::move(route_calls[i]);
  }

  /// Sends `c` alone and parses its reply, settling `ticket` (if any); throws the `BackendError`.
  Parsed send_one(Call c, Ticket* ticket) {
    std::vector<Call> calls;
    calls.push_back(std::move(c));
    execute(calls);
    try {
      Parsed p = parse(calls[0]);
      if (ticket != nullptr) Answer::settle(*ticket, nullptr);
      return p;
    } catch (const BackendError& e) {
      if (ticket != nullptr) Answer::settle(*ticket, calls[0].route.reply ? nullptr : &e);
      throw;
    }
  }

  void send_returns(const std::vector<Return>& returns) {
    if (returns.empty()) return;
    std::vector<Call> calls;
    calls.reserve(returns.size());
    for (const Return& r : returns) calls.push_back(return_call(r));
    execute(calls);
    account_returns(returns, calls);
  }

  void account_returns(const std::vector<Return>& returns, std::vector<Call>& calls) {
    for (std::size_t i = 0; i < returns.size(); ++i) {
      returns_.fetch_add(1, std::memory_order_relaxed);
      try {
        (void)parse(calls[i]);
        units_returned_.fetch_add(static_cast<std::uint64_t>(returns[i].unused), std::memory_order_relaxed);
      } catch (const BackendError& e) {
        failed_returns_.fetch_add(1, std::memory_order_relaxed);
        answer_.notify(e);
      }
    }
  }

  /// The reply of a lease script, checked against its contract; throws `BackendError` otherwise.
  Parsed parse(const Call& c) const {
    const std::array<std::int64_t, 9> v = detail::integers<9>(detail::reply_of(c.route), "lease");
    constexpr std::int64_t max_us = ratelimit::detail::kMaxHorizonNs / 1000;
    if ((v[0] != 0 && v[0] != 1) || v[1] != arithmetic_.limit() || v[2] < 0 || v[2] > v[1] || v[3] < -1 ||
        v[3] > max_us || v[4] < 0 || v[4] > max_us || v[5] < 0 || v[5] > v[1] || v[8] < -1 || v[8] > max_us) {
      throw BackendError(BackendErrorCause::protocol, "malformed lease reply: out of range");
    }
    const auto never_or_ns = [](std::int64_t us) { return us == -1 ? Decision::never.count() : us * detail::kTickNs; };
    return Parsed{Decision{v[0] == 1, v[1], v[2], std::chrono::nanoseconds(never_or_ns(v[3])),
                           std::chrono::nanoseconds(v[4] * detail::kTickNs)},
                  v[5], v[6], v[7], never_or_ns(v[8])};
  }

  /// The failure step for a check (or peek) of `key` that Redis failed with `e`; throws `e` under `raise`.
  CheckResult failure(const BackendError& e, std::string_view key, std::int64_t cost, bool peek = false) {
    CheckResult r = answer_.failed_call(e, key, cost, peek ? Mode::peek : Mode::check, nullptr, [&] {
      return answer_.failure_decision(
          arithmetic_.limit(), [&] { return arithmetic_.evaluate(typename Arithmetic::State{}, now_us(), cost); });
    });
    if (options_.on_error == FailurePolicy::raise) throw e;
    return r;
  }

  /// The answer without Redis at `now` (lock held): the lease's when it holds `cost`, or the cached denial.
  std::optional<CheckResult> local(Entry& e, std::int64_t cost, std::int64_t now) {
    if (cost == 0 && live(e, now)) return CheckResult{local_decision(e, now, true), Outcome::decided};
    if (cost > 0 && live(e, now) && e.units >= cost) {
      e.units -= cost;
      lease_admits_.fetch_add(1, std::memory_order_relaxed);
      return CheckResult{local_decision(e, now, true), Outcome::decided};
    }
    if (lease_.deny_cache && e.denial.denies(cost, now)) {
      cached_denials_.fetch_add(1, std::memory_order_relaxed);
      return CheckResult{local_decision(e, now, false), Outcome::decided};
    }
    return std::nullopt;
  }

  CheckResult run(std::string_view key, std::int64_t cost) {
    Shard& shard = shard_of(key);
    std::unique_lock<std::mutex> lock(shard.mutex);
    for (int attempt = 0;; ++attempt) {
      const std::int64_t now = mono_ns();
      auto it = shard.entries.find(key);
      if (it == shard.entries.end() && make_room(shard)) {
        it = shard.entries.emplace(std::string(key), Entry{}).first;
        it->second.asked_since = now;
      }
      if (it == shard.entries.end()) {  // no room: per request, uncached
        lock.unlock();
        return direct(key, cost);
      }
      Entry& e = it->second;
      e.asked += cost;
      if (std::optional<CheckResult> r = local(e, cost, now)) return *r;
      if (e.busy) {
        e.asked -= cost;  // counted again on the next pass
        if (shard.cv->wait_for(lock, options_.command_timeout * 2) == std::cv_status::timeout) {
          lock.unlock();
          return direct(key, cost);
        }
        continue;
      }
      Ticket ticket = answer_.admit();
      if (!ticket) {  // Redis is failing and no probe is due: the fallback answers (the lease stays for later)
        e.asked -= cost;
        lock.unlock();
        return answer_.serve(key, cost, Mode::check);
      }
      if (std::optional<CheckResult> r = lease(shard, lock, e, key, cost, now, ticket, attempt)) return *r;
    }
  }

  /// To Redis (lock held, released meanwhile): returns `key`'s lease and a few expired ones of the shard, asks for
  /// a new slice. Empty when a late grant went back and the caller should try again.
  std::optional<CheckResult> lease(Shard& shard, std::unique_lock<std::mutex>& lock, Entry& e, std::string_view key,
                                   std::int64_t cost, std::int64_t now, Ticket& ticket, int attempt) {
    std::vector<Return> returns;
    take_return(key, e, returns);
    expired_returns(shard, now, returns);
    const std::int64_t want = cost == 0 ? 0 : want_for(e, cost, now);
    e.busy = true;
    lock.unlock();
    std::vector<Call> calls;
    calls.reserve(returns.size() + 1);
    for (const Return& r : returns) calls.push_back(return_call(r));
    calls.push_back(call(key, "0", cost, want));
    const std::int64_t sent = mono_ns();
    std::optional<Parsed> parsed;
    std::optional<BackendError> error;
    try {
      execute(calls);
      account_returns(returns, calls);
      parsed = parse(calls.back());
      Answer::settle(ticket, nullptr);
    } catch (const BackendError& ex) {
      error = ex;
      Answer::settle(ticket, calls.back().route.reply ? nullptr : &ex);
    } catch (...) {
      lock.lock();
      finish(shard, key);
      throw;
    }
    lock.lock();
    Entry* entry = finish(shard, key);
    if (error) {
      lock.unlock();
      return failure(*error, key, cost);
    }
    units_granted_.fetch_add(static_cast<std::uint64_t>(parsed->units), std::memory_order_relaxed);
    // A grant arriving after its serving window goes back (a policy that cannot lease serves on arrival).
    const std::int64_t deadline = sent + std::min(serve_window_ns_, parsed->serve_for_ns);
    const std::int64_t after = mono_ns();
    if (parsed->decision.allowed && parsed->units > 0 && arithmetic_.leasable() && after >= deadline) {
      std::vector<Return> late{Return{std::string(key), parsed->units, parsed->mark, parsed->granted_after}};
      lock.unlock();
      send_returns(late);
      lock.lock();
      if (attempt < 2) return std::nullopt;
      return CheckResult{late_denial(parsed->decision), Outcome::decided};
    }
    return CheckResult{keep(shard, entry, key, *parsed, cost, want, sent, deadline, after), Outcome::decided};
  }

  /// Keeps grant `p` in `entry` (lock held; null if reset meanwhile) as a lease or a denial; the request's decision.
  Decision keep(Shard& shard, Entry* entry, std::string_view key, Parsed& p, std::int64_t cost, std::int64_t want,
                std::int64_t sent, std::int64_t deadline, std::int64_t now) {
    if (entry == nullptr) return p.decision;
    entry->last = p.decision;
    entry->last_at = now;
    if (p.decision.allowed) {
      entry->denial.clear();
      if (const std::int64_t left = p.units - cost; left > 0) {
        entry->units = left;
        entry->deadline = deadline;
        entry->mark = p.mark;
        entry->granted_after = p.granted_after;
        shard.expiries.emplace_back(deadline, std::string(key));
      }
    } else if (lease_.deny_cache && cost > 0) {
      // This process asks again when its whole slice fits (a shorter wait would spend a call on a sliver).
      const std::int64_t wait = slice_wait(p.decision.retry_after, want - cost);
      entry->denial.set(cost, wait, sent);
      if (wait != detail::Denial::kNever) {
        p.decision.retry_after = std::max(std::chrono::nanoseconds(1), entry->denial.retry_after(now));
      }
    }
    Decision d = p.decision;
    d.remaining = std::min(d.limit, d.remaining + entry->units);
    return d;
  }

  /// A grant that came after its serving window: a denial to try again at once.
  Decision late_denial(const Decision& d) const {
    return Decision{false, arithmetic_.limit(), 0, std::chrono::nanoseconds(1), d.reset_after};
  }

  /// The wait (ns) until `extra` units more than `retry_after` covers fit (GCRA `+ extra * T`); `INT64_MAX`: never.
  std::int64_t slice_wait(std::chrono::nanoseconds retry_after, std::int64_t extra) const noexcept {
    if (retry_after == Decision::never) return std::numeric_limits<std::int64_t>::max();
    if constexpr (std::is_same_v<Arithmetic, lease::GcraLease>) {
      return retry_after.count() + std::max<std::int64_t>(0, extra) * arithmetic_.emission_interval() * detail::kTickNs;
    } else {
      return retry_after.count();
    }
  }

  /// Clears the key's busy flag and wakes waiters; the entry (null if it was reset meanwhile).
  Entry* finish(Shard& shard, std::string_view key) {
    const auto it = shard.entries.find(key);
    shard.cv->notify_all();
    if (it == shard.entries.end()) return nullptr;
    it->second.busy = false;
    return &it->second;
  }

  /// Makes room for one more entry in `shard` (lock held): drops idle entries without a lease.
  bool make_room(Shard& shard) {
    if (shard.entries.size() < per_shard_) return true;
    const std::int64_t now = mono_ns();
    detail::drop_idle(shard.entries, per_shard_,
                      [now](const Entry& e) { return !e.busy && e.units == 0 && !e.denial.live(now); });
    return shard.entries.size() < per_shard_;
  }

  /// One Redis grant of exactly `cost`, nothing kept locally (a key for which the table has no room).
  CheckResult direct(std::string_view key, std::int64_t cost) {
    Ticket ticket = answer_.admit();
    if (!ticket) return answer_.serve(key, cost, Mode::check);
    const std::int64_t sent = mono_ns();
    Parsed p;
    try {
      p = send_one(call(key, "0", cost, cost), &ticket);
    } catch (const BackendError& e) {
      return failure(e, key, cost);
    }
    units_granted_.fetch_add(static_cast<std::uint64_t>(p.units), std::memory_order_relaxed);
    // As in `lease`: a leasable key's grant that arrives after its serving window is not served.
    if (arithmetic_.leasable() && p.units > 0 && mono_ns() >= sent + std::min(serve_window_ns_, p.serve_for_ns)) {
      send_returns({Return{std::string(key), p.units, p.mark, p.granted_after}});
      return {late_denial(p.decision), Outcome::decided};
    }
    return {p.decision, Outcome::decided};
  }

  P policy_;
  RulesOf<P> rules_;
  LeaseOptions lease_;
  Arithmetic arithmetic_;
  std::shared_ptr<Route> route_;
  RedisOptions options_;
  const detail::EmbeddedScript* script_;
  C clock_;
  M mono_;
  std::vector<std::string> params_;
  std::string identity_;
  std::int64_t serve_window_ns_ = 0;
  std::int64_t cap_ = 1;
  std::size_t per_shard_ = 1;
  std::array<Shard, kShards> shards_;
  const unsigned generation_ = engine::detail::fork_generation().load(std::memory_order_relaxed);
  Answer answer_;  // the failure policy, hook and fallback; its `failures` are this limiter's
  std::atomic<std::uint64_t> checks_{0}, redis_calls_{0}, returns_{0}, lease_admits_{0}, cached_denials_{0},
      units_granted_{0}, units_returned_{0}, failed_returns_{0};
};

}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
