-- part: sliding_window_log (README "Policy formulas", SlidingWindowLog; decides exactly as
-- ratelimit::SlidingWindowLog::Rules at a 1 us tick). The key is a sorted set of admitted requests:
-- score = timestamp (us), member = "<timestamp>:<cost>". Requests admitted at the same timestamp are
-- merged into one member (their costs summed; they expire together), so members are unique without
-- randomness. A refund that leaves live members older than its time adds "<t>:0" at its time t (its
-- write time, README "Refunds"): always the newest member, replaced by the next write. After every write
-- all members are live with costs summing to at most L, and only writes change the set: at most L + 1
-- members. Limit L, window W (us; the window is (t - W, t]).

-- One step on `key` at `now` (integer microseconds, or "" for the server's TIME) for cost n >= 0 (a
-- number): mode "0" check (keeps an admitted cost), "1" peek, "2" refund n, "3" dry check (decides as
-- "0", writes nothing: the layered script's first pass). Returns the reply
-- {allowed (1/0), limit, remaining, retry_after_us (-1 = never), reset_after_us}.
local function sliding_window_log(key, now, cost, mode, L, W)
  now = clock(now)
  local peek = mode == "1"

  -- At most L members (see above), oldest first.
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
  -- The newest member that holds units (a refund's cost-0 mark may follow it); used when count > 0.
  local newest_cost = newest
  if #at > 1 and costs[#at] == 0 then newest_cost = at[#at - 1] end

  local function evaluate(n)
    local allowed = n <= L - count
    local remaining = L - (allowed and count + n or count)
    local reset = 0
    if allowed and n > 0 then
      reset = W
    elseif count > 0 then
      reset = newest_cost + W - t
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

  -- Refund (mode "2"; README "Refunds"): n units are taken off the newest live members (a
  -- member shrinks or goes); expired members are dropped. Reply: the state afterwards as a cost-0 check
  -- sees it; the TTL stays (the newest timestamp holding units does not grow).
  if mode == "2" then
    if first_live > 1 then redis.call("ZREMRANGEBYSCORE", key, "-inf", int(t - W)) end
    local left, i = cost, #at
    while left > 0 and i >= first_live do
      local take = costs[i] < left and costs[i] or left
      -- The smaller member goes in before the old one leaves (their names differ by the cost): removing
      -- the only member first deletes the key, and on a migrating slot the add is then refused
      -- mid-script, as for the check below.
      if costs[i] > take then redis.call("ZADD", key, int(at[i]), int(at[i]) .. ":" .. int(costs[i] - take)) end
      redis.call("ZREM", key, raw[2 * i - 1])
      costs[i], count, left = costs[i] - take, count - take, left - take
      if costs[i] == 0 then i = i - 1 end
    end
    while i >= first_live and costs[i] == 0 do i = i - 1 end  -- a mark left by n = 0
    newest_cost = nil
    if count > 0 then
      newest_cost = at[i]
      -- Writes the state at t: a clock that steps back stands at t (members older than t are left).
      if cost > 0 and at[i] < t then redis.call("ZADD", key, int(t), int(t) .. ":0") end
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
  if allowed and cost > 0 and mode == "0" then
    -- Add before removing: the key must never be empty (deleted) between two writes. On Redis Cluster a
    -- write to a missing key of a slot being migrated fails mid-script, and a script is not rolled back.
    -- The newest member merges when it is at t; a refund's cost-0 mark is replaced.
    local replaces = newest == t or (newest ~= nil and costs[#costs] == 0)
    local merged = cost
    if replaces then merged = merged + costs[#costs] end
    redis.call("ZADD", key, int(t), int(t) .. ":" .. int(merged))
    if replaces then redis.call("ZREM", key, raw[#raw - 1]) end
    if first_live > 1 then redis.call("ZREMRANGEBYSCORE", key, "-inf", int(t - W)) end
    redis.call("PEXPIRE", key, int(ttl_ms(reset)))
  end
  return {allowed and 1 or 0, L, remaining, retry, reset}
end
