#include "alloc_counter.hpp"

// A sanitizer's runtime defines every operator new and delete itself (ThreadSanitizer's cannot be replaced
// at all: the link fails), so under one the counter asks the runtime instead, for the whole process.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RATELIMIT_BENCH_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RATELIMIT_BENCH_SANITIZED 1
#endif
#endif

#ifdef RATELIMIT_BENCH_SANITIZED
#include <sanitizer/allocator_interface.h>

std::size_t bench::heap_bytes() noexcept { return __sanitizer_get_current_allocated_bytes(); }
#else
#include <malloc.h>

#include <cstdlib>
#include <new>

namespace {
// Per thread: a shared counter would put one contended atomic into every allocation of threaded benchmarks.
// A difference of two readings on one thread counts what that thread allocated and freed in between.
thread_local std::size_t g_bytes = 0;

void* counted(std::size_t size) {
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  g_bytes += malloc_usable_size(p);
  return p;
}

void release(void* p) noexcept {
  if (p == nullptr) return;
  g_bytes -= malloc_usable_size(p);
  std::free(p);
}
}  // namespace

std::size_t bench::heap_bytes() noexcept { return g_bytes; }

void* operator new(std::size_t size) { return counted(size); }
void* operator new[](std::size_t size) { return counted(size); }
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
// The nothrow forms too: the standard library's temporary buffers (std::stable_sort) use them, and a form left
// to the runtime allocates with an allocator other than the one our delete frees with.
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return counted(size);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept { return operator new(size, tag); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }

namespace {
void* counted_aligned(std::size_t size, std::align_val_t align) {
  const auto alignment = static_cast<std::size_t>(align);
  void* p = std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  if (p == nullptr) throw std::bad_alloc();
  g_bytes += malloc_usable_size(p);
  return p;
}
}  // namespace

void* operator new(std::size_t size, std::align_val_t align) { return counted_aligned(size, align); }
void* operator new[](std::size_t size, std::align_val_t align) { return counted_aligned(size, align); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void* operator new(std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  try {
    return counted_aligned(size, align);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, std::align_val_t align, const std::nothrow_t& tag) noexcept {
  return operator new(size, align, tag);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
#endif
