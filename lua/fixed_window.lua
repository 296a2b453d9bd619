-- ratelimit: fixed window check, one atomic step (SPEC section 3, FixedWindow; must decide exactly as
-- ratelimit::FixedWindow::Rules evaluated at a 1 us tick).
--
-- KEYS[1]  hash {w = latest write time (us), c = count of w's window}
-- ARGV[1]  now: integer microseconds since the epoch, or "" to read the server's TIME
-- ARGV[2]  cost: integer >= 0 (ignored when peeking)
-- ARGV[3]  "1" = peek (cost 1's allowed/retry_after, cost 0's remaining/reset_after), "0" = check,
--          "2" = refund ARGV[2] units (see "Refund" below)
-- ARGV[4]  limit L: integer in [1, 2^53)
-- ARGV[5]  window W: microseconds, integer >= 1
-- Reply    {allowed (1/0), limit, remaining, retry_after_us (-1 = never), reset_after_us}
-- Writes   only an admitted check with cost >= 1: HSET w, c; PEXPIRE ceil(reset_after / 1 ms) + 1000 ms.
-- Time     effective t = max(now, w): a clock that steps back sees time stand still at the latest write.
-- Numbers  Lua numbers are doubles: every value here stays an integer below 2^53, so all of it is exact.

local function clock(arg)
  if arg ~= "" then return tonumber(arg) end
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- Exact integer formatting (Redis would print large numbers in exponent form).
local function int(x) return string.format("%d", x) end
local function ttl_ms(reset_us)
  local r = math.fmod(reset_us, 1000)
  return (reset_us - r) / 1000 + (r > 0 and 1 or 0) + 1000
end
-- Start of the epoch-aligned window holding t; fmod is exact, unlike floor(t / w).
local function window_start(t, w)
  local r = math.fmod(t, w)
  if r < 0 then r = r + w end
  return t - r
end

local now = clock(ARGV[1])
local cost = tonumber(ARGV[2])
local peek = ARGV[3] == "1"
local L = tonumber(ARGV[4])
local W = tonumber(ARGV[5])

local s = redis.call("HMGET", KEYS[1], "w", "c")
local written, stored = tonumber(s[1]), tonumber(s[2])
local t = now
if written and written > t then t = written end
local start = window_start(t, W)
local r = t - start
local c = 0
if written and stored and stored > 0 and window_start(written, W) == start then c = stored end

local function evaluate(n)
  local allowed = n <= L - c
  local after = allowed and c + n or c
  local reset = after > 0 and W - r or 0
  local retry = 0
  if n > L then
    allowed, retry = false, -1
  elseif not allowed then
    retry = W - r
  end
  return allowed, L - after, retry, reset
end

-- Refund (ARGV[3] = "2"; SPEC addition "Refunds"): c = max(0, c - n) in the current window only; the
-- reply is the state afterwards as a cost-0 check sees it. Never past full; the TTL stays (reset_after
-- does not grow).
if ARGV[3] == "2" then
  if c > 0 and cost > 0 then
    c = c > cost and c - cost or 0
    if c > 0 then redis.call("HSET", KEYS[1], "w", int(t), "c", int(c)) else redis.call("DEL", KEYS[1]) end
  end
  local _, remaining, _, reset = evaluate(0)
  return {1, L, remaining, 0, reset}
end

if peek then
  local allowed, _, retry = evaluate(1)
  local _, remaining, _, reset = evaluate(0)
  return {allowed and 1 or 0, L, remaining, retry, reset}
end

local allowed, remaining, retry, reset = evaluate(cost)
if allowed and cost > 0 then
  redis.call("HSET", KEYS[1], "w", int(t), "c", int(c + cost))
  redis.call("PEXPIRE", KEYS[1], int(ttl_ms(reset)))
end
return {allowed and 1 or 0, L, remaining, retry, reset}
