-- ratelimit: token bucket check, one atomic step (include/ratelimit/README.md "Policy formulas", TokenBucket; must
-- decide exactly as ratelimit::TokenBucket::Rules, which are GCRA's, evaluated at a 1 us tick).
--
-- The bucket is stored as the time it will be full again (`full_at`), not as a token count: tokens at t
-- are floor((t + C*T - max(full_at, t)) / T), exact in integers, with no drift after any number of calls.
--
-- KEYS[1]  struct.pack("<dddd", full_at, w, T, C): time the bucket is full again, latest write time, integer
--          microseconds, and the parameters it was written under (little-endian doubles, exact below 2^53);
--          a state of other parameters is converted (include/ratelimit/README.md "Changing a policy at run time")
-- ARGV[1]  now: integer microseconds since the epoch, or "" to read the server's TIME
-- ARGV[2]  cost (tokens): integer >= 0 (ignored when peeking)
-- ARGV[3]  "1" = peek (cost 1's allowed/retry_after, cost 0's remaining/reset_after), "0" = check,
--          "2" = refund ARGV[2] units (include/ratelimit/README.md "Refunds"; the part says how);
--          "3" = dry check: decides as "0" and writes only a conversion (the layered script's first pass);
--          "4" reserve, "5" cancel, "6" settle, with ARGV[6..7] as lua/gcra.lua says
-- ARGV[4]  capacity C (the decision's limit): integer >= 1
-- ARGV[5]  refill interval T = ceil(refill_period / refill_tokens): microseconds per token, integer >= 1
--          (2 * C * T stays below 2^52, checked in C++)
-- Reply    struct.pack("<ddddd", allowed (1/0), limit, remaining (whole tokens), retry_after_us (-1 = never),
--          reset_after_us): five little-endian doubles (40 bytes), all integers below 2^53
--          (a reserve's has three more, as lua/gcra.lua says)
-- Writes   only an admitted take with cost >= 1: one SET ... PX ceil(reset_after / 1 ms) + 1000 ms;
--          a refund: SET ... KEEPTTL, or DEL when the bucket is full again.
-- Time     effective t = max(now, w): a clock that steps back sees time stand still at the latest write.
-- Speed    one GET and at most one SET (value and TTL together), no TIME call with a client time, no table,
--          no number formatting, the reply one string: this runs on every request.
-- Parts    time gcra
--          (lua/parts/, in this order, then this file: cmake/RatelimitRedis.cmake assembles the script)

local now, cost, mode = ARGV[1], ARGV[2], ARGV[3]            -- cost "1", the usual one, without tonumber
return struct.pack(mode == "4" and "<dddddddd" or "<ddddd",  -- a reserve's reply has three more values
                   gcra(KEYS[1], now == "" and server_time() or tonumber(now), cost == "1" and 1 or tonumber(cost),
                        mode, tonumber(ARGV[4]), tonumber(ARGV[5])))
