#pragma once

/// @file
/// `Permit`: the move-only handle of units held in a concurrency limiter (in memory or on Redis), and
/// `PermitResult`, what an acquisition returns (include/ratelimit/concurrency/README.md "Concurrency limits").

#include <cstdint>
#include <string_view>
#include <utility>

#include "ratelimit/concurrency/adaptive_algorithm.hpp"
#include "ratelimit/detail/arithmetic.hpp"

namespace ratelimit {

/// How one permit ended, as `Permit` reports it to its backend (`PermitSource::end_permit`).
struct PermitEnd {
  /// The units held; >= 1.
  std::int64_t units = 0;
  /// The backend's clock when the permit was granted, in ns (what the backend gave the `Permit`).
  std::int64_t granted_ns = 0;
  /// Units in flight in the backend when it was granted, this permit's included (0 if not told).
  std::int64_t in_flight = 0;
  /// How the work went; `succeeded` for a plain `release()` or the destructor.
  PermitOutcome outcome = PermitOutcome::succeeded;
  /// False when the work never ran (`Permit::release_unused`): an adaptive limit takes no sample.
  bool measured = true;
};

/// What a backend of permits implements so that one `Permit` type serves every backend. `token` is the
/// backend's own handle of one permit (in memory its key's state; on Redis its renewal record).
class PermitSource {
 public:
  PermitSource() = default;
  PermitSource(const PermitSource&) = delete;
  PermitSource& operator=(const PermitSource&) = delete;

  /// Returns the `units` of the permit `token`; called once per permit. Must not throw.
  virtual void release_permit(void* token, std::int64_t units) noexcept = 0;
  /// Whether the permit `token` still counts as in flight (on Redis: not expired, renewal not failed).
  [[nodiscard]] virtual bool permit_valid(const void* token) const noexcept = 0;
  /// Returns the permit `token` saying how it ended; called once per permit instead of `release_permit`.
  /// A backend that measures latency (`ConcurrencyLimiter` with an adaptive limit) overrides it; the
  /// default ignores everything but the units. Must not throw.
  virtual void end_permit(void* token, const PermitEnd& end) noexcept { release_permit(token, end.units); }

 protected:
  ~PermitSource() = default;
};

/// Units held in a concurrency limiter for one key, returned when the permit is destroyed or
/// `release()`d (RAII). Move-only; a default-constructed or moved-from permit holds nothing. It
/// remembers when it was granted, so that `release(PermitOutcome)` gives an adaptive limit a latency
/// sample (include/ratelimit/concurrency/README.md "Adaptive limits in the limiter").
///
/// The limiter that issued a permit must outlive it. Not thread-safe itself (one owner), but
/// `valid()` may be called from any thread while the owner works, and permits of one limiter may be
/// released from any threads at once. Nothing here throws.
/// Example:
///   ratelimit::ConcurrencyLimiter<> jobs(ratelimit::ConcurrencyOptions{.permits = 1});
///   ratelimit::Permit permit = jobs.try_acquire("nightly-job").permit;  // empty when busy
///   if (!permit.held()) return;  // another run holds the only unit
///   for (int step = 0; step < 10 && permit.valid(); ++step) { /* work; on Redis valid() may turn false */ }
///   permit.release();  // or let the destructor give it back
class Permit {
 public:
  Permit() = default;
  /// For backends: a permit of `units` (>= 1) that `source` issued as `token`.
  Permit(PermitSource* source, void* token, std::int64_t units) noexcept
      : source_(source), token_(token), units_(units) {}
  /// For backends that measure latency: also the grant time on the backend's clock (ns) and the units
  /// in flight then, this permit's included; both come back in `PermitEnd`.
  Permit(PermitSource* source, void* token, std::int64_t units, std::int64_t granted_ns,
         std::int64_t in_flight) noexcept
      : source_(source), token_(token), units_(units), granted_ns_(granted_ns), in_flight_(in_flight) {}
  Permit(const Permit&) = delete;
  Permit& operator=(const Permit&) = delete;
  Permit(Permit&& other) noexcept
      : source_(std::exchange(other.source_, nullptr)),
        token_(std::exchange(other.token_, nullptr)),
        units_(std::exchange(other.units_, 0)),
        granted_ns_(other.granted_ns_),
        in_flight_(other.in_flight_) {}
  /// Releases what this permit held (as `release()`: succeeded), then takes `other`'s.
  Permit& operator=(Permit&& other) noexcept {
    if (this != &other) {
      release();
      source_ = std::exchange(other.source_, nullptr);
      token_ = std::exchange(other.token_, nullptr);
      units_ = std::exchange(other.units_, 0);
      granted_ns_ = other.granted_ns_;
      in_flight_ = other.in_flight_;
    }
    return *this;
  }
  ~Permit() { release(); }

  /// Returns the units to the limiter (waiters are woken in queue order), reporting the work as
  /// `succeeded`. Idempotent: later calls do nothing. Never throws (on Redis a failed release leaves
  /// the permit to expire).
  void release() noexcept { end(PermitOutcome::succeeded, true); }
  /// As `release()`, reporting how the work went: `succeeded`, `failed` (an error answer: counted, and
  /// its latency measured) or `dropped` (timed out or shed downstream: an adaptive limit backs off).
  /// Backends without an adaptive limit ignore the outcome. Idempotent. Throws `std::invalid_argument`
  /// (`outcome`) for a value outside the enum, having returned the units (if held) without a sample.
  /// Example:
  ///   ratelimit::ConcurrencyLimiter<> backend(
  ///       ratelimit::ConcurrencyOptions{.permits = 1000, .adaptive = std::make_shared<ratelimit::AimdLimit>()});
  ///   if (ratelimit::PermitResult r = backend.try_acquire("search")) {
  ///     const bool timed_out = false;  // call the service here
  ///     r.permit.release(timed_out ? ratelimit::PermitOutcome::dropped : ratelimit::PermitOutcome::succeeded);
  ///   }
  void release(PermitOutcome outcome) {
    const bool known =
        outcome == PermitOutcome::succeeded || outcome == PermitOutcome::failed || outcome == PermitOutcome::dropped;
    end(outcome, known);
    if (!known) detail::invalid("outcome", "must be succeeded, failed or dropped");
  }
  /// Returns the units without a latency sample: the work never ran (a later check refused the
  /// request, as `check_layers` does). Idempotent. Never throws.
  void release_unused() noexcept { end(PermitOutcome::succeeded, false); }

  /// True until `release()` (or a move away): this object still owns its units.
  [[nodiscard]] bool held() const noexcept { return source_ != nullptr; }
  /// True while held and still counted in flight by the backend. In memory a held permit is always
  /// valid; on Redis it turns false, at once and for good, when a renewal fails or the permit expired
  /// (the holder should stop its work: others may be admitted in its place). Thread-safe.
  [[nodiscard]] bool valid() const noexcept { return source_ != nullptr && source_->permit_valid(token_); }
  /// The units held (0 once released).
  [[nodiscard]] std::int64_t units() const noexcept { return units_; }
  /// Same as `valid()`.
  explicit operator bool() const noexcept { return valid(); }

 private:
  void end(PermitOutcome outcome, bool measured) noexcept {
    if (source_ != nullptr) {
      std::exchange(source_, nullptr)
          ->end_permit(std::exchange(token_, nullptr), PermitEnd{units_, granted_ns_, in_flight_, outcome, measured});
    }
    units_ = 0;
  }

  PermitSource* source_ = nullptr;
  void* token_ = nullptr;
  std::int64_t units_ = 0;
  std::int64_t granted_ns_ = 0;  // the backend's clock at grant
  std::int64_t in_flight_ = 0;   // the backend's units in flight at grant, this permit's included
};

/// Why an acquisition was answered as it was.
enum class PermitStatus {
  /// The units are held: `PermitResult::permit` owns them.
  acquired,
  /// Not enough units free and no waiting asked for (`try_acquire`, or `max_wait` 0).
  busy,
  /// The wait queue of the key could not take the units (`queue_limit`), or, newest-first, a newer
  /// waiter pushed this one out of it.
  queue_full,
  /// `max_wait` ran out while waiting.
  timed_out,
  /// More units than `permits` asked for: can never pass.
  too_many_units,
  /// A new key while `max_keys` keys hold permits or waiters.
  key_limit,
  /// The limiter was destroyed while the request waited.
  cancelled,
  /// The backend failed (Redis unreachable, error reply); nothing is held.
  backend_failed,
};

/// The name of a status: "acquired", "busy", "queue_full", ...
[[nodiscard]] constexpr std::string_view to_string(PermitStatus s) noexcept {
  switch (s) {
    case PermitStatus::acquired: return "acquired";
    case PermitStatus::busy: return "busy";
    case PermitStatus::queue_full: return "queue_full";
    case PermitStatus::timed_out: return "timed_out";
    case PermitStatus::too_many_units: return "too_many_units";
    case PermitStatus::key_limit: return "key_limit";
    case PermitStatus::cancelled: return "cancelled";
    case PermitStatus::backend_failed: return "backend_failed";
  }
  return "unknown";
}

/// The answer of an acquisition: a permit, or why not and how busy the key was.
struct PermitResult {
  /// Holds the units when `status == acquired`; empty otherwise.
  Permit permit{};
  PermitStatus status = PermitStatus::busy;
  /// Units in flight for the key when the answer was made (after this grant when acquired).
  std::int64_t in_flight = 0;
  /// Units waiting in the key's queue then (in memory; 0 on Redis, which keeps no queue).
  std::int64_t queued = 0;
  /// The key's limit in force then: `permits`, or with an adaptive limit the limit it had moved to.
  std::int64_t limit = 0;

  /// True when acquired.
  explicit operator bool() const noexcept { return status == PermitStatus::acquired; }
  [[nodiscard]] bool acquired() const noexcept { return status == PermitStatus::acquired; }
};

}  // namespace ratelimit
