// Only includes the Redis umbrella: its object must hold no code or data of ours (bench/README.md "Compile cost"),
// which the test compile.redis_include_emits_no_code checks with nm.
#include <ratelimit/redis.hpp>
