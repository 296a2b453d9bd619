-- part: gcra (include/ratelimit/README.md "Policy formulas", Gcra, and TokenBucket, which decides exactly as GCRA;
-- decides exactly as ratelimit::Gcra::Rules at a 1 us tick). Virtual scheduling form, ITU-T I.371. The key holds
-- struct.pack("<dddd", tat, w, T, B): theoretical arrival time and latest write time, integer microseconds, and the
-- parameters it was written under (little-endian doubles, exact below 2^53; one value, so one GET and one SET with its
-- TTL; a 16-byte "<dd" state of an older version counts as written under the caller's parameters). A state of other
-- parameters (a named limiter's policy changed) is converted. A token bucket's TAT is the time it is full again
-- (full_at), its tau the time to refill it (C * T). Burst B (the decision's limit), emission interval T (us); tolerance
-- tau = B * T (us; 2 * tau stays below 2^52, checked in C++). Effective t = max(now, w): a clock that steps back sees
-- time stand still. Speed: one GET, at most one SET, no table, no number formatting: this runs on every request.

-- One step on `key` at `now` (integer microseconds) for cost n >= 0: mode "0" check (keeps an admitted
-- cost), "1" peek, "2" refund n, "3" dry check (decides as "0", writes only a conversion: the layered script's first
-- pass). Returns the five reply values allowed (1/0), limit, remaining, retry_after_us (-1 = never),
-- reset_after_us.
local function gcra(key, now, cost, mode, B, T)
  local tau, t, backlog = B * T, now, 0                      -- backlog = max(TAT, t) - t, in [0, tau]
  local state = redis.call("GET", key)
  if state then
    local tat, written, T0, B0
    if #state > 16 then tat, written, T0, B0 = struct.unpack("<dddd", state) else tat, written = struct.unpack("<dd", state) end
    if written > t then t = written end
    if tat > t then backlog = tat - t end
    if T0 and (T0 ~= T or B0 ~= B) then
      -- Written under other parameters (include/ratelimit/README.md "Changing a policy at run time"): the used units
      -- ceil(backlog / T_old) stay used, clamped to B. A check (a dry one too: a joint check this layer
      -- denies must not leave the old, shorter TTL) or refund writes the converted state at once, its TTL
      -- from the new backlog (its own write, if any, then keeps that TTL or sets its own).
      if backlog > 0 then
        local r0 = backlog % T0
        local used = (backlog - r0) / T0 + (r0 > 0 and 1 or 0)
        if used > B then used = B end
        backlog = used * T
      end
      if mode ~= "1" then
        if backlog > 0 then
          local r = backlog % 1000
          redis.call("SET", key, struct.pack("<dddd", t + backlog, t, T, B), "PX",
                     (backlog - r) / 1000 + (r > 0 and 1 or 0) + 1000)
        else
          redis.call("DEL", key)
        end
      end
    end
  end

  -- Refund (mode "2"; include/ratelimit/README.md "Refunds"): TAT = max(TAT - n*T, t): the backlog shrinks by n*T,
  -- never past full. The TTL stays (no wait grows). Reply: the state afterwards as a cost-0 check sees it.
  if mode == "2" then
    if backlog > 0 and cost > 0 then
      if cost * T >= backlog then backlog = 0 else backlog = backlog - cost * T end  -- exact below 2^53
      if backlog > 0 then
        redis.call("SET", key, struct.pack("<dddd", t + backlog, t, T, B), "KEEPTTL")
      else
        redis.call("DEL", key)
      end
    end
    local room = tau - backlog
    return 1, B, (room - room % T) / T, 0, backlog
  end

  local room = tau - backlog
  if mode == "1" then                                        -- a peek asks for cost 1, which fits B >= 1
    local over = backlog + T - tau
    if over > 0 then return 0, B, (room - room % T) / T, over, backlog end
    return 1, B, (room - room % T) / T, 0, backlog
  end
  if cost > B then return 0, B, (room - room % T) / T, -1, backlog end
  local new_backlog = backlog + cost * T                     -- <= 2 tau
  if new_backlog > tau then return 0, B, (room - room % T) / T, new_backlog - tau, backlog end
  if cost > 0 and mode == "0" then
    local r = new_backlog % 1000                             -- TTL ceil(reset_after / 1 ms) + 1000 ms
    redis.call("SET", key, struct.pack("<dddd", t + new_backlog, t, T, B), "PX",
               (new_backlog - r) / 1000 + (r > 0 and 1 or 0) + 1000)
  end
  room = tau - new_backlog
  return 1, B, (room - room % T) / T, 0, new_backlog
end
