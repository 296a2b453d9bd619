#pragma once

/// @file
/// `RATELIMIT_DECL` marks the out-of-class definitions of members that `<ratelimit/src.hpp>` (or
/// `<ratelimit/redis/src.hpp>`) compiles once:
/// `inline` in the default, header-only build (as members defined in their class are), nothing when
/// `RATELIMIT_SEPARATE_COMPILATION` is defined, so that `extern template` keeps them out of every other unit
/// (Boost.Asio's `ASIO_DECL`).

#ifdef RATELIMIT_SEPARATE_COMPILATION
#define RATELIMIT_DECL
#else
#define RATELIMIT_DECL inline
#endif
