// Only includes the Redis umbrella: its object must hold no code or data of ours (bench/README.md "Compile cost"),
// which the tests compile.redis_include_emits_no_code and (built with
// RATELIMIT_SEPARATE_COMPILATION) compile.redis_include_emits_no_code_separately check with nm.
#include <ratelimit/redis.hpp>
