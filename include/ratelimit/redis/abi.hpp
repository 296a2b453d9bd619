#pragma once

/// @file
/// `RATELIMIT_REDIS_ABI_NAMESPACE`: the inline namespace every declaration of the Redis backend lives in
/// (`ratelimit::redis::abi_tls` or `ratelimit::redis::abi_plain`), keyed on `RATELIMIT_TLS`. TLS changes the
/// layout of `Connection` and the bodies of inline functions (README "TLS"); with two names, a program
/// whose units were built with and without the macro holds two distinct variants instead of one name with
/// two definitions, of which the linker would keep one for both. Code names the types as
/// `ratelimit::redis::...` either way.

#if defined(RATELIMIT_TLS)
#define RATELIMIT_REDIS_ABI_NAMESPACE abi_tls
#else
#define RATELIMIT_REDIS_ABI_NAMESPACE abi_plain
#endif
