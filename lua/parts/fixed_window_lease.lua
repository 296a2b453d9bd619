-- part: fixed_window_lease (include/ratelimit/redis/README.md "Budget leases"; computes exactly as
-- ratelimit::lease::FixedWindowLease at a 1 us tick). The key is the fixed window's hash {w = latest write time (us), c
-- = count of w's window, r = resets of the key so far (absent: 0)}. Effective t = max(now, w).

-- mode "0": grant between a (need) and b (want) units of the current window; "1": peek; "2": give back a units
-- of the grant made in the window starting at b after e resets; "3": reset (count 0, one more reset: returns of
-- earlier grants give it nothing). Reply {allowed, limit, remaining, retry_after_us (-1 never), reset_after_us,
-- units, mark (window start), resets, serve_for_us (the rest of the window)}.
local function fixed_window_lease(key, now, mode, a, b, e, L, W)
  local t = clock(now)
  local s = redis.call("HMGET", key, "w", "c", "r")
  local written, stored = tonumber(s[1]), tonumber(s[2])
  local resets = tonumber(s[3]) or 0
  if written and written > t then t = written end
  local start = window_start(t, W)
  local r = t - start
  local c = 0
  if written and stored and stored > 0 and written >= start then c = stored end
  local function reply(allowed, retry, units)
    return {allowed, L, L - c, retry, c > 0 and W - r or 0, units, start, resets, W - r}
  end

  if mode == "3" then
    if written then
      c = 0
      resets = resets + 1
      redis.call("HSET", key, "w", int(t), "c", 0, "r", int(resets))
    end
    return reply(1, 0, 0)
  end
  if mode == "2" then
    if a > 0 and c > 0 and start == b and e == resets then
      c = c > a and c - a or 0
      redis.call("HSET", key, "w", int(t), "c", int(c))
    end
    return reply(1, 0, 0)
  end
  if mode == "1" then
    if c + 1 <= L then return reply(1, 0, 0) end
    return reply(0, W - r, 0)
  end
  if a > L then return reply(0, -1, 0) end
  if a > L - c then return reply(0, W - r, 0) end
  local units = b
  if units > L - c then units = L - c end
  if units < a then units = a end
  if units > 0 then
    c = c + units
    redis.call("HSET", key, "w", int(t), "c", int(c))
    redis.call("PEXPIRE", key, int(ttl_ms(W - r)))
  end
  return reply(1, 0, units)
end
