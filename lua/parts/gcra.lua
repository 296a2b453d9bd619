-- part: gcra (SPEC section 3, Gcra and TokenBucket; decides exactly as ratelimit::Gcra::Rules at a 1 us
-- tick). Virtual scheduling form, ITU-T I.371. The key holds struct.pack("<dd", tat, w): theoretical
-- arrival time and latest write time, integer microseconds (two little-endian doubles, exact below
-- 2^53; one value, so one GET and one SET with its TTL). A token bucket is the same state: its TAT is
-- the time the bucket is full again, its tau the time to refill it (C * T).
-- Speed: multiple return values, no tables: the per-policy scripts run on every request.

-- Effective time t = max(now, w) and backlog = max(TAT, t) - t, in [0, tau] (0 = full or absent).
local function gcra_load(key, now)
  local t, backlog = now, 0
  local state = redis.call("GET", key)
  if state then
    local tat, written = struct.unpack("<dd", state)
    if written > t then t = written end
    if tat > t then backlog = tat - t end
  end
  return t, backlog
end

-- Remaining whole units with `backlog` of the tolerance used: floor((tau - backlog) / T).
local function gcra_room(backlog, T, tau) return (tau - backlog - math.fmod(tau - backlog, T)) / T end

-- Decision for cost n, writing nothing: allowed, remaining, retry_after_us (-1 = never), reset_after_us
-- (when admitted, reset_after is the backlog to keep).
local function gcra_decide(backlog, n, B, T, tau)
  if n > B then return false, gcra_room(backlog, T, tau), -1, backlog end
  local new_backlog = backlog + n * T                        -- <= 2 tau
  if new_backlog > tau then return false, gcra_room(backlog, T, tau), new_backlog - tau, backlog end
  return true, gcra_room(new_backlog, T, tau), 0, new_backlog
end

-- Keeps an admitted cost >= 1: TAT = t + backlog, one SET with PX ceil(backlog / 1 ms) + 1000 ms.
local function gcra_commit(key, t, backlog)
  local r = math.fmod(backlog, 1000)
  local ttl = (backlog - r) / 1000 + (r > 0 and 1 or 0) + 1000
  redis.call("SET", key, struct.pack("<dd", t + backlog, t), "PX", ttl)
end

-- The one-key script (mode "0" check, "1" peek, "2" refund) for burst B, emission interval T, tau = B*T.
local function gcra_script(key, now, cost, mode, B, T, tau)
  local t, backlog = gcra_load(key, now)
  if mode == "2" then
    -- Refund (SPEC addition "Refunds"): TAT = max(TAT - n*T, t): the backlog shrinks by n*T, never past
    -- full. The TTL stays (no wait grows). Reply: the state afterwards as a cost-0 check sees it.
    if backlog > 0 and cost > 0 then
      if cost * T >= backlog then backlog = 0 else backlog = backlog - cost * T end  -- exact below 2^53
      if backlog > 0 then
        redis.call("SET", key, struct.pack("<dd", t + backlog, t), "KEEPTTL")
      else
        redis.call("DEL", key)
      end
    end
    return {1, B, gcra_room(backlog, T, tau), 0, backlog}
  end
  if mode == "1" then                                        -- cost 1's allowed/retry, cost 0's numbers
    local allowed, _, retry = gcra_decide(backlog, 1, B, T, tau)
    return {allowed and 1 or 0, B, gcra_room(backlog, T, tau), retry, backlog}
  end
  local allowed, remaining, retry, reset = gcra_decide(backlog, cost, B, T, tau)
  if allowed and cost > 0 then gcra_commit(key, t, reset) end
  return {allowed and 1 or 0, B, remaining, retry, reset}
end
