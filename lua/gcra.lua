-- ratelimit: GCRA check, one atomic step (SPEC section 3, Gcra; must decide exactly as
-- ratelimit::Gcra::Rules evaluated at a 1 us tick). Virtual scheduling form, ITU-T I.371.
--
-- KEYS[1]  struct.pack("<dd", tat, w): theoretical arrival time and latest write time, integer microseconds
--          (two little-endian doubles, exact below 2^53; one value, so one GET and one SET with its TTL)
-- ARGV[1]  now: integer microseconds since the epoch, or "" to read the server's TIME
-- ARGV[2]  cost: integer >= 0 (ignored when peeking)
-- ARGV[3]  "1" = peek (cost 1's allowed/retry_after, cost 0's remaining/reset_after), "0" = check,
--          "2" = refund ARGV[2] units (see "Refund" below)
-- ARGV[4]  burst B (the decision's limit): integer >= 1
-- ARGV[5]  emission interval T = ceil(period / limit): microseconds, integer >= 1
-- ARGV[6]  tolerance tau = B * T: microseconds (2 * tau stays below 2^52, checked in C++)
-- Reply    {allowed (1/0), limit, remaining, retry_after_us (-1 = never), reset_after_us}
-- Writes   only an admitted check with cost >= 1: one SET ... PX ceil(reset_after / 1 ms) + 1000 ms;
--          a refund: SET ... KEEPTTL, or DEL when the key is full again.
-- Time     effective t = max(now, w): a clock that steps back sees time stand still at the latest write.
-- Numbers  Lua numbers are doubles: every value here stays an integer below 2^53, so all of it is exact.
-- Speed    one GET and at most one SET (value and TTL together), no closures: this runs on every request.

local t
if ARGV[1] == "" then
  local time = redis.call("TIME")
  t = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  t = tonumber(ARGV[1])
end
local B = tonumber(ARGV[4])
local T = tonumber(ARGV[5])
local tau = tonumber(ARGV[6])

local backlog = 0                                            -- max(TAT, t) - t, in [0, tau]
local state = redis.call("GET", KEYS[1])
if state then
  local tat, written = struct.unpack("<dd", state)
  if written > t then t = written end
  if tat > t then backlog = tat - t end
end
local remaining = (tau - backlog - math.fmod(tau - backlog, T)) / T

-- Refund (ARGV[3] = "2"; SPEC addition "Refunds"): TAT = max(TAT - n*T, t): the backlog shrinks by n*T, never past full.
-- The TTL stays (no wait grows). Reply: the state afterwards as a cost-0 check sees it.
if ARGV[3] == "2" then
  local cost = tonumber(ARGV[2])
  if backlog > 0 and cost > 0 then
    if cost * T >= backlog then backlog = 0 else backlog = backlog - cost * T end  -- exact below 2^53
    if backlog > 0 then
      redis.call("SET", KEYS[1], struct.pack("<dd", t + backlog, t), "KEEPTTL")
    else
      redis.call("DEL", KEYS[1])
    end
  end
  return {1, B, (tau - backlog - math.fmod(tau - backlog, T)) / T, 0, backlog}
end

if ARGV[3] == "1" then                                       -- B >= 1, so cost 1 always fits
  local new_backlog = backlog + T
  if new_backlog <= tau then return {1, B, remaining, 0, backlog} end
  return {0, B, remaining, new_backlog - tau, backlog}
end

local cost = tonumber(ARGV[2])
if cost > B then return {0, B, remaining, -1, backlog} end
local new_backlog = backlog + cost * T                       -- <= 2 tau
if new_backlog > tau then return {0, B, remaining, new_backlog - tau, backlog} end
if cost > 0 then
  local r = math.fmod(new_backlog, 1000)
  local ttl = (new_backlog - r) / 1000 + (r > 0 and 1 or 0) + 1000
  redis.call("SET", KEYS[1], struct.pack("<dd", t + new_backlog, t), "PX", ttl)
end
return {1, B, (tau - new_backlog - math.fmod(tau - new_backlog, T)) / T, 0, new_backlog}
