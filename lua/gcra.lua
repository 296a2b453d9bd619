-- ratelimit: GCRA check, one atomic step (SPEC section 3, Gcra; must decide exactly as
-- ratelimit::Gcra::Rules evaluated at a 1 us tick). Virtual scheduling form, ITU-T I.371.
--
-- KEYS[1]  hash {tat = theoretical arrival time (us), w = latest write time (us)}
-- ARGV[1]  now: integer microseconds since the epoch, or "" to read the server's TIME
-- ARGV[2]  cost: integer >= 0 (ignored when peeking)
-- ARGV[3]  "1" = peek (cost 1's allowed/retry_after, cost 0's remaining/reset_after), "0" = check,
--          "2" = refund ARGV[2] units (see "Refund" below)
-- ARGV[4]  burst B (the decision's limit): integer >= 1
-- ARGV[5]  emission interval T = ceil(period / limit): microseconds, integer >= 1
-- ARGV[6]  tolerance tau = B * T: microseconds (2 * tau stays below 2^52, checked in C++)
-- Reply    {allowed (1/0), limit, remaining, retry_after_us (-1 = never), reset_after_us}
-- Writes   only an admitted check with cost >= 1: HSET tat, w; PEXPIRE ceil(reset_after / 1 ms) + 1000 ms.
-- Time     effective t = max(now, w): a clock that steps back sees time stand still at the latest write.
-- Numbers  Lua numbers are doubles: every value here stays an integer below 2^53, so all of it is exact.

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
local B = tonumber(ARGV[4])
local T = tonumber(ARGV[5])
local tau = tonumber(ARGV[6])

local s = redis.call("HMGET", KEYS[1], "tat", "w")
local tat, written = tonumber(s[1]), tonumber(s[2])
local t = now
if written and written > t then t = written end
local backlog = 0                                            -- max(TAT, t) - t, in [0, tau]
if tat and tat > t then backlog = tat - t end

local function evaluate(n)
  local fits = n <= B
  local new_backlog = fits and backlog + n * T or 0           -- <= 2 tau
  local allowed = fits and new_backlog <= tau
  local after = allowed and new_backlog or backlog
  local remaining = idiv(tau - after, T)
  if not fits then return false, remaining, -1, after, 0 end
  return allowed, remaining, allowed and 0 or new_backlog - tau, after, new_backlog
end

-- Refund (ARGV[3] = "2"; SPEC addition "Refunds"): TAT = max(TAT - n*T, t), i.e. the backlog shrinks by
-- n*T and never below 0 (never past full). Reply: the state afterwards as a cost-0 check sees it.
if ARGV[3] == "2" then
  if backlog > 0 and cost > 0 then
    if cost * T >= backlog then backlog = 0 else backlog = backlog - cost * T end  -- exact below 2^53
    if backlog > 0 then redis.call("HSET", KEYS[1], "tat", int(t + backlog), "w", int(t)) else redis.call("DEL", KEYS[1]) end
  end
  local _, remaining, _, reset = evaluate(0)
  return {1, B, remaining, 0, reset}
end

if peek then
  local allowed, _, retry = evaluate(1)
  local _, remaining, _, reset = evaluate(0)
  return {allowed and 1 or 0, B, remaining, retry, reset}
end

local allowed, remaining, retry, reset, new_backlog = evaluate(cost)
if allowed and cost > 0 then
  redis.call("HSET", KEYS[1], "tat", int(t + new_backlog), "w", int(t))
  redis.call("PEXPIRE", KEYS[1], int(ttl_ms(reset)))
end
return {allowed and 1 or 0, B, remaining, retry, reset}
