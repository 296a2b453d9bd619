#pragma once
// Whether this test build runs under a sanitizer, for wider scheduling slack and for checks a sanitizer's runtime
// makes meaningless. GCC defines `__SANITIZE_*__`; clang 14 (CI's sanitizer builds) answers only `__has_feature`.
//   RATELIMIT_TEST_SANITIZED: AddressSanitizer, ThreadSanitizer or MemorySanitizer.
//   RATELIMIT_TEST_TSAN: ThreadSanitizer.

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RATELIMIT_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define RATELIMIT_TEST_SANITIZED 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define RATELIMIT_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RATELIMIT_TEST_TSAN 1
#endif
#endif

#include <chrono>

namespace ratelimit_test {

#ifdef RATELIMIT_TEST_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

/// What a call timed on the real clock may take beyond its bound on loaded shared cores before a test calls it
/// late: wider under a sanitizer's runtime, whose runs on two shared cores stretched one call to 664 ms.
inline constexpr std::chrono::milliseconds kSchedulingSlack{kSanitized ? 1000 : 300};

}  // namespace ratelimit_test
