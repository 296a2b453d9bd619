-- part: sliding_window_counter (include/ratelimit/README.md "Policy formulas", SlidingWindowCounter; decides exactly as
-- ratelimit::SlidingWindowCounter::Rules at a 1 us tick). The key holds struct.pack("<ddd", w, c, p): the
-- latest write time (us), the count of w's window and the count of the window before (little-endian
-- doubles, exact below 2^53); limit L, window W (us), epoch-aligned (the one holding t starts at
-- t - t % W). Bound: L * W <= 2^53 (checked in C++): every product below is at most L * W, so it is exact
-- in Lua's doubles, and divisions of such products use math.fmod, exact for any of them.
-- TTL: the first write of a window sets it (ceil(reset_after / 1 ms) + 1000 ms: the next window's end
-- plus 1 s); later writes of that window keep it (KEEPTTL), since that end does not move.

-- floor(a / b) for integers a >= 0, b >= 1 below 2^53, exactly.
local function idiv(a, b) return (a - math.fmod(a, b)) / b end

-- The decision for cost n >= 0 against counts cur (t's window) and prev (the one before), r = t's offset
-- in its window: allowed (a boolean), remaining, retry_after_us (-1 = never), reset_after_us.
local function sliding_window_counter_decide(n, cur, prev, L, W, r)
  local weighted_prev = prev * (W - r)                        -- <= L * W
  -- cur + n <= L first keeps (cur + n) * W <= L * W. Cost 0 only reports the state: allowed, also over a
  -- limit lowered below the counts.
  local allowed = n == 0 or (n <= L and cur + n <= L and (cur + n) * W <= L * W - weighted_prev)
  local current = allowed and cur + n or cur
  local room = idiv(L * W - weighted_prev, W)
  local remaining = room - current > 0 and room - current or 0
  local reset = 0
  if current > 0 then reset = 2 * W - r elseif prev > 0 then reset = W - r end
  if allowed then return true, remaining, 0, reset end
  if n > L then return false, remaining, -1, reset end
  local a = L - cur - n
  local r1 = W
  if prev > 0 and a >= 0 then r1 = W - idiv(a * W, prev) end
  if r1 < W then return false, remaining, r1 - r, reset end
  local r2 = 0
  if cur > 0 then r2 = W - idiv((L - n) * W, cur) end
  if r2 < 0 then r2 = 0 end
  return false, remaining, (W - r) + r2, reset
end

-- One step on `key` at `now` (integer microseconds) for cost n >= 0: mode "0" check (keeps an admitted
-- cost), "1" peek, "2" refund n, "3" dry check (decides as "0", writes only a conversion: the layered script's first
-- pass), "6" settle: debit n > 0 (the count at most ARGV[6]), or refund -n when n <= 0. Returns the five reply
-- values allowed (1/0), limit, remaining, retry_after_us (-1 = never), reset_after_us.
local function sliding_window_counter(key, now, cost, mode, L, W)
  local t, cur, prev, same = now, 0, 0, false                 -- same: the key already counts t's window
  local state = redis.call("GET", key)
  local start
  if state then
    local written, c, p, W0
    if #state > 24 then written, c, p, W0 = struct.unpack("<dddd", state) else written, c, p = struct.unpack("<ddd", state) end
    if written > t then t = written end
    start = t - t % W
    local w = (W0 and W0 ~= W) and W0 or W                    -- the window the counts were written under
    local start_s = written - written % w
    local start_w = t - t % w
    if start_w == start_s then
      cur, prev, same = c, p, w == W
    elseif start_w == start_s + w then
      prev = c
    end
    if w ~= W and mode ~= "1" then
      -- Written under another window (include/ratelimit/README.md "Changing a policy at run time"): the counts of the
      -- old current and previous windows at t become the new ones'. A check (a dry one too: a joint check this layer
      -- denies must not leave the old TTL) or refund writes them at once, with the new windows' TTL (its own write then
      -- keeps that TTL).
      if cur > 0 or prev > 0 then
        local r = t - start
        redis.call("SET", key, struct.pack("<dddd", t, cur, prev, W), "PX", ttl_ms(cur > 0 and 2 * W - r or W - r))
        same = true
      else
        redis.call("DEL", key)
      end
    end
  else
    start = t - t % W
  end
  local r = t - start
  local decide = sliding_window_counter_decide

  if mode ~= "0" and mode ~= "3" then                         -- every mode but a check's: off the check's path
    if mode == "6" and cost <= 0 then mode, cost = "2", -cost end  -- a settle below what was charged: a refund
    -- Refund (mode "2"; include/ratelimit/README.md "Refunds"): cur = max(0, cur - n), then what is left of n from
    -- prev (its units still weigh (W - r) / W). The reply is the state afterwards as a cost-0 check sees it; the TTL
    -- stays (the previous window's first write set it to this window's end plus 1 s).
    if mode == "2" then
      if (cur > 0 or prev > 0) and cost > 0 then
        local from_cur = cur < cost and cur or cost
        local rest = cost - from_cur
        cur = cur - from_cur
        prev = prev > rest and prev - rest or 0
        if cur > 0 or prev > 0 then
          redis.call("SET", key, struct.pack("<dddd", t, cur, prev, W), "KEEPTTL")
        else
          redis.call("DEL", key)
        end
      end
    elseif mode == "1" then                                   -- cost 1's allowed and retry_after, cost 0's rest
      local allowed, _, retry = decide(1, cur, prev, L, W, r)
      local _, remaining, _, reset = decide(0, cur, prev, L, W, r)
      return allowed and 1 or 0, L, remaining, retry, reset
    else
      -- Debit n > 0 (mode "6", a settle above what was charged, include/ratelimit/README.md "Settling after the
      -- response"): the current window's count grows by n even beyond L, to at most ARGV[6] (L + max_debt: C++
      -- keeps it times W within 2^53); a debit never lowers it. The TTL as a check's write sets or keeps it.
      local cap = tonumber(ARGV[6])
      local n = cur + cost > cap and (cap > cur and cap - cur or 0) or cost
      if n > 0 then
        if same and cur > 0 then
          redis.call("SET", key, struct.pack("<dddd", t, cur + n, prev, W), "KEEPTTL")
        else
          redis.call("SET", key, struct.pack("<dddd", t, cur + n, prev, W), "PX", ttl_ms(2 * W - r))
        end
        cur = cur + n
      end
    end
    local _, remaining, _, reset = decide(0, cur, prev, L, W, r)
    return 1, L, remaining, 0, reset
  end

  local allowed, remaining, retry, reset = decide(cost, cur, prev, L, W, r)
  if allowed and cost > 0 and mode == "0" then
    -- The TTL of the window's first write with cur > 0 covers the next window; a state written here
    -- with cur = 0 (a refund or conversion) has a shorter one, so it is set again.
    if same and cur > 0 then
      redis.call("SET", key, struct.pack("<dddd", t, cur + cost, prev, W), "KEEPTTL")
    else
      redis.call("SET", key, struct.pack("<dddd", t, cur + cost, prev, W), "PX", ttl_ms(reset))
    end
  end
  return allowed and 1 or 0, L, remaining, retry, reset
end
