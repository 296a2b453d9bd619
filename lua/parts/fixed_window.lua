-- part: fixed_window (include/ratelimit/README.md "Policy formulas", FixedWindow; decides exactly as
-- ratelimit::FixedWindow::Rules at a 1 us tick). The key holds struct.pack("<dd", w, c): the latest write time (us) and
-- the count of w's window (two little-endian doubles, exact below 2^53); limit L, window W (us). Effective t = max(now,
-- w): a clock that steps back sees time stand still at the latest write. Windows are epoch-aligned: the one holding t
-- starts at t - t % W. TTL: the first write of a window sets it (ceil(reset_after / 1 ms) + 1000 ms: the window's end
-- plus 1 s); later writes of that window keep it (KEEPTTL), since the window's end does not move.

-- One step on `key` at `now` (integer microseconds) for cost n >= 0: mode "0" check (keeps an admitted
-- cost), "1" peek, "2" refund n, "3" dry check (decides as "0", writes only a conversion: the layered script's first
-- pass), "6" settle: debit n > 0 (the count at most ARGV[6]), or refund -n when n <= 0. Returns the five reply
-- values allowed (1/0), limit, remaining, retry_after_us (-1 = never), reset_after_us.
local function fixed_window(key, now, cost, mode, L, W)
  local t, c, same = now, 0, false                           -- same: the key already counts t's window
  local state = redis.call("GET", key)
  local start
  if state then
    local written, stored, W0
    if #state > 16 then written, stored, W0 = struct.unpack("<ddd", state) else written, stored = struct.unpack("<dd", state) end
    if written > t then t = written end
    start = t - t % W
    if W0 and W0 ~= W then
      -- Written under another window (include/ratelimit/README.md "Changing a policy at run time"): the count of the
      -- old window that holds t becomes the count of the new window that holds t. A check (a dry one too: a joint check
      -- this layer denies must not leave the old window's TTL) or refund writes it at once, with the new window's TTL
      -- (its own write then keeps that TTL).
      if written - written % W0 == t - t % W0 then c = stored end
      if mode ~= "1" then
        if c > 0 then
          redis.call("SET", key, struct.pack("<ddd", t, c, W), "PX", ttl_ms(W - (t - start)))
          same = true
        else
          redis.call("DEL", key)
        end
      end
    elseif written - written % W == start then
      c, same = stored, true
    end
  else
    start = t - t % W
  end
  local left = W - (t - start)                               -- until the window ends: its reset_after

  if mode ~= "0" and mode ~= "3" then                         -- every mode but a check's: off the check's path
    if mode == "6" and cost <= 0 then mode, cost = "2", -cost end  -- a settle below what was charged: a refund
    -- Refund (mode "2"; include/ratelimit/README.md "Refunds"): c = max(0, c - n) in the current window only; the
    -- reply is the state afterwards as a cost-0 check sees it. Never past full; the TTL stays (reset_after
    -- does not grow).
    if mode == "2" then
      if c > 0 and cost > 0 then
        c = c > cost and c - cost or 0
        if c > 0 then redis.call("SET", key, struct.pack("<ddd", t, c, W), "KEEPTTL") else redis.call("DEL", key) end
      end
      return 1, L, L > c and L - c or 0, 0, c > 0 and left or 0
    elseif mode == "1" then                                  -- cost 1's allowed and retry_after, cost 0's rest
      if c < L then return 1, L, L - c, 0, c > 0 and left or 0 end
      return 0, L, L > c and L - c or 0, left, left               -- a lowered limit below c: 0
    end
    -- Debit n > 0 (mode "6", a settle above what was charged, include/ratelimit/README.md "Settling after the
    -- response"): the current window's count grows by n even beyond L, to at most ARGV[6] (L + max_debt); a debit
    -- never lowers it. It writes as an admitted check does, below.
    local cap = tonumber(ARGV[6])
    cost = c + cost > cap and (cap > c and cap - c or 0) or cost
  elseif cost > 0 and cost > L - c then                      -- cost 0 only reports: allowed, also over a lowered L
    return 0, L, L > c and L - c or 0, cost > L and -1 or left, c > 0 and left or 0
  end
  c = c + cost
  if cost > 0 and mode ~= "3" then
    if same then
      redis.call("SET", key, struct.pack("<ddd", t, c, W), "KEEPTTL")
    else
      redis.call("SET", key, struct.pack("<ddd", t, c, W), "PX", ttl_ms(left))
    end
  end
  return 1, L, L > c and L - c or 0, 0, c > 0 and left or 0
end
