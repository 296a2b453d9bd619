-- ratelimit: sliding window counter check, one atomic step (SPEC section 3, SlidingWindowCounter; must
-- decide exactly as ratelimit::SlidingWindowCounter::Rules evaluated at a 1 us tick).
--
-- KEYS[1]  hash {w = latest write time (us), c = count of w's window, p = count of the window before}
-- ARGV[1]  now: integer microseconds since the epoch, or "" to read the server's TIME
-- ARGV[2]  cost: integer >= 0 (ignored when peeking)
-- ARGV[3]  "1" = peek (cost 1's allowed/retry_after, cost 0's remaining/reset_after), "0" = check,
--          "2" = refund ARGV[2] units (see "Refund" below)
-- ARGV[4]  limit L: integer >= 1
-- ARGV[5]  window W: microseconds, integer >= 1
--          Bound: L * W <= 2^53. Every product below is at most L * W, so it is exact in Lua's doubles;
--          the C++ limiter refuses larger configurations.
-- Reply    {allowed (1/0), limit, remaining, retry_after_us (-1 = never), reset_after_us}
-- Writes   only an admitted check with cost >= 1: HSET w, c, p; PEXPIRE ceil(reset_after / 1 ms) + 1000 ms.
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
local function window_start(t, w)
  local r = math.fmod(t, w)
  if r < 0 then r = r + w end
  return t - r
end
-- floor(a / b) for integers a >= 0, b >= 1 below 2^53, exactly.
local function idiv(a, b) return (a - math.fmod(a, b)) / b end

local now = clock(ARGV[1])
local cost = tonumber(ARGV[2])
local peek = ARGV[3] == "1"
local L = tonumber(ARGV[4])
local W = tonumber(ARGV[5])

local s = redis.call("HMGET", KEYS[1], "w", "c", "p")
local written = tonumber(s[1])
local t = now
if written and written > t then t = written end
local start = window_start(t, W)
local r = t - start
local cur, prev = 0, 0
if written then
  local start_s = window_start(written, W)
  if start == start_s then
    cur, prev = tonumber(s[2]) or 0, tonumber(s[3]) or 0
  elseif start == start_s + W then
    prev = tonumber(s[2]) or 0
  end
end

local function evaluate(n)
  local fits = n <= L
  local weighted_prev = prev * (W - r)                      -- <= L * W
  -- cur + n <= L first keeps (cur + n) * W <= L * W.
  local allowed = fits and cur + n <= L and (cur + n) * W <= L * W - weighted_prev
  local current = allowed and cur + n or cur
  local room = idiv(L * W - weighted_prev, W)
  local remaining = room - current > 0 and room - current or 0
  local reset = 0
  if current > 0 then reset = 2 * W - r elseif prev > 0 then reset = W - r end
  if not fits then return false, remaining, -1, reset end
  local retry = 0
  if not allowed then
    local a = L - cur - n
    local r1 = W
    if prev > 0 and a >= 0 then r1 = W - idiv(a * W, prev) end
    if r1 < W then
      retry = r1 - r
    else
      local r2 = 0
      if cur > 0 then r2 = W - idiv((L - n) * W, cur) end
      if r2 < 0 then r2 = 0 end
      retry = (W - r) + r2
    end
  end
  return allowed, remaining, retry, reset
end

-- Refund (ARGV[3] = "2"; SPEC addition "Refunds"): cur = max(0, cur - n); prev is history and stays.
-- The reply is the state afterwards as a cost-0 check sees it; the TTL stays (reset_after does not grow).
if ARGV[3] == "2" then
  if cur > 0 and cost > 0 then
    cur = cur > cost and cur - cost or 0
    if cur > 0 or prev > 0 then
      redis.call("HSET", KEYS[1], "w", int(t), "c", int(cur), "p", int(prev))
    else
      redis.call("DEL", KEYS[1])
    end
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
  redis.call("HSET", KEYS[1], "w", int(t), "c", int(cur + cost), "p", int(prev))
  redis.call("PEXPIRE", KEYS[1], int(ttl_ms(reset)))
end
return {allowed and 1 or 0, L, remaining, retry, reset}
