#pragma once

/// @file
/// `RATELIMIT_REDIS_ABI_NAMESPACE`: the inline namespace every declaration of the Redis backend lives in
/// (`ratelimit::redis::abi_tls` or `ratelimit::redis::abi_plain`), keyed on `RATELIMIT_TLS`. TLS changes the
/// layout of `Connection` and the bodies of inline functions (include/ratelimit/redis/README.md "TLS"); with two names,
/// a program whose units were built with and without the macro holds two distinct variants instead of one name with two
/// definitions, of which the linker would keep one for both. Code names the types as `ratelimit::redis::...` either
/// way.
///
/// `RATELIMIT_REDIS_WITH_TLS` is 1 when `RATELIMIT_TLS` is defined and not 0 (`-DRATELIMIT_TLS=0` means off, as
/// in CMake), else 0; every test of TLS in the headers reads it.

// 0 - X - 1 is -1 only for X = 0; an empty definition (`#define RATELIMIT_TLS`) reads as on.
#if defined(RATELIMIT_TLS) && (0 - RATELIMIT_TLS - 1) != -1
#define RATELIMIT_REDIS_WITH_TLS 1
#define RATELIMIT_REDIS_ABI_NAMESPACE abi_tls
#else
#define RATELIMIT_REDIS_WITH_TLS 0
#define RATELIMIT_REDIS_ABI_NAMESPACE abi_plain
#endif
