-- ratelimit: a lease step for GCRA and the token bucket (include/ratelimit/redis/README.md "Budget leases"; computes
-- exactly as ratelimit::lease::GcraLease at a 1 us tick). Used by LeasedLimiter for every check of its keys, leased or
-- not.
--
-- KEYS[1]  struct.pack("<dddd", tat, written, granted, horizon), integer microseconds and units
-- ARGV[1]  now: integer microseconds since the epoch, or "" to read the server's TIME
-- ARGV[2]  "0" = grant, "1" = peek, "2" = give back unused units, "3" = reset (a fresh budget that returns of
--          earlier grants leave alone)
-- ARGV[3]  grant: need (units that must fit, >= 0); give back: the unused units
-- ARGV[4]  grant: want (>= need: the lease size asked for); give back: the grant's mark (TAT after it)
-- ARGV[5]  give back: the grant's granted_after counter; grant and peek: "0"
-- ARGV[6]  emission interval T (us), integer >= 1
-- ARGV[7]  reduced tolerance tau - L (us), integer >= T (2 * tau below 2^52, checked in C++)
-- Reply    {allowed, limit, remaining, retry_after_us (-1 = never), reset_after_us, units, mark, granted_after,
--          serve_for_us (-1)}
-- Writes   a grant of >= 1 unit: SET ... PX ceil((horizon - t) / 1 ms) + 1000 ms; a give back or a reset:
--          SET ... KEEPTTL.
-- Parts    time clock write gcra_lease
--          (lua/parts/, in this order, then this file: cmake/RatelimitRedis.cmake assembles the script)

return gcra_lease(KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]),
                  tonumber(ARGV[6]), tonumber(ARGV[7]))
