#pragma once

// The unit of the TLS ABI test built without RATELIMIT_TLS (tls_abi_mix_plain.cpp), called from the one built
// with it (tls_abi_mix_tls.cpp): both use the Redis backend in one program.

#include <string>

namespace ratelimit_test {

/// PING over a plain connection to 127.0.0.1:`port`, opened by the unit without TLS: the reply's text.
std::string plain_unit_ping(int port);

/// Two checks of one key (limit 1) by a `RedisLimiter` of the unit without TLS on 127.0.0.1:`port`, sync
/// and async: true when the first was admitted and the second denied.
bool plain_unit_limits(int port, const std::string& key_prefix);

}  // namespace ratelimit_test
