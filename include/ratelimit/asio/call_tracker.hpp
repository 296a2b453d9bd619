#pragma once

/// @file
/// The calls of `<ratelimit/asio.hpp>` in flight per execution context, ended when the context shuts down:
/// the limiter completes a call on its own I/O thread, possibly after the handler's `io_context` is gone.

#include <asio/execution/context.hpp>
#include <asio/execution_context.hpp>
#include <asio/query.hpp>
#include <asio/system_executor.hpp>

#include <memory>
#include <mutex>
#include <vector>

namespace ratelimit::asio::detail {

/// What a call holds until it completes (its handler and the work guard on the handler's executor),
/// type-erased so that the context's shutdown can destroy it.
class Held {
 public:
  virtual ~Held() = default;
};

/// The calls in flight whose handlers belong to one execution context. Shared by the context's
/// `CallTracker` and by the calls, which the limiter keeps until its I/O thread completes them: a
/// completion after the context shut down finds its call unlinked and touches nothing of the context.
struct CallRegistry {
  /// One call: linked while it holds its handler.
  struct Entry {
    Entry* prev = nullptr;
    Entry* next = nullptr;
    std::unique_ptr<Held> held;
  };

  /// Guards everything here, and is held while a call posts its handler: the context cannot shut down
  /// between a call's check that it is linked and its post.
  std::mutex mutex;
  bool alive = true;
  Entry* head = nullptr;

  /// Links `e` holding `held`; with the context shut down, destroys nothing and links nothing but returns
  /// `held` for the caller to destroy outside the lock. Under `mutex`.
  std::unique_ptr<Held> link(Entry& e, std::unique_ptr<Held> held) {
    if (!alive) return held;
    e.held = std::move(held);
    e.next = head;
    if (head != nullptr) head->prev = &e;
    head = &e;
    return nullptr;
  }

  /// Unlinks `e` and hands over what it held: null when the call already completed or the context took
  /// it. Under `mutex`.
  std::unique_ptr<Held> take(Entry& e) {
    if (!e.held) return nullptr;
    if (e.prev != nullptr) e.prev->next = e.next;
    if (e.next != nullptr) e.next->prev = e.prev;
    if (head == &e) head = e.next;
    e.prev = e.next = nullptr;
    return std::move(e.held);
  }
};

/// The execution-context service (`asio::use_service`) that ends its context's calls when the context
/// shuts down (`io_context` destroyed): their handlers and work guards are destroyed uninvoked, as Asio
/// destroys its own pending operations, while the context still exists; a later completion from the
/// limiter finds nothing to post.
class CallTracker final : public ::asio::execution_context::service {
 public:
  static inline ::asio::execution_context::id id;

  explicit CallTracker(::asio::execution_context& context) : ::asio::execution_context::service(context) {}

  /// The registry of the tracker of `executor`'s context (created on first use; thread-safe). An
  /// executor without a context (`use_future`'s runs its functions on the system executor) gets the
  /// system context's.
  template <class Executor>
  static std::shared_ptr<CallRegistry> registry_of(const Executor& executor) {
    if constexpr (::asio::can_query<const Executor&, ::asio::execution::context_t>::value) {
      return ::asio::use_service<CallTracker>(::asio::query(executor, ::asio::execution::context)).registry_;
    } else if constexpr (requires { executor.context(); }) {
      return ::asio::use_service<CallTracker>(executor.context()).registry_;
    } else {
      return ::asio::use_service<CallTracker>(::asio::system_executor().context()).registry_;
    }
  }

 private:
  void shutdown() override {
    std::vector<std::unique_ptr<Held>> dropped;
    {
      const std::lock_guard lock(registry_->mutex);
      registry_->alive = false;
      while (registry_->head != nullptr) dropped.push_back(registry_->take(*registry_->head));
    }
    // Destroyed outside the lock: a handler's destructor (a coroutine's frame) may end other calls.
    dropped.clear();
  }

  std::shared_ptr<CallRegistry> registry_ = std::make_shared<CallRegistry>();
};

}  // namespace ratelimit::asio::detail
