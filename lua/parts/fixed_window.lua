-- part: fixed_window (README "Policy formulas", FixedWindow; decides exactly as ratelimit::FixedWindow::Rules at a
-- 1 us tick). The key is a hash {w = latest write time (us), c = count of w's window}; limit L, window W
-- (us). Effective t = max(now, w): a clock that steps back sees time stand still at the latest write.

-- One step on `key` at `now` (integer microseconds, or "" for the server's TIME) for cost n >= 0 (a
-- number): mode "0" check (keeps an admitted cost), "1" peek, "2" refund n, "3" dry check (decides as
-- "0", writes nothing: the layered script's first pass). Returns the reply
-- {allowed (1/0), limit, remaining, retry_after_us (-1 = never), reset_after_us}.
local function fixed_window(key, now, cost, mode, L, W)
  now = clock(now)
  local peek = mode == "1"

  local s = redis.call("HMGET", key, "w", "c")
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

  -- Refund (mode "2"; README "Refunds"): c = max(0, c - n) in the current window only; the
  -- reply is the state afterwards as a cost-0 check sees it. Never past full; the TTL stays (reset_after
  -- does not grow).
  if mode == "2" then
    if c > 0 and cost > 0 then
      c = c > cost and c - cost or 0
      if c > 0 then redis.call("HSET", key, "w", int(t), "c", int(c)) else redis.call("DEL", key) end
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
    redis.call("HSET", key, "w", int(t), "c", int(c + cost))
    redis.call("PEXPIRE", key, int(ttl_ms(reset)))
  end
  return {allowed and 1 or 0, L, remaining, retry, reset}
end
