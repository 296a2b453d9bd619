-- ratelimit: token bucket check, one atomic step (SPEC section 3, TokenBucket; must decide exactly as
-- ratelimit::TokenBucket::Rules, which are GCRA's, evaluated at a 1 us tick).
--
-- The bucket is stored as the time it will be full again (`full_at`), not as a token count: tokens at t
-- are floor((t + C*T - max(full_at, t)) / T), exact in integers, with no drift after any number of calls.
--
-- KEYS[1]  hash {full_at = time the bucket is full again (us), w = latest write time (us)}
-- ARGV[1]  now: integer microseconds since the epoch, or "" to read the server's TIME
-- ARGV[2]  cost (tokens): integer >= 0 (ignored when peeking)
-- ARGV[3]  "1" = peek (cost 1's allowed/retry_after, cost 0's remaining/reset_after), "0" = check,
--          "2" = refund ARGV[2] units (see "Refund" below)
-- ARGV[4]  capacity C (the decision's limit): integer >= 1
-- ARGV[5]  refill interval T = ceil(refill_period / refill_tokens): microseconds per token, integer >= 1
--          (2 * C * T stays below 2^52, checked in C++)
-- Reply    {allowed (1/0), limit, remaining (whole tokens), retry_after_us (-1 = never), reset_after_us}
-- Writes   only an admitted take with cost >= 1: HSET full_at, w; PEXPIRE ceil(reset_after / 1 ms) + 1000 ms.
-- Time     effective t = max(now, w): a clock that steps back sees time stand still at the latest write.

local function clock(arg)
  if arg ~= "" then return tonumber(arg) end
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function int(x) return string.format("%d", x) end
local function ttl_ms(reset_us)
  local r = math.fmod(reset_us, 1000)
  return (reset_us - r) / 1000 + (r > 0 and 1 or 0) + 1000
end
local function idiv(a, b) return (a - math.fmod(a, b)) / b end

local now = clock(ARGV[1])
local cost = tonumber(ARGV[2])
local peek = ARGV[3] == "1"
local C = tonumber(ARGV[4])
local T = tonumber(ARGV[5])
local span = C * T                                           -- time to refill an empty bucket

local s = redis.call("HMGET", KEYS[1], "full_at", "w")
local full_at, written = tonumber(s[1]), tonumber(s[2])
local t = now
if written and written > t then t = written end
local missing = 0                                            -- time until full, in [0, span]
if full_at and full_at > t then missing = full_at - t end

local function evaluate(n)
  local fits = n <= C
  local new_missing = fits and missing + n * T or 0          -- <= 2 * span
  local allowed = fits and new_missing <= span
  local after = allowed and new_missing or missing
  local tokens = idiv(span - after, T)
  if not fits then return false, tokens, -1, after, 0 end
  return allowed, tokens, allowed and 0 or new_missing - span, after, new_missing
end

-- Refund (ARGV[3] = "2"; SPEC addition "Refunds"): n tokens go back, never past capacity:
-- full_at = max(full_at - n*T, t). Reply: the state afterwards as a cost-0 check sees it.
if ARGV[3] == "2" then
  if missing > 0 and cost > 0 then
    if cost * T >= missing then missing = 0 else missing = missing - cost * T end  -- exact below 2^53
    if missing > 0 then redis.call("HSET", KEYS[1], "full_at", int(t + missing), "w", int(t)) else redis.call("DEL", KEYS[1]) end
  end
  local _, tokens, _, reset = evaluate(0)
  return {1, C, tokens, 0, reset}
end

if peek then
  local allowed, _, retry = evaluate(1)
  local _, tokens, _, reset = evaluate(0)
  return {allowed and 1 or 0, C, tokens, retry, reset}
end

local allowed, tokens, retry, reset, new_missing = evaluate(cost)
if allowed and cost > 0 then
  redis.call("HSET", KEYS[1], "full_at", int(t + new_missing), "w", int(t))
  redis.call("PEXPIRE", KEYS[1], int(ttl_ms(reset)))
end
return {allowed and 1 or 0, C, tokens, retry, reset}
