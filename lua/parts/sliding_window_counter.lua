-- part: sliding_window_counter (README "Policy formulas", SlidingWindowCounter; decides exactly as
-- ratelimit::SlidingWindowCounter::Rules at a 1 us tick). The key is a hash {w = latest write time (us),
-- c = count of w's window, p = count of the window before}; limit L, window W (us). Bound: L * W <= 2^53
-- (checked in C++): every product below is at most L * W, so it is exact in Lua's doubles.

-- floor(a / b) for integers a >= 0, b >= 1 below 2^53, exactly.
local function idiv(a, b) return (a - math.fmod(a, b)) / b end

-- One step on `key` at `now` (integer microseconds, or "" for the server's TIME) for cost n >= 0 (a
-- number): mode "0" check (keeps an admitted cost), "1" peek, "2" refund n, "3" dry check (decides as
-- "0", writes nothing: the layered script's first pass). Returns the reply
-- {allowed (1/0), limit, remaining, retry_after_us (-1 = never), reset_after_us}.
local function sliding_window_counter(key, now, cost, mode, L, W)
  now = clock(now)
  local peek = mode == "1"

  local s = redis.call("HMGET", key, "w", "c", "p")
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

  -- Refund (mode "2"; README "Refunds"): cur = max(0, cur - n); prev is history and stays.
  -- The reply is the state afterwards as a cost-0 check sees it; the TTL stays (reset_after does not grow).
  if mode == "2" then
    if cur > 0 and cost > 0 then
      cur = cur > cost and cur - cost or 0
      if cur > 0 or prev > 0 then
        redis.call("HSET", key, "w", int(t), "c", int(cur), "p", int(prev))
      else
        redis.call("DEL", key)
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
  if allowed and cost > 0 and mode == "0" then
    redis.call("HSET", key, "w", int(t), "c", int(cur + cost), "p", int(prev))
    redis.call("PEXPIRE", key, int(ttl_ms(reset)))
  end
  return {allowed and 1 or 0, L, remaining, retry, reset}
end
