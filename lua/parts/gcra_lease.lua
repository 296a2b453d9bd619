-- part: gcra_lease (include/ratelimit/redis/README.md "Budget leases"; computes exactly as ratelimit::lease::GcraLease
-- at a 1 us tick, for GCRA and the token bucket). The key holds struct.pack("<dddd", tat, written, granted, horizon):
-- the TAT, the latest write time, the units granted so far (a counter that never decreases) and the largest TAT any
-- grant left (the TTL keeps the key until then + 1 s, so a return never meets a newer incarnation of the key). T:
-- emission interval (us); tol: the reduced tolerance tau - L (us), T <= tol, 2 * tau below 2^52. Effective t = max(now,
-- written): a clock that steps back sees time stand still.

-- mode "0": grant between a (need) and b (want) units; "1": peek; "2": give back a units of the grant that
-- left TAT b and counter c; "3": reset (a fresh budget; returns of grants made before it give it nothing).
-- Reply {allowed, limit, remaining, retry_after_us (-1 never), reset_after_us, units, mark (TAT after),
-- granted_after, serve_for_us (-1: no bound but the lease lifetime)}.
local function gcra_lease(key, now, mode, a, b, c, T, tol)
  local t = clock(now)
  local tat, written, granted, horizon = nil, nil, 0, nil
  local backlog = 0
  local state = redis.call("GET", key)
  if state then
    tat, written, granted, horizon = struct.unpack("<dddd", state)
    if written > t then t = written end
    if tat > t then backlog = tat - t end
  end
  local limit = (tol - math.fmod(tol, T)) / T
  if mode == "3" then
    -- Backlog 0, and the counter moved past every grant outstanding by limit + 1 units: a return's floor,
    -- (granted - c) * T, is then above any backlog, so it lowers nothing. KEEPTTL keeps the horizon.
    if state then
      granted = granted + limit + 1
      redis.call("SET", key, struct.pack("<dddd", t, t, granted, horizon), "KEEPTTL")
    end
    return {1, limit, limit, 0, 0, 0, t, granted, -1}
  end
  local function avail_now()
    local room = tol - backlog
    if room <= 0 then return 0 end
    return (room - math.fmod(room, T)) / T
  end

  if mode == "2" then
    -- Lower the TAT by at most min(a * T, mark - t), and never below t + T * (units granted since the lease).
    if a > 0 and backlog > 0 and b > t and granted >= c then
      local delta = a * T
      if delta > b - t then delta = b - t end
      local floor_backlog = (granted - c) * T
      if floor_backlog > backlog then floor_backlog = backlog end
      local nb = backlog - delta
      if nb < floor_backlog then nb = floor_backlog end
      if nb < 0 then nb = 0 end
      if nb < backlog then
        backlog = nb
        redis.call("SET", key, struct.pack("<dddd", t + nb, t, granted, horizon), "KEEPTTL")
      end
    end
    return {1, limit, avail_now(), 0, backlog, 0, t + backlog, granted, -1}
  end

  local avail = avail_now()
  if mode == "1" then
    if avail >= 1 then return {1, limit, avail, 0, backlog, 0, t + backlog, granted, -1} end
    return {0, limit, avail, backlog + T - tol, backlog, 0, t + backlog, granted, -1}
  end

  if a > limit then return {0, limit, avail, -1, backlog, 0, t + backlog, granted, -1} end
  if a > avail then return {0, limit, avail, backlog + a * T - tol, backlog, 0, t + backlog, granted, -1} end
  local units = b
  if units > avail then units = avail end
  if units < a then units = a end
  if units > 0 then
    backlog = backlog + units * T
    granted = granted + units
    if horizon == nil or t + backlog > horizon then horizon = t + backlog end
    redis.call("SET", key, struct.pack("<dddd", t + backlog, t, granted, horizon), "PX", ttl_ms(horizon - t))
  end
  return {1, limit, avail - units, 0, backlog, units, t + backlog, granted, -1}
end
