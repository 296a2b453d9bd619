// The replacement operator new behind count_new.hpp.
#include "count_new.hpp"

#include <cstdlib>
#include <new>

#if defined(__SANITIZE_THREAD__)
#define RATELIMIT_COUNT_NEW 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RATELIMIT_COUNT_NEW 0
#endif
#endif
#ifndef RATELIMIT_COUNT_NEW
#define RATELIMIT_COUNT_NEW 1
#endif

namespace test_support {
const bool can_count_new = RATELIMIT_COUNT_NEW != 0;
std::atomic<bool> counting_new{false};
std::atomic<std::size_t> new_calls{0};
std::atomic<std::size_t> new_bytes{0};
}  // namespace test_support

#if RATELIMIT_COUNT_NEW
namespace {
void count(std::size_t n) {
  if (test_support::counting_new.load(std::memory_order_relaxed)) {
    test_support::new_calls.fetch_add(1, std::memory_order_relaxed);
    test_support::new_bytes.fetch_add(n, std::memory_order_relaxed);
  }
}
}  // namespace

void* operator new(std::size_t n) {
  count(n);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// Over-aligned types (the store's alignas(64) shards) come through the align_val_t form: counted too.
void* operator new(std::size_t n, std::align_val_t alignment) {
  count(n);
  const auto a = static_cast<std::size_t>(alignment);
  if (void* p = std::aligned_alloc(a, (n == 0 ? 1 : n + a - 1) / a * a)) return p;  // a whole number of a
  throw std::bad_alloc();
}
// GCC sees free() of what it takes for a `new` result; these replacements pair them on purpose.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif  // RATELIMIT_COUNT_NEW
