-- ratelimit: a lease step for the fixed window (include/ratelimit/redis/README.md "Budget leases"; computes exactly as
-- ratelimit::lease::FixedWindowLease at a 1 us tick). Used by LeasedLimiter for every check of its keys.
--
-- KEYS[1]  hash {w = latest write time (us), c = count of w's window, r = resets so far (absent: 0)}
-- ARGV[1]  now: integer microseconds since the epoch, or "" to read the server's TIME
-- ARGV[2]  "0" = grant, "1" = peek, "2" = give back unused units, "3" = reset (count 0; returns of earlier
--          grants give it nothing)
-- ARGV[3]  grant: need (>= 0); give back: the unused units
-- ARGV[4]  grant: want (>= need); give back: the grant's mark (its window's start, us)
-- ARGV[5]  give back: the grant's resets (reply element 8); grant and peek: "0"
-- ARGV[6]  limit L: integer in [1, 2^53)
-- ARGV[7]  window W: microseconds, integer >= 1
-- Reply    {allowed, limit, remaining, retry_after_us (-1 = never), reset_after_us, units, mark, resets,
--          serve_for_us}
-- Writes   a grant of >= 1 unit: HSET w, c; PEXPIRE ceil(rest of the window / 1 ms) + 1000 ms; a give back:
--          HSET w, c (the TTL stays); a reset of an existing key: HSET w, c, r (the TTL stays).
-- Parts    time clock write text window fixed_window_lease
--          (lua/parts/, in this order, then this file: cmake/RatelimitRedis.cmake assembles the script)

return fixed_window_lease(KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]),
                          tonumber(ARGV[6]), tonumber(ARGV[7]))
