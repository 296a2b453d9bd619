#pragma once

/// @file
/// `RemoteQuotaLimiter`: a client-side limiter for calling someone else's API. It learns each
/// partition's quota from the remote's responses (`remote_headers.hpp`) and admits a request only when
/// the remote would, under a local policy that is both the limit before any response and a ceiling no
/// header can raise. See include/ratelimit/http/README.md "Calling someone else's API".

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ratelimit/clock.hpp"
#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/http/remote_headers.hpp"
#include "ratelimit/memory/memory_limiter.hpp"
#include "ratelimit/policy/gcra.hpp"

namespace ratelimit::http {

/// How the remote's quota is modelled between responses.
enum class RemoteModel {
  /// A rate (GCRA) when the response's `r` and `t` fit one (see README), else a window: the default.
  automatic,
  /// A window: `remaining` requests until `reset`, then `limit` again.
  window,
  /// A rate: `remaining` now, refilled at `limit / window` (needs `RateLimit-Policy`; else a window).
  rate,
};

/// Options of `RemoteQuotaLimiter`.
struct RemoteQuotaOptions {
  /// The most any header is believed (`RemoteMaxima`).
  RemoteMaxima maxima;
  /// Partitions kept; beyond, the least recently used is forgotten (and starts again from the local
  /// policy). >= 1. Bounds memory whatever partitions callers name.
  std::size_t max_partitions = 10'000;
  /// Longest partition name, bytes; longer throws `std::invalid_argument` ("partition").
  std::size_t max_partition_bytes = 256;
  /// How the remote's quota is modelled between responses.
  RemoteModel model = RemoteModel::automatic;
  /// The wait after a 429 that says neither `Retry-After` nor a reset; >= 0.
  std::chrono::seconds default_backoff{1};
  /// When a response reports `remaining` but no reset: assume the window ends this long after it; >= 1 s.
  std::chrono::seconds unknown_reset{60};
  /// The wall clock, for `Retry-After` dates and epoch resets when a response has no `Date`.
  std::function<std::chrono::system_clock::time_point()> wall_clock = [] { return std::chrono::system_clock::now(); };
};

/// The identity of one admitted request, to hand back with its response (`record`).
struct RemoteTicket {
  /// Order of admission within the partition, from 1.
  std::uint64_t sequence = 0;
};

/// The answer of `try_acquire`.
struct RemoteAdmission {
  /// True when the request may be sent now (it was counted).
  bool allowed = false;
  /// When denied: the wait after which it may pass if nothing else changes (a response may shorten it).
  std::chrono::nanoseconds retry_after{0};
  /// When allowed: pass it to `record` with the response.
  RemoteTicket ticket;
  explicit operator bool() const noexcept { return allowed; }
};

/// Counters of a `RemoteQuotaLimiter` (each since construction).
struct RemoteQuotaStats {
  std::int64_t admitted = 0;
  /// Denied because the remote's reported state (remaining, reset, Retry-After) says it would refuse.
  std::int64_t denied_remote = 0;
  /// Denied by the local policy.
  std::int64_t denied_local = 0;
  /// Responses recorded; `stale` of them older than one already applied (only their Retry-After used).
  std::int64_t responses = 0;
  std::int64_t stale = 0;
  /// 429 responses recorded.
  std::int64_t too_many_requests = 0;
  /// Header values ignored as malformed, and values lowered to a configured maximum.
  std::int64_t malformed = 0;
  std::int64_t clamped = 0;
  /// Partitions forgotten to stay within `max_partitions`.
  std::int64_t evicted = 0;
};

/// A client-side limiter for one remote API: per partition (an API key, a host, a route), it keeps
/// what the remote's last response said and admits a request only when the remote would, and never
/// more than `local` allows. Thread-safe: every member may be called from any thread.
///
/// Between responses it counts its own sends against the last `remaining`; a response to an older
/// request than one already applied is stale (requests sent after it are not in its numbers), and a
/// newer response subtracts the requests still in flight that were sent after its own.
///
/// Example:
///   const ratelimit::Gcra local{.limit = 20, .period = std::chrono::seconds(1), .burst = 1};
///   ratelimit::http::RemoteQuotaLimiter<> remote(local);
///   if (const ratelimit::http::RemoteAdmission admission = remote.try_acquire("api-key-1")) {
///     // send the request with any HTTP client, then hand its status and header fields back:
///     const std::vector<std::pair<std::string, std::string>> headers{{"RateLimit", "\"api\";r=4;t=1"}};
///     remote.record("api-key-1", admission.ticket, 200, headers);
///   } else {
///     std::this_thread::sleep_for(admission.retry_after);  // then try again
///   }
template <Clock C = std::chrono::steady_clock>
class RemoteQuotaLimiter {
 public:
  /// `local`: the policy before any response and the ceiling always (GCRA, per partition).
  /// Throws `std::invalid_argument` naming the field for an invalid policy or option.
  explicit RemoteQuotaLimiter(Gcra local, RemoteQuotaOptions options = {}, C clock = C{})
      : options_(std::move(options)),
        clock_(clock),
        local_(
            local,
            MemoryOptions{.max_keys = checked(options_).max_partitions, .max_key_bytes = options_.max_partition_bytes},
            clock) {}

  /// Admits one request to `partition` now if the remote's last word and the local policy allow it.
  /// Thread-safe. Throws `std::invalid_argument` ("partition") for a name over `max_partition_bytes`.
  /// Example:
  ///   ratelimit::http::RemoteQuotaLimiter<> remote({.limit = 2, .period = std::chrono::seconds(1), .burst = 2});
  ///   for (int i = 0; i < 3; ++i) {
  ///     const ratelimit::http::RemoteAdmission a = remote.try_acquire("k");  // the third: wait 500 ms
  ///     std::printf("%d %lld ns\n", a.allowed, static_cast<long long>(a.retry_after.count()));
  ///   }
  [[nodiscard]] RemoteAdmission try_acquire(std::string_view partition) {
    const std::int64_t now = ratelimit::detail::now_ns(clock_);
    std::lock_guard lock(mutex_);
    Partition& p = touch(partition);
    if (const std::int64_t wait = remote_wait(p, now); wait > 0) {
      stats_.denied_remote.fetch_add(1, std::memory_order_relaxed);
      return {.allowed = false, .retry_after = std::chrono::nanoseconds(wait), .ticket = {}};
    }
    const Decision d = local_.allow(partition);
    if (!d.allowed) {
      stats_.denied_local.fetch_add(1, std::memory_order_relaxed);
      return {.allowed = false, .retry_after = d.retry_after, .ticket = {}};
    }
    if (p.known && p.rate) p.tat_ns = std::max(p.tat_ns, now) + p.interval_ns;
    if (p.known && !p.rate) --p.left;
    ++p.outstanding;
    stats_.admitted.fetch_add(1, std::memory_order_relaxed);
    return {.allowed = true, .retry_after = {}, .ticket = {.sequence = p.next_sequence++}};
  }

  /// Records the response to the request of `ticket`: its `status` (429 blocks the partition for its
  /// Retry-After, else its reset, else `default_backoff`) and its header fields, any range of
  /// name/value pairs (`remote_fields`). Thread-safe. Throws as `try_acquire`.
  template <class Range>
  void record(std::string_view partition, const RemoteTicket& ticket, int status, const Range& headers) {
    const auto wall = std::chrono::duration_cast<std::chrono::seconds>(options_.wall_clock().time_since_epoch());
    record(partition, ticket, status, read_remote_report(remote_fields(headers), options_.maxima, wall.count()));
  }

  /// Records a response already read into a `RemoteReport` (e.g. from a client's own header type through
  /// `RemoteFields::add` and `read_remote_report`); its values are held to `maxima` like the fields'
  /// (negative ones ignored). `ticket` is the one `try_acquire` returned for the request: a default
  /// ticket is older than any response, so only its Retry-After and status count (so for a ticket from before the
  /// partition was forgotten). Thread-safe. Throws as
  /// `try_acquire`.
  /// Example:
  ///   const ratelimit::Gcra local{.limit = 10, .period = std::chrono::seconds(1), .burst = 10};
  ///   ratelimit::http::RemoteQuotaLimiter<> remote(local);
  ///   const ratelimit::http::RemoteAdmission sent = remote.try_acquire("k");
  ///   ratelimit::http::RemoteReport report;
  ///   report.retry_after = std::chrono::seconds(30);
  ///   remote.record("k", sent.ticket, 429, report);  // "k" waits 30 s
  void record(std::string_view partition, const RemoteTicket& ticket, int status, const RemoteReport& said) {
    const RemoteReport report = within_maxima(said);
    const std::int64_t now = ratelimit::detail::now_ns(clock_);
    stats_.responses.fetch_add(1, std::memory_order_relaxed);
    stats_.malformed.fetch_add(report.malformed, std::memory_order_relaxed);
    stats_.clamped.fetch_add(report.clamped, std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    Partition& p = touch(partition);
    resolve(p, ticket);
    std::chrono::nanoseconds block = report.retry_after.value_or(std::chrono::seconds(0));
    if (status == 429) {
      stats_.too_many_requests.fetch_add(1, std::memory_order_relaxed);
      if (!report.retry_after) block = report.reset.value_or(options_.default_backoff);
      if (block <= std::chrono::nanoseconds(0)) block = options_.default_backoff;
    }
    if (block > std::chrono::nanoseconds(0)) p.blocked_until_ns = std::max(p.blocked_until_ns, now + block.count());
    if (!report.remaining) return;
    // Older than one applied, or not of this entry (a default ticket, one from before the partition was forgotten:
    // its sequence would mark the entry's own newer answers stale).
    if (ticket.sequence <= p.applied_sequence || ticket.sequence >= p.next_sequence) {
      stats_.stale.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    p.applied_sequence = ticket.sequence;
    // Requests still unanswered may not be in its numbers (those sent after it, and over other connections
    // those sent before it): count them as spent.
    apply(p, report, *report.remaining - p.outstanding, now);
  }

  /// Gives up on the request of `ticket`: no response will be recorded for it (a transport error, a
  /// timeout). It stops counting as in flight; what it spent stays spent. Record or release each ticket
  /// once: an unresolved ticket keeps counting against every later response of its partition.
  /// Thread-safe. Throws as `try_acquire`.
  /// Example:
  ///   const ratelimit::Gcra local{.limit = 10, .period = std::chrono::seconds(1), .burst = 10};
  ///   ratelimit::http::RemoteQuotaLimiter<> remote(local);
  ///   const ratelimit::http::RemoteAdmission sent = remote.try_acquire("k");
  ///   remote.release("k", sent.ticket);  // the connection failed before any response
  void release(std::string_view partition, const RemoteTicket& ticket) {
    std::lock_guard lock(mutex_);
    resolve(touch(partition), ticket);
  }

  /// The counters. Thread-safe.
  /// Example:
  ///   const ratelimit::Gcra local{.limit = 10, .period = std::chrono::seconds(1), .burst = 10};
  ///   ratelimit::http::RemoteQuotaLimiter<> remote(local);
  ///   std::printf("ignored %lld\n", static_cast<long long>(remote.stats().malformed));  // the remote's bad values
  [[nodiscard]] RemoteQuotaStats stats() const {
    const auto get = [](const std::atomic<std::int64_t>& a) { return a.load(std::memory_order_relaxed); };
    return {get(stats_.admitted),  get(stats_.denied_remote), get(stats_.denied_local),
            get(stats_.responses), get(stats_.stale),         get(stats_.too_many_requests),
            get(stats_.malformed), get(stats_.clamped),       get(stats_.evicted)};
  }

  /// Partitions held now. Thread-safe.
  [[nodiscard]] std::size_t partitions() const {
    std::lock_guard lock(mutex_);
    return table_.size();
  }

 private:
  /// What the limiter believes of one partition.
  struct Partition {
    bool known = false;            // a response with `remaining` was applied
    bool rate = false;             // modelled as GCRA (else a window)
    std::int64_t limit = 0;        // q; 0 when not said
    std::int64_t interval_ns = 0;  // rate: T = ceil(w / q)
    std::int64_t tat_ns = 0;       // rate: theoretical arrival time
    std::int64_t left = 0;         // window: sends left before reset_ns (negative: owed)
    std::int64_t reset_ns = 0;     // window: when `left` becomes `limit`
    std::int64_t window_ns = 0;    // window: its length after that (`unknown_reset` when not said)
    std::int64_t blocked_until_ns = ratelimit::detail::kInt64Min;  // Retry-After
    std::uint64_t applied_sequence = 0;
    std::uint64_t next_sequence = 1;
    std::int64_t outstanding = 0;            // admitted, neither recorded nor released
    std::list<std::string>::iterator order;  // in `lru_`
  };
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  struct Counters {
    std::atomic<std::int64_t> admitted{0}, denied_remote{0}, denied_local{0}, responses{0}, stale{0},
        too_many_requests{0}, malformed{0}, clamped{0}, evicted{0};
  };

  static const RemoteQuotaOptions& checked(const RemoteQuotaOptions& o) {
    if (o.max_partitions < 1) ratelimit::detail::invalid("max_partitions", "must be >= 1");
    if (o.maxima.quota < 1 || o.maxima.quota > 1'000'000'000'000'000) {
      ratelimit::detail::invalid("maxima.quota", "must be in [1, 10^15]");
    }
    for (const auto& [name, s] : {std::pair{"maxima.window", o.maxima.window},
                                  {"maxima.reset", o.maxima.reset},
                                  {"maxima.retry_after", o.maxima.retry_after},
                                  {"unknown_reset", o.unknown_reset}}) {
      if (s < std::chrono::seconds(1) || s > std::chrono::hours(24 * 366))
        ratelimit::detail::invalid(name, "must be in [1 s, 366 days]");
    }
    if (o.default_backoff < std::chrono::seconds(0) || o.default_backoff > std::chrono::hours(24)) {
      ratelimit::detail::invalid("default_backoff", "must be in [0, 24 h]");
    }
    if (!o.wall_clock) ratelimit::detail::invalid("wall_clock", "must be set");
    return o;
  }

  /// The request of `ticket` is answered or given up: one fewer in flight. A ticket from before the
  /// partition was forgotten (or a default one) is not of this entry and changes nothing.
  static void resolve(Partition& p, const RemoteTicket& ticket) {
    if (ticket.sequence >= 1 && ticket.sequence < p.next_sequence && p.outstanding > 0) --p.outstanding;
  }

  /// The partition's entry, made most recently used; a new one (evicting the least recently used
  /// beyond `max_partitions`) when absent.
  Partition& touch(std::string_view name) {
    if (name.size() > options_.max_partition_bytes) {
      ratelimit::detail::invalid("partition", std::to_string(name.size()) + " bytes exceeds max_partition_bytes (" +
                                                  std::to_string(options_.max_partition_bytes) + ")");
    }
    if (const auto it = table_.find(name); it != table_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.order);
      return it->second;
    }
    if (table_.size() >= options_.max_partitions) {
      table_.erase(table_.find(std::string_view(lru_.back())));
      lru_.pop_back();
      stats_.evicted.fetch_add(1, std::memory_order_relaxed);
    }
    lru_.emplace_front(name);
    Partition& p = table_[lru_.front()];
    p.order = lru_.begin();
    return p;
  }

  /// How long the remote's state says to wait before a request; <= 0 when it would admit one now.
  static std::int64_t remote_wait(Partition& p, std::int64_t now) {
    if (now < p.blocked_until_ns) return p.blocked_until_ns - now;
    if (!p.known) return 0;
    if (p.rate) return std::max(p.tat_ns, now) + p.interval_ns - p.limit * p.interval_ns - now;
    if (now >= p.reset_ns) {
      if (p.limit == 0) {  // the remote never said its quota: back to the local policy
        p.known = false;
        return 0;
      }
      p.left = p.limit;
      p.reset_ns = now + p.window_ns;
    }
    return p.left > 0 ? 0 : p.reset_ns - now;
  }

  /// `r` with every value in the range its header would have been held to (`RemoteMaxima`).
  RemoteReport within_maxima(RemoteReport r) const {
    const RemoteMaxima& m = options_.maxima;
    const auto count = [](std::optional<std::int64_t>& v, std::int64_t max) {
      if (v && *v < 0) v.reset();
      if (v) *v = std::min(*v, max);
    };
    const auto time = [](std::optional<std::chrono::seconds>& v, std::chrono::seconds min, std::chrono::seconds max) {
      if (v && *v < min) v.reset();
      if (v) *v = std::min(*v, max);
    };
    count(r.limit, m.quota);
    count(r.remaining, m.quota);
    time(r.reset, std::chrono::seconds(0), m.reset);
    time(r.window, std::chrono::seconds(1), m.window);
    time(r.retry_after, std::chrono::seconds(0), m.retry_after);
    return r;
  }

  /// Whether (q, w, r, t) fit a GCRA of burst q and interval w / q: its time to full, t, must lie in
  /// ((q - r - 1) * w / q, (q - r) * w / q + 1 s] (r is rounded down and t up to whole units).
  static bool fits_rate(std::int64_t q, std::int64_t w, std::int64_t r, std::int64_t t) {
    using ratelimit::detail::i128;
    return r <= q && i128(q - r - 1) * w < i128(t) * q && i128(t) * q <= i128(q - r) * w + q;
  }

  /// Believes `report` (with `remaining` already lowered by the requests in flight) from `now` on.
  void apply(Partition& p, const RemoteReport& report, std::int64_t remaining, std::int64_t now) const {
    using std::chrono::nanoseconds;
    const std::int64_t q = report.limit.value_or(0);
    const std::int64_t w = report.window ? report.window->count() : 0;
    const std::int64_t t = report.reset ? report.reset->count() : -1;
    const bool can_rate = q > 0 && w > 0 && t >= 0;
    p.known = true;
    p.limit = q;
    p.rate = can_rate && (options_.model == RemoteModel::rate ||
                          (options_.model == RemoteModel::automatic && fits_rate(q, w, *report.remaining, t)));
    if (p.rate) {
      p.interval_ns = ratelimit::detail::ceil_div(nanoseconds(std::chrono::seconds(w)).count(), q);
      p.tat_ns = now + (q - std::clamp(remaining, -q, q)) * p.interval_ns;  // at most 2 * w ahead
      return;
    }
    p.left = remaining;
    p.reset_ns = now + nanoseconds(report.reset.value_or(options_.unknown_reset)).count();
    p.window_ns = nanoseconds(w > 0 ? std::chrono::seconds(w) : options_.unknown_reset).count();
  }

  RemoteQuotaOptions options_;
  C clock_;
  MemoryLimiter<Gcra, C> local_;
  mutable std::mutex mutex_;
  std::list<std::string> lru_;  // most recently used first
  std::unordered_map<std::string, Partition, Hash, std::equal_to<>> table_;
  Counters stats_;
};

}  // namespace ratelimit::http
