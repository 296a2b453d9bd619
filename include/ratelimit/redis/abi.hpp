#pragma once

/// @file
/// `RATELIMIT_REDIS_ABI_NAMESPACE`: the inline namespace of the Redis backend, `abi_tls` or `abi_plain`: TLS changes
/// `Connection`'s layout, so units built with and without `RATELIMIT_TLS` hold two variants, not one name defined
/// twice. `RATELIMIT_REDIS_WITH_TLS` is 1 when `RATELIMIT_TLS` is defined and not 0, else 0.

// 0 - X - 1 is -1 only for X = 0; an empty definition (`#define RATELIMIT_TLS`) reads as on.
#if defined(RATELIMIT_TLS) && (0 - RATELIMIT_TLS - 1) != -1
#define RATELIMIT_REDIS_WITH_TLS 1
#define RATELIMIT_REDIS_ABI_NAMESPACE abi_tls
#else
#define RATELIMIT_REDIS_WITH_TLS 0
#define RATELIMIT_REDIS_ABI_NAMESPACE abi_plain
#endif
