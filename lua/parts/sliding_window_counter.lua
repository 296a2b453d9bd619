-- part: sliding_window_counter (SPEC section 3, SlidingWindowCounter; decides exactly as
-- ratelimit::SlidingWindowCounter::Rules at a 1 us tick). The key is a hash {w = latest write time (us),
-- c = count of w's window, p = count of the window before}. Bound: L * W <= 2^53 (checked in C++), so
-- every product below, at most L * W, is exact in Lua's doubles.

-- State at `now` for limit L and window W (us): effective time t = max(now, w), offset r of t in its
-- window, the counts cur (t's window) and prev (the window before).
local function sliding_window_counter_load(key, now, L, W)
  local st = redis.call("HMGET", key, "w", "c", "p")
  local written = tonumber(st[1])
  local t = now
  if written and written > t then t = written end
  local start = window_start(t, W)
  local cur, prev = 0, 0
  if written then
    local start_s = window_start(written, W)
    if start == start_s then
      cur, prev = tonumber(st[2]) or 0, tonumber(st[3]) or 0
    elseif start == start_s + W then
      prev = tonumber(st[2]) or 0
    end
  end
  return {L = L, W = W, t = t, r = t - start, cur = cur, prev = prev}
end

local function sliding_window_counter_decide(s, n)
  local L, W, r, cur, prev = s.L, s.W, s.r, s.cur, s.prev
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

local function sliding_window_counter_commit(key, s, n, reset)
  redis.call("HSET", key, "w", int(s.t), "c", int(s.cur + n), "p", int(s.prev))
  redis.call("PEXPIRE", key, int(ttl_ms(reset)))
end

-- cur = max(0, cur - n); prev is history and stays. The TTL stays (reset_after does not grow).
local function sliding_window_counter_refund(key, s, n)
  if s.cur > 0 and n > 0 then
    s.cur = s.cur > n and s.cur - n or 0
    if s.cur > 0 or s.prev > 0 then
      redis.call("HSET", key, "w", int(s.t), "c", int(s.cur), "p", int(s.prev))
    else
      redis.call("DEL", key)
    end
  end
end
