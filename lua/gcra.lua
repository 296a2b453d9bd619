-- ratelimit: GCRA check, one atomic step (SPEC section 3, Gcra; must decide exactly as
-- ratelimit::Gcra::Rules evaluated at a 1 us tick). Virtual scheduling form, ITU-T I.371.
--
-- KEYS[1]  struct.pack("<dd", tat, w): theoretical arrival time and latest write time, integer microseconds
--          (two little-endian doubles, exact below 2^53; one value, so one GET and one SET with its TTL)
-- ARGV[1]  now: integer microseconds since the epoch, or "" to read the server's TIME
-- ARGV[2]  cost: integer >= 0 (ignored when peeking)
-- ARGV[3]  "1" = peek (cost 1's allowed/retry_after, cost 0's remaining/reset_after), "0" = check,
--          "2" = refund ARGV[2] units (SPEC addition "Refunds"; the part says how)
-- ARGV[4]  burst B (the decision's limit): integer >= 1
-- ARGV[5]  emission interval T = ceil(period / limit): microseconds, integer >= 1
-- ARGV[6]  tolerance tau = B * T: microseconds (2 * tau stays below 2^52, checked in C++)
-- Reply    {allowed (1/0), limit, remaining, retry_after_us (-1 = never), reset_after_us}
-- Writes   only an admitted check with cost >= 1: one SET ... PX ceil(reset_after / 1 ms) + 1000 ms;
--          a refund: SET ... KEEPTTL, or DEL when the key is full again.
-- Time     effective t = max(now, w): a clock that steps back sees time stand still at the latest write.
-- Numbers  Lua numbers are doubles: every value here stays an integer below 2^53, so all of it is exact.
-- Speed    one GET and at most one SET (value and TTL together), no tables: this runs on every request.
-- Parts    time gcra
--          (lua/parts/, in this order, then this file: cmake/RatelimitRedis.cmake assembles the script)

return gcra_script(KEYS[1], clock(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]),
                   tonumber(ARGV[6]))
