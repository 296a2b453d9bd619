-- part: sliding_window_log (SPEC section 3, SlidingWindowLog; decides exactly as
-- ratelimit::SlidingWindowLog::Rules at a 1 us tick). The key is a sorted set of admitted requests:
-- score = timestamp (us), member = "<timestamp>:<cost>". Requests admitted at the same timestamp are
-- merged into one member (their costs summed; they expire together), so members are unique without
-- randomness. After every write all members are live with costs summing to at most L, and only writes
-- change the set: at most L members.

-- State at `now` for limit L and window W (us; the window is (t - W, t]): the members oldest first
-- (raw ZRANGE reply, timestamps `at`, `costs`), effective time t = max(now, newest timestamp), the
-- first live member and the live count.
local function sliding_window_log_load(key, now, L, W)
  local raw = redis.call("ZRANGE", key, 0, -1, "WITHSCORES")
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
  return {L = L, W = W, t = t, raw = raw, at = at, costs = costs, newest = newest, first_live = first_live,
          count = count}
end

local function sliding_window_log_decide(s, n)
  local L, W, t, count = s.L, s.W, s.t, s.count
  local allowed = n <= L - count
  local remaining = L - (allowed and count + n or count)
  local reset = 0
  if allowed and n > 0 then
    reset = W
  elseif count > 0 then
    reset = s.newest + W - t
  end
  if n > L then return false, remaining, -1, reset end
  local retry = 0
  if not allowed then
    -- Oldest first, until the members that leave free enough room for this request.
    local need, freed = count + n - L, 0
    for i = s.first_live, #s.at do
      freed = freed + s.costs[i]
      if freed >= need then
        retry = s.at[i] + W - t
        break
      end
    end
  end
  return allowed, remaining, retry, reset
end

-- Drops expired members, adds or merges (t, n); the newest member is then t, so the TTL covers W.
local function sliding_window_log_commit(key, s, n, reset)
  -- Add before removing: the key must never be empty (deleted) between two writes. On Redis Cluster a
  -- write to a missing key of a slot being migrated fails mid-script, and a script is not rolled back.
  local t, merged = s.t, n
  if s.newest == t then merged = merged + s.costs[#s.costs] end
  redis.call("ZADD", key, int(t), int(t) .. ":" .. int(merged))
  if s.newest == t then redis.call("ZREM", key, s.raw[#s.raw - 1]) end
  if s.first_live > 1 then redis.call("ZREMRANGEBYSCORE", key, "-inf", int(t - s.W)) end
  redis.call("PEXPIRE", key, int(ttl_ms(reset)))
end

-- n units are taken off the newest live members (a member shrinks or goes); expired members are
-- dropped. The TTL stays (the newest timestamp does not grow).
local function sliding_window_log_refund(key, s, n)
  local at, costs, raw = s.at, s.costs, s.raw
  if s.first_live > 1 then redis.call("ZREMRANGEBYSCORE", key, "-inf", int(s.t - s.W)) end
  local left, i = n, #at
  while left > 0 and i >= s.first_live do
    local take = costs[i] < left and costs[i] or left
    redis.call("ZREM", key, raw[2 * i - 1])
    if costs[i] > take then redis.call("ZADD", key, int(at[i]), int(at[i]) .. ":" .. int(costs[i] - take)) end
    costs[i], s.count, left = costs[i] - take, s.count - take, left - take
    if costs[i] == 0 then i = i - 1 end
  end
  s.newest = nil
  if s.count > 0 then s.newest = at[i] end
end
