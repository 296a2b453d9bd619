#pragma once

/// @file
/// Allow and deny lists of keys for a layer.

#include <atomic>
#include <cstddef>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_set>

namespace ratelimit {

/// Where a key stands on a layer's lists.
enum class Listing {
  /// On no list: the layer limits it.
  none,
  /// On the allow list: the layer neither limits nor counts it.
  allowed,
  /// On the deny list: the layer denies it without a check (`retry_after == Decision::never`).
  denied,
};

/// Allow and deny lists of exact keys, changeable at run time. A key on both lists is denied.
///
/// Thread-safe: lookups take a shared lock, changes an exclusive one; while both lists are empty a
/// lookup is one relaxed atomic load.
class KeyLists {
 public:
  /// Puts `key` on the allow list. Thread-safe.
  void allow(std::string key) {
    change([&] { allowed_.insert(std::move(key)); });
  }
  /// Puts `key` on the deny list. Thread-safe.
  void deny(std::string key) {
    change([&] { denied_.insert(std::move(key)); });
  }
  /// Takes `key` off both lists. Thread-safe.
  void remove(std::string_view key) {
    change([&] {
      if (auto it = allowed_.find(key); it != allowed_.end()) allowed_.erase(it);
      if (auto it = denied_.find(key); it != denied_.end()) denied_.erase(it);
    });
  }
  /// Empties both lists. Thread-safe.
  void clear() {
    change([&] {
      allowed_.clear();
      denied_.clear();
    });
  }

  /// Where `key` stands. Thread-safe.
  [[nodiscard]] Listing lookup(std::string_view key) const {
    if (!any_.load(std::memory_order_relaxed)) return Listing::none;
    std::shared_lock lock(mutex_);
    if (denied_.find(key) != denied_.end()) return Listing::denied;
    if (allowed_.find(key) != allowed_.end()) return Listing::allowed;
    return Listing::none;
  }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  using Set = std::unordered_set<std::string, Hash, std::equal_to<>>;

  template <class Fn>
  void change(Fn fn) {
    std::unique_lock lock(mutex_);
    fn();
    any_.store(!allowed_.empty() || !denied_.empty(), std::memory_order_relaxed);
  }

  mutable std::shared_mutex mutex_;
  Set allowed_;
  Set denied_;
  std::atomic<bool> any_{false};
};

}  // namespace ratelimit
