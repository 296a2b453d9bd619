#pragma once

/// @file
/// The in-memory joint check: the shard locks of every key, over any number of `MemoryLimiter`s, taken
/// once each in one global order; every request consumes; on any denial every consumption is given back
/// (the exact inverse) before the locks are released. Internal; reached through `JointBackend`.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include "ratelimit/decision.hpp"
#include "ratelimit/detail/spin_lock.hpp"
#include "ratelimit/detail/stack_arena.hpp"
#include "ratelimit/joint_backend.hpp"
#include "ratelimit/memory/detail/key_handle.hpp"

namespace ratelimit::detail {

/// Holds a set of shard locks, taken once each in ascending address order (one global order over
/// every store in the process, so concurrent joint checks never deadlock). Sorts `locks` in place and
/// keeps a view of it: `locks` must outlive this.
class MultiLock {
 public:
  explicit MultiLock(std::span<SpinLock*> locks) {
    sort_by_address(locks);
    std::size_t kept = 0;  // the distinct locks, moved to the front
    for (SpinLock* l : locks) {
      if (kept == 0 || locks[kept - 1] != l) locks[kept++] = l;
    }
    locks_ = locks.first(kept);
    for (SpinLock* l : locks_) l->lock();
  }
  MultiLock(const MultiLock&) = delete;
  MultiLock& operator=(const MultiLock&) = delete;
  ~MultiLock() {
    for (auto it = locks_.rbegin(); it != locks_.rend(); ++it) (*it)->unlock();
  }

 private:
  // Written out rather than std::sort, whose <algorithm> costs every unit that includes the store
  // more compile time than the rest of this header: insertion sort for the few locks of a usual joint
  // check (std::sort's own choice below 17 elements), qsort beyond.
  static bool before(const SpinLock* a, const SpinLock* b) noexcept {
    return reinterpret_cast<std::uintptr_t>(a) < reinterpret_cast<std::uintptr_t>(b);
  }
  static void sort_by_address(std::span<SpinLock*> locks) noexcept {
    if (locks.size() > 16) {
      std::qsort(locks.data(), locks.size(), sizeof(SpinLock*), [](const void* a, const void* b) {
        const SpinLock* x = *static_cast<SpinLock* const*>(a);
        const SpinLock* y = *static_cast<SpinLock* const*>(b);
        return before(x, y) ? -1 : before(y, x) ? 1 : 0;
      });
      return;
    }
    for (std::size_t i = 1; i < locks.size(); ++i) {
      SpinLock* l = locks[i];
      std::size_t j = i;
      for (; j > 0 && before(l, locks[j - 1]); --j) locks[j] = locks[j - 1];
      locks[j] = l;
    }
  }

  std::span<SpinLock*> locks_;
};

/// The joint domain of every `MemoryLimiter` in the process: any of them can be checked together.
[[nodiscard]] inline const void* memory_joint_domain() noexcept {
  static const char domain = 0;
  return &domain;
}

/// What the joint check needs from each `MemoryLimiter` (a non-template base, so limiters of different
/// policies and clocks meet in one check). Every `JointBackend` whose domain is `memory_joint_domain()`
/// is one of these.
class LockedMember : public JointBackend {
 public:
  /// Locates `key`, reading the clock once; takes no lock. Throws `std::invalid_argument` for a key
  /// longer than `max_key_bytes`.
  virtual KeyHandle locate_key(std::string_view key) = 0;
  /// `allow` under `*handle.lock`.
  virtual Decision allow_under_lock(std::string_view key, const KeyHandle& handle, std::int64_t cost) = 0;
  /// `refund` under `*handle.lock`; right after an admitting `allow_under_lock` of the same cost it
  /// restores the key's state exactly.
  virtual Decision refund_under_lock(std::string_view key, const KeyHandle& handle, std::int64_t cost) = 0;
  /// The key's state as a cost-0 check sees it, under `*handle.lock`.
  virtual Decision current_under_lock(std::string_view key, const KeyHandle& handle) = 0;
  /// The decision `allow_under_lock` would return, consuming nothing and inserting no key.
  virtual Decision evaluate_under_lock(std::string_view key, const KeyHandle& handle, std::int64_t cost) = 0;

  [[nodiscard]] const void* joint_domain() const noexcept final { return memory_joint_domain(); }
  // Declared inline here, not only at its definition: a class whose first non-pure virtual function is
  // not inline in the class has that function as its key function, and then every unit that sees the
  // definition emits the vtable and all the function reaches, even a unit that only includes this header.
  inline bool check_jointly(std::span<const JointRequest> requests, std::span<CheckResult> results) final;

 protected:
  ~LockedMember() = default;
};

/// An admitted request's decision after the give-back: allowed, with the key's current numbers.
[[nodiscard]] inline Decision given_back(Decision current) noexcept {
  current.allowed = true;
  current.retry_after = std::chrono::nanoseconds::zero();
  return current;
}

/// See `JointBackend::check_jointly`. Under all the locks, every request decides on the state as it is
/// before any commits, and only if all enforcing (not shadow) ones admit does each admitting one consume:
/// a denied request then inserts no key, so it evicts none at `max_keys` (a rollback could not bring an
/// evicted key back). Requests that share a state (one limiter, one key) consume in order instead (the
/// second sees the first), and on an enforcing denial every consumption is given back (a shadow denial
/// gives back nothing). Atomic: no other check sees a partial state; every outcome is
/// `Outcome::decided` (memory cannot fail). Exceptions (a bad key) leave nothing consumed.
inline bool LockedMember::check_jointly(std::span<const JointRequest> requests, std::span<CheckResult> results) {
  if (results.size() != requests.size()) return false;
  for (const JointRequest& r : requests) {
    if (r.backend == nullptr || r.backend->joint_domain() != memory_joint_domain()) return false;
  }
  // Same domain, so every backend is a LockedMember: the cast is exact (no RTTI needed).
  StackArena arena;
  const std::span<LockedMember*> members = arena.array<LockedMember*>(requests.size());
  const std::span<KeyHandle> handles = arena.array<KeyHandle>(requests.size());
  const std::span<SpinLock*> locks = arena.array<SpinLock*>(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    members[i] = static_cast<LockedMember*>(requests[i].backend);
    handles[i] = members[i]->locate_key(requests[i].key);
    locks[i] = handles[i].lock;
  }
  MultiLock hold(locks);
  bool shared_state = false;
  for (std::size_t i = 0; i < requests.size() && !shared_state; ++i) {
    for (std::size_t j = i + 1; j < requests.size() && !shared_state; ++j) {
      shared_state = members[i] == members[j] && requests[i].key == requests[j].key;
    }
  }
  if (!shared_state) {
    bool all = true;  // every enforcing request admits
    for (std::size_t i = 0; i < requests.size(); ++i) {
      results[i].decision = members[i]->evaluate_under_lock(requests[i].key, handles[i], requests[i].cost);
      all = all && (results[i].decision.allowed || requests[i].shadow);
    }
    if (!all) {
      for (std::size_t i = 0; i < requests.size(); ++i) {
        if (results[i].decision.allowed) {
          results[i].decision = given_back(members[i]->current_under_lock(requests[i].key, handles[i]));
        }
      }
      return true;
    }
  }
  const std::span<std::size_t> consumed = arena.array<std::size_t>(requests.size());  // admitted, cost >= 1
  std::size_t consumed_count = 0;                                                     // in order
  auto give_back = [&] {
    for (std::size_t k = consumed_count; k > 0; --k) {
      const std::size_t i = consumed[k - 1];
      members[i]->refund_under_lock(requests[i].key, handles[i], requests[i].cost);
    }
  };
  bool denied = false;
  try {
    for (std::size_t i = 0; i < requests.size(); ++i) {
      results[i].decision = members[i]->allow_under_lock(requests[i].key, handles[i], requests[i].cost);
      if (!results[i].decision.allowed && !requests[i].shadow) denied = true;
      if (results[i].decision.allowed && requests[i].cost > 0) consumed[consumed_count++] = i;
    }
  } catch (...) {
    give_back();
    throw;
  }
  if (denied) {
    give_back();
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (results[i].decision.allowed) {
        results[i].decision = given_back(members[i]->current_under_lock(requests[i].key, handles[i]));
      }
    }
  }
  return true;
}

}  // namespace ratelimit::detail
