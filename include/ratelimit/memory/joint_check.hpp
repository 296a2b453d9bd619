#pragma once

/// @file
/// The in-memory joint check: the shard locks of every key, over any number of `MemoryLimiter`s, taken
/// once each in one global order; every request consumes; on any denial every consumption is given back
/// (the exact inverse) before the locks are released. Internal; reached through `JointBackend`.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory_resource>
#include <span>
#include <string_view>
#include <utility>

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
    std::sort(locks.begin(), locks.end(), std::less<>());
    locks_ = locks.first(static_cast<std::size_t>(std::unique(locks.begin(), locks.end()) - locks.begin()));
    for (SpinLock* l : locks_) l->lock();
  }
  MultiLock(const MultiLock&) = delete;
  MultiLock& operator=(const MultiLock&) = delete;
  ~MultiLock() {
    for (auto it = locks_.rbegin(); it != locks_.rend(); ++it) (*it)->unlock();
  }

 private:
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
  std::pmr::vector<LockedMember*> members(requests.size(), &arena.resource);
  std::pmr::vector<KeyHandle> handles(requests.size(), &arena.resource);
  std::pmr::vector<SpinLock*> locks(requests.size(), &arena.resource);
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
  std::pmr::vector<std::size_t> consumed(&arena.resource);  // admitted with cost >= 1, in order
  consumed.reserve(requests.size());
  auto give_back = [&] {
    for (auto it = consumed.rbegin(); it != consumed.rend(); ++it) {
      members[*it]->refund_under_lock(requests[*it].key, handles[*it], requests[*it].cost);
    }
  };
  bool denied = false;
  try {
    for (std::size_t i = 0; i < requests.size(); ++i) {
      results[i].decision = members[i]->allow_under_lock(requests[i].key, handles[i], requests[i].cost);
      if (!results[i].decision.allowed && !requests[i].shadow) denied = true;
      if (results[i].decision.allowed && requests[i].cost > 0) consumed.push_back(i);
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
