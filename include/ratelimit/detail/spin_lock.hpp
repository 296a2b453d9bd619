#pragma once

/// @file
/// A small test-and-test-and-set lock for the store's shards: critical sections are a few dozen
/// nanoseconds, shorter than a futex round trip, so spinning briefly wins; it yields after a while so
/// a preempted holder (2 cores, many threads) does not starve the others.

#include <atomic>

// The builtin, not <immintrin.h> (every intrinsic of the target, a large part of the compile time of a
// unit that includes the store); sched_yield, which std::this_thread::yield calls on POSIX systems, not
// <thread>.
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__GNUC__)
#include <immintrin.h>
#endif
#if __has_include(<sched.h>)
#include <sched.h>
#else
#include <thread>
#endif

namespace ratelimit::detail {

inline void cpu_relax() noexcept {
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
  __builtin_ia32_pause();
#elif defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Gives the processor to another thread (std::this_thread::yield).
inline void yield_thread() noexcept {
#if __has_include(<sched.h>)
  sched_yield();
#else
  std::this_thread::yield();
#endif
}

/// Satisfies Lockable; use with `std::lock_guard`. Not recursive.
class SpinLock {
 public:
  void lock() noexcept {
    if (!locked_.exchange(true, std::memory_order_acquire)) [[likely]]
      return;
    lock_contended();
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  /// The slow path out of line, so that an uncontended `lock` inlines to one exchange.
  [[gnu::noinline]] void lock_contended() noexcept {
    int spins = 0;
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < 128) {
          cpu_relax();
        } else {
          yield_thread();
        }
      }
    }
  }

  std::atomic<bool> locked_{false};
};

}  // namespace ratelimit::detail
