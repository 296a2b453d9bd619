// Only includes the core umbrella: its object must hold no code or data of ours (bench/README.md "Compile cost"),
// which the test compile.include_emits_no_code checks with nm.
#include <ratelimit/ratelimit.hpp>
