-- ratelimit: GCRA check, one atomic step (include/ratelimit/README.md "Policy formulas", Gcra; must decide exactly as
-- ratelimit::Gcra::Rules evaluated at a 1 us tick). Virtual scheduling form, ITU-T I.371.
--
-- KEYS[1]  struct.pack("<dddd", tat, w, T, B): theoretical arrival time and latest write time, integer
--          microseconds, and the parameters it was written under (little-endian doubles, exact below 2^53;
--          one value, so one GET and one SET with its TTL); a state of other parameters is converted
-- (include/ratelimit/README.md "Changing a policy at run time"), an older 16-byte "<dd" one read as the caller's
-- ARGV[1]  now: integer microseconds since the epoch, or "" to read the server's TIME
-- ARGV[2]  cost: integer >= 0 (ignored when peeking; for "6", the settled difference, any sign)
-- ARGV[3]  "0" = check, "1" = peek (cost 1's allowed/retry_after, cost 0's remaining/reset_after),
--          "2" = refund ARGV[2] units (include/ratelimit/README.md "Refunds"; the part says how);
--          "3" = dry check: decides as "0" and writes only a conversion (the layered script's first pass);
--          "4" = reserve ARGV[2] units if the delay is at most ARGV[6] us; "5" = cancel the booking of ARGV[2] units
--          with TAT ARGV[6] and time to act ARGV[7]; "6" = settle: debit ARGV[2] > 0 units (the backlog after at
--          most ARGV[6] us: tau + max_debt * T within the horizon), refund -ARGV[2] otherwise
--          (include/ratelimit/README.md "Reservations" and "Settling after the response"; the part says how)
-- ARGV[4]  burst B (the decision's limit): integer >= 1
-- ARGV[5]  emission interval T = ceil(period / limit): microseconds, integer >= 1; the tolerance is
--          tau = B * T (2 * tau stays below 2^52, checked in C++)
-- Reply    struct.pack("<ddddd", allowed (1/0), limit, remaining, retry_after_us (-1 = never),
--          reset_after_us): five little-endian doubles (40 bytes), all integers below 2^53; a reserve
--          "<dddddddd" (64 bytes): the cost-0 view afterwards, then ok (1/0), booked TAT, delay_us (-1 = never)
-- Writes   only an admitted check with cost >= 1, a booking, a debit: one SET ... PX ceil(reset_after / 1 ms) +
--          1000 ms; a refund or cancel: SET ... KEEPTTL, or DEL when the key is full again.
-- Time     effective t = max(now, w): a clock that steps back sees time stand still at the latest write.
-- Numbers  Lua numbers are doubles: every value here stays an integer below 2^53, so all of it is exact.
-- Speed    one GET and at most one SET (value and TTL together), no TIME call with a client time, no table,
--          no number formatting, the reply one string: this runs on every request.
-- Parts    time gcra
--          (lua/parts/, in this order, then this file: cmake/RatelimitRedis.cmake assembles the script)

local now, cost, mode = ARGV[1], ARGV[2], ARGV[3]            -- cost "1", the usual one, without tonumber
return struct.pack(mode == "4" and "<dddddddd" or "<ddddd",  -- a reserve's reply has three more values
                   gcra(KEYS[1], now == "" and server_time() or tonumber(now), cost == "1" and 1 or tonumber(cost),
                        mode, tonumber(ARGV[4]), tonumber(ARGV[5])))
