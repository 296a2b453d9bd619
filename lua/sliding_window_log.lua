-- ratelimit: sliding window log check, one atomic step (SPEC section 3, SlidingWindowLog; must decide
-- exactly as ratelimit::SlidingWindowLog::Rules evaluated at a 1 us tick).
--
-- KEYS[1]  sorted set of admitted requests: score = timestamp (us), member = "<timestamp>:<cost>".
--          Requests admitted at the same timestamp are merged into one member (their costs summed; they
--          expire together), so members are unique without randomness. After every write all members
--          are live with costs summing to at most L, and only writes change the set: at most L members.
-- ARGV[1]  now: integer microseconds since the epoch, or "" to read the server's TIME
-- ARGV[2]  cost: integer >= 0 (ignored when peeking)
-- ARGV[3]  "1" = peek (cost 1's allowed/retry_after, cost 0's remaining/reset_after), "0" = check,
--          "2" = refund ARGV[2] units (see "Refund" below)
-- ARGV[4]  limit L: integer in [1, 2^53)
-- ARGV[5]  window W: microseconds, integer >= 1; the window is (t - W, t]
-- Reply    {allowed (1/0), limit, remaining, retry_after_us (-1 = never), reset_after_us}
-- Writes   only an admitted check with cost >= 1: drops expired members, adds or merges (t, cost);
--          PEXPIRE ceil(W / 1 ms) + 1000 ms (the newest member is then t, so reset_after = W).
-- Time     effective t = max(now, newest timestamp): a clock that steps back sees time stand still.
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

local now = clock(ARGV[1])
local cost = tonumber(ARGV[2])
local peek = ARGV[3] == "1"
local L = tonumber(ARGV[4])
local W = tonumber(ARGV[5])

-- At most L members (see above), oldest first.
local raw = redis.call("ZRANGE", KEYS[1], 0, -1, "WITHSCORES")
local at, costs = {}, {}
for i = 1, #raw, 2 do
  at[#at + 1] = tonumber(raw[i + 1])
  costs[#costs + 1] = tonumber(string.match(raw[i], ":(%d+)$"))
end
local newest = at[#at]
local t = now
if newest and newest > t then t = newest end
local first_live = 1
while first_live <= #at and at[first_live] <= t - W do first_live = first_live + 1 end
local count = 0
for i = first_live, #at do count = count + costs[i] end

local function evaluate(n)
  local allowed = n <= L - count
  local remaining = L - (allowed and count + n or count)
  local reset = 0
  if allowed and n > 0 then
    reset = W
  elseif count > 0 then
    reset = newest + W - t
  end
  if n > L then return false, remaining, -1, reset end
  local retry = 0
  if not allowed then
    -- Oldest first, until the members that leave free enough room for this request.
    local need, freed = count + n - L, 0
    for i = first_live, #at do
      freed = freed + costs[i]
      if freed >= need then
        retry = at[i] + W - t
        break
      end
    end
  end
  return allowed, remaining, retry, reset
end

-- Refund (ARGV[3] = "2"; SPEC addition "Refunds"): n units are taken off the newest live members (a
-- member shrinks or goes); expired members are dropped. Reply: the state afterwards as a cost-0 check
-- sees it; the TTL stays (the newest timestamp does not grow).
if ARGV[3] == "2" then
  if first_live > 1 then redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", int(t - W)) end
  local left, i = cost, #at
  while left > 0 and i >= first_live do
    local take = costs[i] < left and costs[i] or left
    redis.call("ZREM", KEYS[1], raw[2 * i - 1])
    if costs[i] > take then redis.call("ZADD", KEYS[1], int(at[i]), int(at[i]) .. ":" .. int(costs[i] - take)) end
    costs[i], count, left = costs[i] - take, count - take, left - take
    if costs[i] == 0 then i = i - 1 end
  end
  newest = nil
  if count > 0 then newest = at[i] end
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
  -- Add before removing: the key must never be empty (deleted) between two writes. On Redis Cluster a
  -- write to a missing key of a slot being migrated fails mid-script, and a script is not rolled back.
  local merged = cost
  if newest == t then merged = merged + costs[#costs] end
  redis.call("ZADD", KEYS[1], int(t), int(t) .. ":" .. int(merged))
  if newest == t then redis.call("ZREM", KEYS[1], raw[#raw - 1]) end
  if first_live > 1 then redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", int(t - W)) end
  redis.call("PEXPIRE", KEYS[1], int(ttl_ms(reset)))
end
return {allowed and 1 or 0, L, remaining, retry, reset}
