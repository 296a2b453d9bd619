// Built with -DRATELIMIT_TLS=0 (tests/redis/CMakeLists.txt): zero means no TLS (include/ratelimit/redis/README.md
// "TLS"), the plain ABI namespace and no OpenSSL, as a unit built without the macro.
#include <ratelimit/redis.hpp>

#if !defined(RATELIMIT_TLS) || RATELIMIT_TLS != 0
#error "this unit must be built with -DRATELIMIT_TLS=0"
#endif
static_assert(!ratelimit::redis::kTlsAvailable);
static_assert(sizeof(ratelimit::redis::abi_plain::ConnectionOptions) > 0, "the plain ABI namespace is chosen");

int main() { return 0; }
