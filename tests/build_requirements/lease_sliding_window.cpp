// Must not compile: sliding windows cannot be leased exactly (README "Budget leases").
#include <ratelimit/policy/lease.hpp>

ratelimit::lease::LeaseOf<ratelimit::SlidingWindowLog>* refused = nullptr;
