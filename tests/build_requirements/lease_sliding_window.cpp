// Must not compile: sliding windows cannot be leased exactly (include/ratelimit/redis/README.md "Budget leases").
#include <ratelimit/policy/lease.hpp>

ratelimit::lease::LeaseOf<ratelimit::SlidingWindowLog>* refused = nullptr;
