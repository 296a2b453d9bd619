#pragma once

/// @file
/// `RedisConcurrencyLimiter`: at most `permits` units in flight per key across the processes sharing a Redis server
/// or cluster (include/ratelimit/concurrency/README.md "Concurrency limits").

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ratelimit/concurrency/permit.hpp"
#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/detail/entropy.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/redis/abi.hpp"
#include "ratelimit/detail/key_length.hpp"
#include "ratelimit/redis/detail/decision_reply.hpp"
#include "ratelimit/redis/detail/key_encoding.hpp"
#include "ratelimit/redis/detail/limiter_setup.hpp"
#include "ratelimit/redis/detail/script_binding.hpp"
#include "ratelimit/redis/engine/reply.hpp"
#include "ratelimit/redis/engine/routes.hpp"
#include "ratelimit/redis/engine/script_call.hpp"
#include "ratelimit/redis/engine/slots.hpp"
#include "ratelimit/redis/options.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {

/// Options of `RedisConcurrencyLimiter`; a plain aggregate. Key prefix, `max_key_bytes` and `on_error` come from
/// the route's limiter defaults, or the `RedisOptions` given.
struct RedisConcurrencyOptions {
  /// Units in flight per key at most, over all processes; in [1, 100,000].
  std::int64_t permits = 1;
  /// How long a permit counts without renewal (a crashed holder's units come back after it); in [10 ms, 24 h].
  std::chrono::milliseconds expiry{30'000};
  /// Renew held permits every this often in the background; 0: `expiry / 3`. In [0, expiry).
  std::chrono::milliseconds renew_every{0};
  /// False: no background renewal (a permit then counts for `expiry` at most).
  bool renew = true;
  /// `acquire` polls Redis with exponential backoff (full jitter) from this to `poll_max`; in [1 ms, poll_max].
  std::chrono::milliseconds poll_min{2};
  /// Longest wait between two polls; in [poll_min, 10 s].
  std::chrono::milliseconds poll_max{50};
  /// The limiter's identity in its Redis keys (`<prefix>concurrency[@<name>]{<key>}:permits`): limiters of one name
  /// share permits. No `{` `}`, at most 256 bytes.
  std::string name{};
};

/// At most `permits` units in flight per key across processes, on Redis (include/ratelimit/concurrency/README.md
/// "Concurrency limits"): one sorted set per key of the units held, scored by their expiry. A background thread renews
/// held permits; one whose renewal fails or whose `expiry` passes turns invalid for good (`on_lost` runs once).
/// Thread-safe. Must outlive its permits.
/// Example:
///   ratelimit::redis::RedisOptions redis;
///   redis.connection() = ratelimit::redis::ConnectionOptions::from_url("redis://redis.internal:6379");
///   // At most 4 exports per tenant running in the whole fleet; a crashed holder's unit expires in 30 s.
///   ratelimit::redis::RedisConcurrencyLimiter exports(
///       ratelimit::redis::RedisConcurrencyOptions{.permits = 4, .expiry = std::chrono::seconds(30)}, redis);
///   ratelimit::PermitResult r = exports.try_acquire("tenant:acme");
///   if (!r) { /* busy fleet-wide, or Redis failed: to_string(r.status) says which */ }
class RedisConcurrencyLimiter final : public PermitSource {
 public:
  /// Called once, on the renewal thread (or a `renew_now` caller), when a held permit is lost; never after its
  /// release. A release of the permit from another thread waits until it returned (an I/O thread's is done then),
  /// so it must not wait for one; releasing a permit itself is fine. Must not throw.
  using OnLost = std::function<void()>;

  /// Over `route` (a `ConnectionPool`, `ClusterRouter` or `SentinelRoute`). Throws `std::invalid_argument` naming
  /// the field (e.g. `RedisConcurrencyOptions.permits`).
  template <class R>
  RedisConcurrencyLimiter(RedisConcurrencyOptions options, std::shared_ptr<R> route)
      : RedisConcurrencyLimiter(std::move(options), detail::route_of(std::move(route))) {}
  /// With a pool (or a cluster router, with `cluster_nodes`) of its own. Throws as above.
  RedisConcurrencyLimiter(RedisConcurrencyOptions options, const RedisOptions& redis)
      : RedisConcurrencyLimiter(std::move(options), make_route(redis.connection(), redis.limiter())) {}

  RedisConcurrencyLimiter(RedisConcurrencyOptions options, std::shared_ptr<Route> route)
      : options_(validated(std::move(options))),
        route_(std::move(route)),
        redis_(detail::options_on(route_.get(), nullptr).limiter()) {
    std::uint64_t words[2];
    ratelimit::detail::fill_with_entropy(words, 2);
    instance_ = to_hex(words[0]) + to_hex(words[1]);
    expiry_us_ = std::to_string(options_.expiry.count() * 1000);
    permits_arg_ = std::to_string(options_.permits);
    if (options_.renew) renewer_ = std::thread([this] { renew_loop(); });
  }
  RedisConcurrencyLimiter(const RedisConcurrencyLimiter&) = delete;
  RedisConcurrencyLimiter& operator=(const RedisConcurrencyLimiter&) = delete;

  /// Stops the renewal thread (held permits then expire unless released).
  ~RedisConcurrencyLimiter() {
    if (engine::detail::fork_generation().load(std::memory_order_relaxed) != generation_) {
      // A forked child: the thread and the waiters the condition variables count are the parent's. Leave them.
      (void)renew_cv_.release();
      (void)release_cv_.release();
      (void)told_cv_.release();
      if (renewer_.joinable()) new std::thread(std::move(renewer_));  // never joined nor destroyed
      return;
    }
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    renew_cv_->notify_all();
    if (renewer_.joinable()) renewer_.join();
  }

  /// Takes `units` for `key` if they fit now (one script run): the permit, or `busy` (with the units in flight),
  /// `too_many_units`, or `backend_failed` (Redis failed, `on_error` not `raise`). Throws `std::invalid_argument`
  /// for `units < 1` or a key over `max_key_bytes`; `BackendError` when Redis fails under `FailurePolicy::raise`.
  PermitResult try_acquire(std::string_view key, std::int64_t units = 1, OnLost on_lost = {}) {
    validate(key, units, std::chrono::nanoseconds(0));
    return attempt(key, units, on_lost).result;
  }

  /// As `try_acquire`, polling until the units fit or `max_wait` (steady clock) ran out (`timed_out`), backing off
  /// with jitter in [poll_min, poll_max] capped by the earliest expiry of a unit held; a release in this process
  /// wakes waiters at once. No order across processes. Throws as `try_acquire`, and for a negative `max_wait`.
  /// Example:
  ///   ratelimit::redis::RedisConcurrencyLimiter exports(ratelimit::redis::RedisConcurrencyOptions{.permits = 4},
  ///                                                     ratelimit::redis::RedisOptions{});
  ///   std::atomic<bool> lost{false};  // set on the renewal thread if the permit is lost: stop working then
  ///   ratelimit::PermitResult r = exports.acquire("tenant:acme", 1, std::chrono::seconds(2), [&] { lost = true; });
  ///   if (r.status == ratelimit::PermitStatus::timed_out) { /* answer 503: still busy after 2 s */ }
  PermitResult acquire(std::string_view key, std::int64_t units, std::chrono::nanoseconds max_wait,
                       OnLost on_lost = {}) {
    validate(key, units, max_wait);
    const auto deadline = std::chrono::steady_clock::now() + max_wait;
    std::chrono::nanoseconds backoff = options_.poll_min;
    thread_local std::minstd_rand jitter(std::random_device{}());
    for (;;) {
      const std::uint64_t releases = local_releases_.load(std::memory_order_acquire);
      Attempt a = attempt(key, units, on_lost);
      if (a.result.status != PermitStatus::busy) return std::move(a.result);
      polls_.fetch_add(1, std::memory_order_relaxed);
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        a.result.status = max_wait.count() == 0 ? PermitStatus::busy : PermitStatus::timed_out;
        return std::move(a.result);
      }
      const auto span = std::max<std::int64_t>(1, (backoff - options_.poll_min).count());
      std::chrono::nanoseconds sleep =
          options_.poll_min +
          std::chrono::nanoseconds(static_cast<std::int64_t>(jitter() % static_cast<std::uint64_t>(span)));
      if (a.wait_us > 0) sleep = std::min<std::chrono::nanoseconds>(sleep, std::chrono::microseconds(a.wait_us));
      sleep = std::min<std::chrono::nanoseconds>(sleep, deadline - now);
      backoff = std::min<std::chrono::nanoseconds>(backoff * 2, options_.poll_max);
      std::unique_lock lock(mutex_);
      release_cv_->wait_for(lock, sleep, [&] { return local_releases_.load(std::memory_order_acquire) != releases; });
    }
  }

  /// Units of `key` in flight now (one `TIME` and one `ZCOUNT`). Throws `BackendError` when Redis fails.
  std::int64_t in_flight(std::string_view key) {
    const std::string k = redis_key(key);
    const std::string after_now = "(" + std::to_string(server_time_us());  // expiring later than now
    engine::RouteCall call;
    call.slot = engine::detail::key_slot(k);
    call.args = {"ZCOUNT", k, after_now, "+inf"};
    route_->execute(std::span<engine::RouteCall>(&call, 1));
    const redisReply& r = detail::reply_of(call);
    if (r.type != REDIS_REPLY_INTEGER) throw BackendError(BackendErrorCause::protocol, "ZCOUNT: not an integer");
    return r.integer;
  }

  /// The Redis key of `key`'s permits: `<prefix>concurrency[@<name>]{<encoded key>}:permits`.
  [[nodiscard]] std::string redis_key(std::string_view key) const {
    return detail::redis_key(redis_.key_prefix, identity(), key, ":permits");
  }
  /// Permits held through this limiter now (not yet released).
  [[nodiscard]] std::size_t held() const {
    std::lock_guard lock(mutex_);
    return held_.size();
  }
  /// Polls that found the key busy; renewals sent; failed releases.
  [[nodiscard]] std::uint64_t polls() const noexcept { return polls_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t renewals() const noexcept { return renewals_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t failed_releases() const noexcept {
    return failed_releases_->load(std::memory_order_relaxed);
  }
  [[nodiscard]] const RedisConcurrencyOptions& options() const noexcept { return options_; }
  /// Renews every held permit now (as the background thread does); returns how many were lost.
  std::size_t renew_now() { return renew_all(); }

  // PermitSource
  /// Gives the units back, once a running `on_lost` of the permit returned (see `OnLost`; an I/O thread never
  /// waits: the callback's thread releases it then).
  void release_permit(void* token, std::int64_t units) noexcept override {
    std::shared_ptr<Held> h;
    {
      std::unique_lock lock(mutex_);
      auto it = held_.find(static_cast<Held*>(token));
      if (it == held_.end()) return;
      h = it->second;
      const auto self = std::this_thread::get_id();
      if (h->teller != std::thread::id{} && h->teller != self && engine::detail::on_io_thread()) {
        h->deferred_units = units;  // released by the callback's thread when it returns
        return;
      }
      told_cv_->wait(lock, [&] { return h->teller == std::thread::id{} || h->teller == self; });
      if (held_.erase(static_cast<Held*>(token)) == 0) return;  // released by another thread meanwhile
    }
    finish_release(*h, units);
  }
  [[nodiscard]] bool permit_valid(const void* token) const noexcept override {
    std::lock_guard lock(mutex_);
    auto it = held_.find(static_cast<Held*>(const_cast<void*>(token)));
    if (it == held_.end()) return false;
    const Held& h = *it->second;
    return !h.lost && std::chrono::steady_clock::now() < h.valid_until;
  }

 private:
  struct Held {
    std::string redis_key;
    std::string released_key;  // the given-up ids, in redis_key's slot
    std::string id;
    std::int64_t units = 0;
    std::chrono::steady_clock::time_point valid_until;
    bool lost = false;  // under mutex_
    OnLost on_lost;
    std::thread::id teller{};         // under mutex_: the thread running this permit's `on_lost` now
    std::int64_t deferred_units = 0;  // under mutex_: released on an I/O thread while `on_lost` ran
  };
  struct Attempt {
    PermitResult result;
    std::int64_t wait_us = 0;
  };
  using Counter = std::shared_ptr<std::atomic<std::uint64_t>>;

  static std::string to_hex(std::uint64_t v) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string s(16, '0');
    for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = kDigits[v & 15];
    return s;
  }

  static RedisConcurrencyOptions validated(RedisConcurrencyOptions o) {
    using std::chrono::milliseconds;
    if (o.permits < 1 || o.permits > 100'000) {
      ratelimit::detail::invalid("RedisConcurrencyOptions.permits",
                                 "must be in [1, 100000], got " + std::to_string(o.permits));
    }
    if (o.expiry < milliseconds(10) || o.expiry > std::chrono::hours(24)) {
      ratelimit::detail::invalid("RedisConcurrencyOptions.expiry", "must be in [10 ms, 24 h]");
    }
    if (o.renew_every.count() < 0 || o.renew_every >= o.expiry) {
      ratelimit::detail::invalid("RedisConcurrencyOptions.renew_every", "must be in [0, expiry)");
    }
    if (o.renew_every.count() == 0) o.renew_every = std::max(milliseconds(1), o.expiry / 3);
    if (o.poll_max > std::chrono::seconds(10)) {
      ratelimit::detail::invalid("RedisConcurrencyOptions.poll_max", "must be at most 10 s");
    }
    if (o.poll_min < milliseconds(1) || o.poll_min > o.poll_max) {
      ratelimit::detail::invalid("RedisConcurrencyOptions.poll_min", "must be in [1 ms, poll_max]");
    }
    if (o.name.find_first_of("{}") != std::string::npos || o.name.size() > 256) {
      ratelimit::detail::invalid("RedisConcurrencyOptions.name", "must hold no '{' or '}' and be at most 256 bytes");
    }
    return o;
  }

  void validate(std::string_view key, std::int64_t units, std::chrono::nanoseconds max_wait) const {
    ratelimit::detail::check_key_length(key, redis_.max_key_bytes);
    ratelimit::detail::require_positive(units, "units");
    if (max_wait.count() < 0) ratelimit::detail::invalid("max_wait", "must be >= 0");
  }

  [[nodiscard]] std::string identity() const {
    return options_.name.empty() ? std::string("concurrency") : "concurrency@" + options_.name;
  }

  /// One acquire script run; a failure is answered by `on_error` (thrown under `raise`).
  Attempt attempt(std::string_view key, std::int64_t units, OnLost& on_lost) {
    if (units > options_.permits) return {PermitResult{{}, PermitStatus::too_many_units, 0, 0, options_.permits}, 0};
    auto h = std::make_shared<Held>();
    h->redis_key = redis_key(key);
    h->released_key = detail::redis_key(redis_.key_prefix, identity(), key, ":released");
    h->id = instance_ + "-" + std::to_string(next_id_.fetch_add(1, std::memory_order_relaxed));
    h->units = units;
    const std::string units_arg = std::to_string(units);
    const auto sent = std::chrono::steady_clock::now();
    const detail::EmbeddedScript& s = detail::script_for("concurrency_acquire");
    try {
      engine::RouteCall call =
          detail::script_call(s, h->redis_key, {permits_arg_, units_arg, h->id, expiry_us_}, {}, h->released_key);
      engine::run_script(*route_, s, std::span<engine::RouteCall>(&call, 1));
      // It may still run: released now, and kept from taking units if it runs later.
      if (call.error && (call.sent || call.error->cause() == BackendErrorCause::timeout)) {
        release_in_redis(*h, units, true);
      }
      const std::array<std::int64_t, 3> r = detail::integers<3>(detail::reply_of(call), "concurrency_acquire");
      const std::int64_t in_flight = r[1];
      if (r[0] != 1) return {PermitResult{{}, PermitStatus::busy, in_flight, 0, options_.permits}, r[2]};
      h->valid_until = sent + options_.expiry;
      h->on_lost = std::move(on_lost);
      Held* token = h.get();
      {
        std::lock_guard lock(mutex_);
        held_.emplace(token, std::move(h));
      }
      return {PermitResult{Permit(this, token, units), PermitStatus::acquired, in_flight, 0, options_.permits}, 0};
    } catch (const BackendError&) {
      if (redis_.on_error == FailurePolicy::raise) throw;
      return {PermitResult{{}, PermitStatus::backend_failed, 0, 0, options_.permits}, 0};
    }
  }

  /// Removes permit `h`'s `units` in Redis: a blocking call, or an async one on an I/O thread and for an acquire
  /// given up (`given_up`: its id is kept from taking units later). A failure is counted (the units expire).
  void release_in_redis(const Held& h, std::int64_t units, bool given_up) noexcept {
    const detail::EmbeddedScript& s = detail::script_for("concurrency_release");
    try {
      const std::string units_arg = std::to_string(units);
      const std::string mark = given_up ? expiry_us_ : std::string("0");  // no global: it would need an initialiser
      engine::RouteCall call = detail::script_call(s, h.redis_key, {units_arg, h.id, mark}, {}, h.released_key);
      auto failed = [](const engine::Reply& r, const std::optional<BackendError>& e) {
        return e || !r || r->type != REDIS_REPLY_ARRAY;
      };
      if (given_up || engine::detail::on_io_thread()) {
        auto done = [counter = failed_releases_, failed](engine::Reply r, std::optional<BackendError> e, bool) {
          if (failed(r, e)) counter->fetch_add(1, std::memory_order_relaxed);
        };
        const auto deadline = std::chrono::steady_clock::now() + route_->options().command_timeout;
        detail::start_async_call(*route_, s, call, deadline, std::move(done));  // throws only with nothing started
        return;
      }
      engine::run_script(*route_, s, std::span<engine::RouteCall>(&call, 1));
      if (failed(call.reply, call.error)) failed_releases_->fetch_add(1, std::memory_order_relaxed);
    } catch (...) {
      failed_releases_->fetch_add(1, std::memory_order_relaxed);
    }
  }

  /// One pipelined round of renewals; returns how many permits were lost (and tells their holders).
  std::size_t renew_all() {
    std::vector<std::shared_ptr<Held>> batch;
    {
      std::lock_guard lock(mutex_);
      for (auto& [token, h] : held_) {
        if (!h->lost) batch.push_back(h);
      }
    }
    if (batch.empty()) return 0;
    const detail::EmbeddedScript& s = detail::script_for("concurrency_renew");
    std::vector<std::string> units(batch.size());
    std::vector<engine::RouteCall> calls;
    calls.reserve(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      units[i] = std::to_string(batch[i]->units);
      calls.push_back(detail::script_call(s, batch[i]->redis_key, {units[i], batch[i]->id, expiry_us_}));
    }
    const auto sent = std::chrono::steady_clock::now();
    try {
      engine::run_script(*route_, s, calls);
    } catch (...) {
      for (engine::RouteCall& c : calls) c.error = BackendError(BackendErrorCause::io, "renewal failed");
    }
    renewals_.fetch_add(calls.size(), std::memory_order_relaxed);
    std::vector<std::pair<std::shared_ptr<Held>, OnLost>> tell;
    std::size_t lost = 0;
    {
      std::lock_guard lock(mutex_);
      for (std::size_t i = 0; i < batch.size(); ++i) {
        // Released meanwhile: nobody to tell (the batch keeps it alive: no new permit has its address).
        if (!held_.contains(batch[i].get())) continue;
        Held& h = *batch[i];
        const engine::RouteCall& c = calls[i];
        const bool kept = !c.error && c.reply && c.reply->type == REDIS_REPLY_ARRAY && c.reply->elements == 1 &&
                          c.reply->element[0]->type == REDIS_REPLY_INTEGER && c.reply->element[0]->integer == 1;
        if (kept && !h.lost) {
          h.valid_until = sent + options_.expiry;
        } else if (!h.lost) {
          h.lost = true;
          ++lost;
          if (h.on_lost) tell.emplace_back(batch[i], std::move(h.on_lost));
        }
      }
    }
    for (auto& [h, f] : tell) tell_lost(h, f);
    return lost;
  }

  /// Runs `on_lost` of permit `h` unless it was released since the round began; then a release an I/O thread
  /// asked for meanwhile.
  void tell_lost(const std::shared_ptr<Held>& h, OnLost& on_lost) {
    {
      std::lock_guard lock(mutex_);
      if (!held_.contains(h.get())) return;
      h->teller = std::this_thread::get_id();
    }
    on_lost();
    std::int64_t deferred = 0;
    {
      std::lock_guard lock(mutex_);
      h->teller = {};
      deferred = std::exchange(h->deferred_units, 0);
      if (deferred != 0 && held_.erase(h.get()) == 0) deferred = 0;
    }
    told_cv_->notify_all();
    if (deferred != 0) finish_release(*h, deferred);
  }

  /// After `h` left `held_`: its units back in Redis, and this process's waiters woken.
  void finish_release(const Held& h, std::int64_t units) noexcept {
    release_in_redis(h, units, false);
    {
      std::lock_guard lock(mutex_);
      local_releases_.fetch_add(1, std::memory_order_release);
    }
    release_cv_->notify_all();
  }

  void renew_loop() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      renew_cv_->wait_for(lock, options_.renew_every, [this] { return stopping_; });
      if (stopping_) break;
      lock.unlock();
      renew_all();
      lock.lock();
    }
  }

  /// The server's clock (one `TIME`), microseconds.
  std::int64_t server_time_us() {
    engine::RouteCall call;
    call.args = {"TIME"};
    route_->execute(std::span<engine::RouteCall>(&call, 1));
    const redisReply& r = detail::reply_of(call);
    if (r.type != REDIS_REPLY_ARRAY || r.elements != 2)
      throw BackendError(BackendErrorCause::protocol, "TIME: bad reply");
    return std::stoll(std::string(engine::text(*r.element[0]))) * 1'000'000 +
           std::stoll(std::string(engine::text(*r.element[1])));
  }

  RedisConcurrencyOptions options_;
  std::shared_ptr<Route> route_;
  LimiterOptions redis_;  // key prefix, key bound, failure policy: the pool's (or router's) defaults
  std::string instance_;
  std::string expiry_us_;
  std::string permits_arg_;
  std::atomic<std::uint64_t> next_id_{0};
  mutable std::mutex mutex_;
  std::unordered_map<Held*, std::shared_ptr<Held>> held_;
  bool stopping_ = false;
  using CondVar = std::unique_ptr<std::condition_variable>;  // left undestroyed in a forked child
  CondVar renew_cv_ = std::make_unique<std::condition_variable>();
  CondVar release_cv_ = std::make_unique<std::condition_variable>();
  CondVar told_cv_ = std::make_unique<std::condition_variable>();  // an `on_lost` returned (a release may wait)
  unsigned generation_ = engine::detail::fork_generation().load(std::memory_order_relaxed);
  std::atomic<std::uint64_t> local_releases_{0};
  std::atomic<std::uint64_t> polls_{0};
  std::atomic<std::uint64_t> renewals_{0};
  Counter failed_releases_ = std::make_shared<std::atomic<std::uint64_t>>(0);  // shared with async releases
  std::thread renewer_;
};

}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
