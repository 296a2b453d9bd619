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
-- pass), "4" reserve n, "5" cancel a booking of n, "6" settle: debit n > 0, or refund -n when n <= 0. Modes "4" to
-- "6" (never in the layered script) read their extra arguments from ARGV[6..7]. Returns the five reply values
-- allowed (1/0), limit, remaining, retry_after_us (-1 = never), reset_after_us; a reserve three more: ok (1/0),
-- booked TAT, delay_us (-1 = never). Reservations and debts may take the backlog beyond tau (up to the horizon,
-- bounded in C++): then the cost-0 view is a denial until the backlog is back to tau.
local function gcra(key, now, cost, mode, B, T)
  local tau, t, backlog = B * T, now, 0                      -- backlog = max(TAT, t) - t, >= 0
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

  if mode ~= "0" and mode ~= "3" then                         -- every mode but a check's: off the check's path
    if mode == "6" and cost <= 0 then mode, cost = "2", -cost end  -- a settle below what was charged: a refund
    -- The write after the step: "keep" SET ... KEEPTTL (DEL when full), "grow" SET ... PX (the wait grew).
    local write, ok, booked, delay
    -- Refund (mode "2"; include/ratelimit/README.md "Refunds"): TAT = max(TAT - n*T, t): the backlog shrinks by n*T,
    -- never past full. The TTL stays (no wait grows). Reply: the state afterwards as a cost-0 check sees it.
    if mode == "2" then
      if backlog > 0 and cost > 0 then
        if cost * T >= backlog then backlog = 0 else backlog = backlog - cost * T end  -- exact below 2^53
        write = "keep"
      end
    elseif mode == "1" then                                  -- a peek asks for cost 1, which fits B >= 1
      local room = tau - backlog
      local over = backlog + T - tau
      if over > 0 then return 0, B, room > 0 and (room - room % T) / T or 0, over, backlog end
      return 1, B, (room - room % T) / T, 0, backlog
    elseif mode == "4" then
      -- Reserve n (include/ratelimit/README.md "Reservations"): books when n <= B and the delay
      -- max(0, backlog + n*T - tau) is at most ARGV[6] (C++ keeps the backlog within the horizon by it), else
      -- writes nothing. Reply: the cost-0 view afterwards, then ok (1/0), the booked TAT and the delay (-1 = never).
      ok, booked, delay = 0, 0, -1
      if cost <= B then
        local new_backlog = backlog + cost * T
        delay = new_backlog > tau and new_backlog - tau or 0
        if delay <= tonumber(ARGV[6]) then
          ok, booked = 1, t + new_backlog
          if cost > 0 then backlog, write = new_backlog, "grow" end
        end
      end
    elseif mode == "5" then
      -- Cancel a booking (ARGV[6] its TAT, ARGV[7] its time to act, n its units), as x/time/rate's CancelAt: nothing
      -- once the time to act has come; else n*T less what later bookings added (TAT - booked TAT) goes back, never
      -- taking the TAT below the one the booking started from (a reset, refund or settle gave its units back).
      local booked_tat, act_at = tonumber(ARGV[6]), tonumber(ARGV[7])
      if state and act_at > t then
        local restore = cost * T - (t + backlog > booked_tat and t + backlog - booked_tat or 0)
        local held = t + backlog - (booked_tat - cost * T)
        if held < restore then restore = held end
        if restore > 0 then backlog, write = backlog > restore and backlog - restore or 0, "keep" end
      end
    else
      -- Debit n > 0 (mode "6", a settle above what was charged, include/ratelimit/README.md "Settling after the
      -- response"): the backlog grows by n*T even beyond tau, to at most ARGV[6] (tau + max_debt*T within the
      -- horizon: C++ computes it and clamps n); a debit never lowers it.
      local cap = tonumber(ARGV[6])
      local new_backlog = backlog + cost * T
      if new_backlog > cap then new_backlog = cap > backlog and cap or backlog end
      if new_backlog > backlog then backlog, write = new_backlog, "grow" end
    end
    if write == "grow" then
      local r = backlog % 1000                               -- TTL ceil(reset_after / 1 ms) + 1000 ms
      redis.call("SET", key, struct.pack("<dddd", t + backlog, t, T, B), "PX",
                 (backlog - r) / 1000 + (r > 0 and 1 or 0) + 1000)
    elseif write and backlog > 0 then
      redis.call("SET", key, struct.pack("<dddd", t + backlog, t, T, B), "KEEPTTL")
    elseif write then
      redis.call("DEL", key)
    end
    -- The cost-0 view (in debt: denied until the backlog is back to tau), and a reserve's three values.
    local room = tau - backlog
    if room < 0 then return 0, B, 0, -room, backlog, ok, booked, delay end
    return 1, B, (room - room % T) / T, 0, backlog, ok, booked, delay
  end

  -- Denied: room < 0 when the backlog is beyond tau (booked ahead or owed), where no unit remains.
  local room = tau - backlog
  if cost > B then return 0, B, room > 0 and (room - room % T) / T or 0, -1, backlog end
  local new_backlog = backlog + cost * T                     -- <= the horizon + tau (C++ bounds the backlog)
  if new_backlog > tau then return 0, B, room > 0 and (room - room % T) / T or 0, new_backlog - tau, backlog end
  if cost > 0 and mode == "0" then
    local r = new_backlog % 1000                             -- TTL ceil(reset_after / 1 ms) + 1000 ms
    redis.call("SET", key, struct.pack("<dddd", t + new_backlog, t, T, B), "PX",
               (new_backlog - r) / 1000 + (r > 0 and 1 or 0) + 1000)
  end
  room = tau - new_backlog
  return 1, B, (room - room % T) / T, 0, new_backlog
end
