-- part: sliding_window_log (include/ratelimit/README.md "Policy formulas", SlidingWindowLog; decides exactly as
-- ratelimit::SlidingWindowLog::Rules at a 1 us tick). The key is a sorted set of admitted requests:
-- score = timestamp (us), member = struct.pack("<dd", timestamp, cost) (two little-endian doubles, exact
-- below 2^53, read back without parsing text). Requests admitted at the same timestamp are merged into
-- one member (their costs summed; they expire together), so members are unique without randomness. A
-- refund that leaves live members older than its time adds a member of cost 0 at its time t (its write
-- time, include/ratelimit/README.md "Refunds"): always the newest member, replaced by the next write. After every write
-- all members are live with costs summing to at most L (more after a settle's debit, in at most L members), and only
-- writes change the set: at most L + 1 members. Limit L,
-- window W (us; the window is (t - W, t]).

-- The decision for cost n >= 0 against the members at[i], costs[i] (oldest first, live from first_live,
-- count units in all; newest_cost: the newest member holding units): allowed (a boolean), remaining,
-- retry_after_us (-1 = never), reset_after_us.
local function sliding_window_log_decide(n, at, costs, first_live, count, newest_cost, L, W, t)
  local allowed = n == 0 or n <= L - count                    -- cost 0 only reports: also over a lowered limit
  local remaining = L - (allowed and count + n or count)
  if remaining < 0 then remaining = 0 end                     -- a lowered limit below the count
  local reset = 0
  if allowed and n > 0 then
    reset = W
  elseif count > 0 then
    reset = newest_cost + W - t
  end
  if n > L then return false, remaining, -1, reset end
  if allowed then return true, remaining, 0, reset end
  -- Oldest first, until the members that leave free enough room for this request.
  local need, freed = count + n - L, 0
  for i = first_live, #at do
    freed = freed + costs[i]
    if freed >= need then return false, remaining, at[i] + W - t, reset end
  end
  return false, remaining, 0, reset
end

-- One step on `key` at `now` (integer microseconds) for cost n >= 0: mode "0" check (keeps an admitted
-- cost), "1" peek, "2" refund n, "3" dry check (decides as "0", writes only a conversion: the layered script's first
-- pass), "6" settle: debit n > 0 (the count at most ARGV[6]), or refund -n when n <= 0. Returns the five reply
-- values allowed (1/0), limit, remaining, retry_after_us (-1 = never), reset_after_us.
local function sliding_window_log(key, now, cost, mode, L, W)
  -- At most L + 1 members (see above), oldest first.
  local raw = redis.call("ZRANGE", key, 0, -1)
  local at, costs = {}, {}
  for i = 1, #raw do at[i], costs[i] = struct.unpack("<dd", raw[i]) end
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
  local decide = sliding_window_log_decide

  if mode ~= "0" and mode ~= "3" then                         -- every mode but a check's: off the check's path
    if mode == "6" and cost <= 0 then mode, cost = "2", -cost end  -- a settle below what was charged: a refund
    -- Refund (mode "2"; include/ratelimit/README.md "Refunds"): n units are taken off the newest live members (a
    -- member shrinks or goes); expired members are dropped. Reply: the state afterwards as a cost-0 check
    -- sees it; the TTL stays (the newest timestamp holding units does not grow).
    if mode == "2" then
      if first_live > 1 then redis.call("ZREMRANGEBYSCORE", key, "-inf", int(t - W)) end
      local left, i = cost, #at
      while left > 0 and i >= first_live do
        local take = costs[i] < left and costs[i] or left
        -- The smaller member goes in before the old one leaves (they differ by the cost): removing the
        -- only member first deletes the key, and on a migrating slot the add is then refused mid-script,
        -- as for the check below.
        if costs[i] > take then redis.call("ZADD", key, int(at[i]), struct.pack("<dd", at[i], costs[i] - take)) end
        redis.call("ZREM", key, raw[i])
        costs[i], count, left = costs[i] - take, count - take, left - take
        if costs[i] == 0 then i = i - 1 end
      end
      while i >= first_live and costs[i] == 0 do i = i - 1 end  -- a mark left by n = 0
      newest_cost = nil
      if count > 0 then
        newest_cost = at[i]
        -- Writes the state at t: a clock that steps back stands at t (members older than t are left).
        if cost > 0 and at[i] < t then redis.call("ZADD", key, int(t), struct.pack("<dd", t, 0)) end
      end
      local _, remaining, _, reset = decide(0, at, costs, first_live, count, newest_cost, L, W, t)
      return 1, L, remaining, 0, reset
    end
    if mode == "1" then                                       -- cost 1's allowed and retry_after, cost 0's rest
      local allowed, _, retry = decide(1, at, costs, first_live, count, newest_cost, L, W, t)
      local _, remaining, _, reset = decide(0, at, costs, first_live, count, newest_cost, L, W, t)
      return allowed and 1 or 0, L, remaining, retry, reset
    end
    -- Debit n > 0 (mode "6", a settle above what was charged, include/ratelimit/README.md "Settling after the
    -- response"): one member (t, n) as a check's write adds it (merged with one at t, replacing a refund's mark),
    -- even beyond L, the count at most ARGV[6] (L + max_debt); a debit never lowers it. With L live members
    -- already, the newest takes the units and moves to t (they count longer: the safe side), so the set keeps at
    -- most L + 1 members.
    local cap = tonumber(ARGV[6])
    local n = count + cost > cap and (cap > count and cap - count or 0) or cost
    if n > 0 then
      local replaces = newest == t or (newest ~= nil and (costs[#costs] == 0 or #at - first_live + 1 >= L))
      redis.call("ZADD", key, int(t), struct.pack("<dd", t, replaces and n + costs[#costs] or n))
      if replaces then redis.call("ZREM", key, raw[#raw]) end
      if first_live > 1 then redis.call("ZREMRANGEBYSCORE", key, "-inf", int(t - W)) end
      redis.call("PEXPIRE", key, ttl_ms(W))
      count, newest_cost = count + n, t
    end
    local _, remaining, _, reset = decide(0, at, costs, first_live, count, newest_cost, L, W, t)
    return 1, L, remaining, 0, reset
  end

  local allowed, remaining, retry, reset = decide(cost, at, costs, first_live, count, newest_cost, L, W, t)
  if count > 0 and not (allowed and cost > 0 and mode == "0") then
    -- The TTL was set for the window of the latest write (include/ratelimit/README.md "Changing a policy at run time"):
    -- after a change to a longer one, a check that writes nothing (a denial, a joint check's dry pass) extends it while
    -- the units count, so the key does not expire with them. One PTTL; 1 s of slack for clock skew.
    local need = ttl_ms(newest_cost + W - t)
    if redis.call("PTTL", key) < need - 1000 then redis.call("PEXPIRE", key, need) end
  end
  if allowed and cost > 0 and mode == "0" then
    -- Add before removing: the key must never be empty (deleted) between two writes. On Redis Cluster a
    -- write to a missing key of a slot being migrated fails mid-script, and a script is not rolled back.
    -- The newest member merges when it is at t; a refund's cost-0 mark is replaced.
    local replaces = newest == t or (newest ~= nil and costs[#costs] == 0)
    local merged = cost
    if replaces then merged = merged + costs[#costs] end
    redis.call("ZADD", key, int(t), struct.pack("<dd", t, merged))
    if replaces then redis.call("ZREM", key, raw[#raw]) end
    if first_live > 1 then redis.call("ZREMRANGEBYSCORE", key, "-inf", int(t - W)) end
    redis.call("PEXPIRE", key, ttl_ms(reset))
  end
  return allowed and 1 or 0, L, remaining, retry, reset
end
