-- part: fixed_window (SPEC section 3, FixedWindow; decides exactly as ratelimit::FixedWindow::Rules at a
-- 1 us tick). The key is a hash {w = latest write time (us), c = count of w's window}.

-- State at `now` for limit L and window W (us): effective time t = max(now, w) (a clock that steps back
-- sees time stand still at the latest write), offset r of t in its window, count c of that window.
local function fixed_window_load(key, now, L, W)
  local st = redis.call("HMGET", key, "w", "c")
  local written, stored = tonumber(st[1]), tonumber(st[2])
  local t = now
  if written and written > t then t = written end
  local start = window_start(t, W)
  local c = 0
  if written and stored and stored > 0 and window_start(written, W) == start then c = stored end
  return {L = L, W = W, t = t, r = t - start, c = c}
end

local function fixed_window_decide(s, n)
  local L, c = s.L, s.c
  local allowed = n <= L - c
  local after = allowed and c + n or c
  local reset = after > 0 and s.W - s.r or 0
  local retry = 0
  if n > L then
    allowed, retry = false, -1
  elseif not allowed then
    retry = s.W - s.r
  end
  return allowed, L - after, retry, reset
end

local function fixed_window_commit(key, s, n, reset)
  redis.call("HSET", key, "w", int(s.t), "c", int(s.c + n))
  redis.call("PEXPIRE", key, int(ttl_ms(reset)))
end

-- c = max(0, c - n) in the current window only: never past full; the TTL stays (reset_after does not grow).
local function fixed_window_refund(key, s, n)
  if s.c > 0 and n > 0 then
    s.c = s.c > n and s.c - n or 0
    if s.c > 0 then redis.call("HSET", key, "w", int(s.t), "c", int(s.c)) else redis.call("DEL", key) end
  end
end
