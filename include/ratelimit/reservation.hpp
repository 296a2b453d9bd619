#pragma once

/// @file
/// `Reservation`: a booked slot of a key's quota, to act on at a stated time or cancel
/// (include/ratelimit/README.md "Reservations").

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "ratelimit/decision.hpp"

namespace ratelimit {

namespace detail {

/// What a backend keeps of one booking so that it can give back exactly what is still unspent. The
/// values are in the backend's own ticks (nanoseconds in memory, microseconds on Redis).
struct ReservationTicket {
  /// The key's theoretical arrival time right after this booking.
  std::int64_t booked_tat = 0;
  /// The time the caller may act: `now + delay` at the booking.
  std::int64_t act_at = 0;
  /// The units booked; >= 0.
  std::int64_t cost = 0;
};

/// Implemented by a limiter that books reservations; a `Reservation` calls it to cancel itself.
class ReservationBook {
 public:
  /// Gives back what is unspent of `ticket` on `key` (include/ratelimit/README.md "Reservations").
  /// Never throws: a backend that cannot give back leaves the slot spent, the safe side.
  virtual void cancel_reservation(std::string_view key, const ReservationTicket& ticket) noexcept = 0;

 protected:
  ~ReservationBook() = default;
};

}  // namespace detail

/// A slot booked by `reserve(key, cost)` (include/ratelimit/README.md "Reservations"), after
/// golang.org/x/time/rate's `Reservation`: the units are taken at the booking; the caller acts after
/// `delay()`, or calls `cancel()` to give back what is still unspent.
///
/// Move-only, so a booking is cancelled at most once. Not thread-safe: one thread uses a reservation
/// at a time. The limiter that made it must outlive it (it holds a pointer to the limiter).
/// Example:
///   ratelimit::MemoryLimiter<ratelimit::Gcra> outgoing(
///       ratelimit::Gcra{.limit = 5, .period = std::chrono::seconds(1), .burst = 1});
///   ratelimit::Reservation r = outgoing.reserve("partner-api");
///   if (!r.ok()) { /* cost above the burst: it can never pass */ }
///   else if (r.delay() > std::chrono::seconds(2)) { r.cancel(); /* too long: give the slot back */ }
///   else { std::this_thread::sleep_for(r.delay()); /* call the partner API */ }
class Reservation {
 public:
  /// Not booked: `ok()` is false, `delay()` is `Decision::never`.
  Reservation() = default;

  /// A booking a backend made; `book` cancels it (null: a booking nothing can give back, e.g. a
  /// failure policy's answer).
  Reservation(detail::ReservationBook* book, std::string key, detail::ReservationTicket ticket,
              std::chrono::nanoseconds delay, Decision decision)
      : book_(book), key_(std::move(key)), ticket_(ticket), delay_(delay), decision_(decision), ok_(true) {}

  /// A refusal: nothing booked. `delay` is the wait the booking would have needed (`Decision::never`
  /// when the cost exceeds the burst).
  static Reservation refused(std::chrono::nanoseconds delay, Decision decision) {
    Reservation r;
    r.delay_ = delay;
    r.decision_ = decision;
    return r;
  }

  Reservation(Reservation&& other) noexcept { *this = std::move(other); }
  Reservation& operator=(Reservation&& other) noexcept {
    if (this != &other) {
      book_ = std::exchange(other.book_, nullptr);
      key_ = std::move(other.key_);
      ticket_ = other.ticket_;
      delay_ = other.delay_;
      decision_ = other.decision_;
      ok_ = other.ok_;
    }
    return *this;
  }
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  /// Does not cancel: a booking stands until `cancel()` (as x/time/rate's).
  ~Reservation() = default;

  /// True when the units were booked; false when the cost exceeds the burst, or the delay would have
  /// exceeded the `max_delay` the booking allowed (nothing booked either way).
  [[nodiscard]] bool ok() const noexcept { return ok_; }
  /// How long after the booking the caller may act (>= 0); for a refusal, the wait it would have
  /// needed, or `Decision::never`.
  [[nodiscard]] std::chrono::nanoseconds delay() const noexcept { return delay_; }
  /// The key's state right after the booking (or the refusal), as a cost-0 check sees it: the
  /// numbers for headers.
  [[nodiscard]] const Decision& decision() const noexcept { return decision_; }

  /// Gives back exactly what is still unspent (x/time/rate's `CancelAt`): nothing once the time to act
  /// has come; all of it when this is the key's latest booking (the next booking gets its slot);
  /// otherwise what later bookings have not taken over; never more than the key holds beyond its state
  /// before the booking (a reset, refund or settle since gave that back already). A second call, or a call
  /// on a refusal, does nothing. Never throws.
  void cancel() noexcept {
    if (detail::ReservationBook* book = std::exchange(book_, nullptr)) book->cancel_reservation(key_, ticket_);
  }

  /// The key it was booked on.
  [[nodiscard]] const std::string& key() const noexcept { return key_; }
  /// What the backend needs to cancel it (backend ticks).
  [[nodiscard]] const detail::ReservationTicket& ticket() const noexcept { return ticket_; }

 private:
  detail::ReservationBook* book_ = nullptr;
  std::string key_;
  detail::ReservationTicket ticket_{};
  std::chrono::nanoseconds delay_ = Decision::never;
  Decision decision_{};
  bool ok_ = false;
};

}  // namespace ratelimit
