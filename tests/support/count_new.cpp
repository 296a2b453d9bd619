// The replacement operator new behind count_new.hpp.
#include "count_new.hpp"
#include "sanitizers.hpp"

#include <cstdlib>
#include <limits>
#include <new>

#ifdef RATELIMIT_TEST_TSAN
#define RATELIMIT_COUNT_NEW 0
#else
#define RATELIMIT_COUNT_NEW 1
#endif

namespace test_support {
const bool can_count_new = RATELIMIT_COUNT_NEW != 0;
std::atomic<bool> counting_new{false};
std::atomic<std::size_t> new_calls{0};
std::atomic<std::size_t> new_bytes{0};
}  // namespace test_support

#if RATELIMIT_COUNT_NEW
// Every replaceable form (single and array, plain and over-aligned, throwing and nothrow): a form left out
// would go to the runtime's own operator (ASan's, under AddressSanitizer), uncounted, and its block would
// meet the wrong release.
namespace {
void count(std::size_t n) {
  if (test_support::counting_new.load(std::memory_order_relaxed)) {
    test_support::new_calls.fetch_add(1, std::memory_order_relaxed);
    test_support::new_bytes.fetch_add(n, std::memory_order_relaxed);
  }
}
void* allocate(std::size_t n) {
  count(n);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* allocate(std::size_t n, std::align_val_t alignment) {
  count(n);
  const auto a = static_cast<std::size_t>(alignment);
  if (n > std::numeric_limits<std::size_t>::max() - (a - 1)) throw std::bad_alloc();  // rounding would wrap
  if (void* p = std::aligned_alloc(a, n == 0 ? a : (n + a - 1) / a * a)) return p;    // a whole number of a
  throw std::bad_alloc();
}
template <class... Alignment>
void* allocate_nothrow(std::size_t n, Alignment... alignment) noexcept {
  try {
    return allocate(n, alignment...);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
}  // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void* operator new(std::size_t n, std::align_val_t a) { return allocate(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return allocate(n, a); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocate_nothrow(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocate_nothrow(n); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { return allocate_nothrow(n, a); }
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate_nothrow(n, a);
}
// GCC sees free() of what it takes for a `new` result; these replacements pair them on purpose.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif  // RATELIMIT_COUNT_NEW
