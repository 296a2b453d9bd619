#pragma once

/// @file
/// What the library needs from the compiler, checked once with a clear message (README.md "Using it from CMake").

// Bad input and backend faults are reported by exceptions (include/ratelimit/README.md "Thread safety and exceptions"),
// so a build without them (-fno-exceptions) cannot work: say so instead of failing on the first `throw`.
// Concepts, designated initialisers and <span> throughout: without C++20 the first error would be a concept's.
#if __cplusplus < 202002L
#error "ratelimit needs C++20: compile with -std=c++20 (or later)"
#endif

#if !defined(__cpp_exceptions) && !defined(__EXCEPTIONS) && !defined(_CPPUNWIND)
#error "ratelimit needs C++ exceptions: it reports bad input and backend failures by throwing; remove -fno-exceptions"
#endif
