-- ratelimit: sliding window log check, one atomic step (include/ratelimit/README.md "Policy formulas",
-- SlidingWindowLog; must decide exactly as ratelimit::SlidingWindowLog::Rules evaluated at a 1 us tick).
--
-- KEYS[1]  sorted set of admitted requests: score = timestamp (us), member = struct.pack("<dd", timestamp,
--          cost) (two little-endian doubles, exact below 2^53).
--          Requests admitted at the same timestamp are merged into one member (their costs summed; they
--          expire together), so members are unique without randomness. After every write all members
--          are live with costs summing to at most L, and only writes change the set: at most L members.
-- ARGV[1]  now: integer microseconds since the epoch, or "" to read the server's TIME
-- ARGV[2]  cost: integer >= 0 (ignored when peeking)
-- ARGV[3]  "1" = peek (cost 1's allowed/retry_after, cost 0's remaining/reset_after), "0" = check,
--          "2" = refund ARGV[2] units (include/ratelimit/README.md "Refunds"; the part says how);
--          "3" = dry check: decides as "0" and writes only a conversion (the layered script's first pass);
--          "6" = settle: debit ARGV[2] > 0 units beyond the limit (the count at most ARGV[6]), refund -ARGV[2]
--          otherwise (include/ratelimit/README.md "Settling after the response"; the part says how)
-- ARGV[4]  limit L: integer in [1, 2^53)
-- ARGV[5]  window W: microseconds, integer >= 1; the window is (t - W, t]
-- Reply    struct.pack("<ddddd", allowed (1/0), limit, remaining, retry_after_us (-1 = never),
--          reset_after_us): five little-endian doubles (40 bytes), all integers below 2^53
-- Writes   only an admitted check with cost >= 1: drops expired members, adds or merges (t, cost);
--          PEXPIRE ceil(W / 1 ms) + 1000 ms (the newest member is then t, so reset_after = W).
-- Time     effective t = max(now, newest timestamp): a clock that steps back sees time stand still.
-- Numbers  Lua numbers are doubles: every value here stays an integer below 2^53, so all of it is exact.
-- Parts    time write text sliding_window_log
--          (lua/parts/, in this order, then this file: cmake/RatelimitRedis.cmake assembles the script)

local now, cost = ARGV[1], ARGV[2]                           -- cost "1", the usual one, without tonumber
return struct.pack("<ddddd", sliding_window_log(KEYS[1], now == "" and server_time() or tonumber(now),
                                                cost == "1" and 1 or tonumber(cost), ARGV[3], tonumber(ARGV[4]),
                                                tonumber(ARGV[5])))
