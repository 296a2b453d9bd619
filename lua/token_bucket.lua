-- ratelimit: token bucket check, one atomic step (SPEC section 3, TokenBucket; must decide exactly as
-- ratelimit::TokenBucket::Rules, which are GCRA's, evaluated at a 1 us tick).
--
-- The bucket is stored as the time it will be full again (`full_at`), not as a token count: tokens at t
-- are floor((t + C*T - max(full_at, t)) / T), exact in integers, with no drift after any number of calls.
--
-- KEYS[1]  struct.pack("<dd", full_at, w): time the bucket is full again, latest write time, integer
--          microseconds (two little-endian doubles, exact below 2^53)
-- ARGV[1]  now: integer microseconds since the epoch, or "" to read the server's TIME
-- ARGV[2]  cost (tokens): integer >= 0 (ignored when peeking)
-- ARGV[3]  "1" = peek (cost 1's allowed/retry_after, cost 0's remaining/reset_after), "0" = check,
--          "2" = refund ARGV[2] units (see "Refund" below)
-- ARGV[4]  capacity C (the decision's limit): integer >= 1
-- ARGV[5]  refill interval T = ceil(refill_period / refill_tokens): microseconds per token, integer >= 1
--          (2 * C * T stays below 2^52, checked in C++)
-- Reply    {allowed (1/0), limit, remaining (whole tokens), retry_after_us (-1 = never), reset_after_us}
-- Writes   only an admitted take with cost >= 1: one SET ... PX ceil(reset_after / 1 ms) + 1000 ms;
--          a refund: SET ... KEEPTTL, or DEL when the bucket is full again.
-- Time     effective t = max(now, w): a clock that steps back sees time stand still at the latest write.
-- Speed    one GET and at most one SET (value and TTL together), no closures: this runs on every request.

local t
if ARGV[1] == "" then
  local time = redis.call("TIME")
  t = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  t = tonumber(ARGV[1])
end
local C = tonumber(ARGV[4])
local T = tonumber(ARGV[5])
local span = C * T                                           -- time to refill an empty bucket

local missing = 0                                            -- time until full, in [0, span]
local state = redis.call("GET", KEYS[1])
if state then
  local full_at, written = struct.unpack("<dd", state)
  if written > t then t = written end
  if full_at > t then missing = full_at - t end
end
local tokens = (span - missing - math.fmod(span - missing, T)) / T

-- Refund (ARGV[3] = "2"; SPEC addition "Refunds"): full_at = max(full_at - n*T, t): n tokens go back, never past full.
-- The TTL stays (no wait grows). Reply: the state afterwards as a cost-0 check sees it.
if ARGV[3] == "2" then
  local cost = tonumber(ARGV[2])
  if missing > 0 and cost > 0 then
    if cost * T >= missing then missing = 0 else missing = missing - cost * T end  -- exact below 2^53
    if missing > 0 then
      redis.call("SET", KEYS[1], struct.pack("<dd", t + missing, t), "KEEPTTL")
    else
      redis.call("DEL", KEYS[1])
    end
  end
  return {1, C, (span - missing - math.fmod(span - missing, T)) / T, 0, missing}
end

if ARGV[3] == "1" then                                       -- C >= 1, so one token always fits
  local new_missing = missing + T
  if new_missing <= span then return {1, C, tokens, 0, missing} end
  return {0, C, tokens, new_missing - span, missing}
end

local cost = tonumber(ARGV[2])
if cost > C then return {0, C, tokens, -1, missing} end
local new_missing = missing + cost * T                       -- <= 2 * span
if new_missing > span then return {0, C, tokens, new_missing - span, missing} end
if cost > 0 then
  local r = math.fmod(new_missing, 1000)
  local ttl = (new_missing - r) / 1000 + (r > 0 and 1 or 0) + 1000
  redis.call("SET", KEYS[1], struct.pack("<dd", t + new_missing, t), "PX", ttl)
end
return {1, C, (span - new_missing - math.fmod(span - new_missing, T)) / T, 0, new_missing}
