-- ratelimit: a layered check, all or nothing, one atomic step over N keys (issue 5, item 2): each layer
-- has its own policy kind, parameters, time and cost; every layer is decided against its key's state,
-- and only when every layer admits are the consumptions (cost >= 1) kept. Otherwise nothing is written.
-- It decides as ratelimit::check_layers does in memory (the policies' parts are the per-policy scripts').
--
-- KEYS[i]      the key of layer i; all distinct (the C++ side checks; a repeated key is checked layer by
--              layer instead), all in one hash slot on Redis Cluster
-- ARGV[6i-5]   layer i's policy kind: fixed_window, sliding_window_log, sliding_window_counter,
--              token_bucket or gcra
-- ARGV[6i-4]   layer i's now: integer microseconds, or "" for the server's TIME (read once per call)
-- ARGV[6i-3]   layer i's cost: integer >= 0
-- ARGV[6i-2..6i]  the parameters the per-policy script takes as ARGV[4..6] ("" where it takes fewer)
-- Reply        one {allowed (1/0), limit, remaining, retry_after_us (-1 = never), reset_after_us} per
--              layer, in order. When every layer admits: each as its per-policy check would reply.
--              When any denies: the denying layers' replies as their checks would give them, and each
--              admitted layer's current state with nothing consumed {1, limit, remaining, 0, reset_after}
--              (a cost-0 check's numbers: what the in-memory check reports for a rolled-back layer).
-- Writes       only when every layer admits, each layer's commit as in its per-policy script.
-- Parts        time window fixed_window sliding_window_log sliding_window_counter gcra
--              (lua/parts/, in this order, then this file: cmake/RatelimitRedis.cmake assembles the script)

-- Each kind as (state, decide, commit) over a state table with the limit in s.L.
local function gcra_state(key, now, B, T, tau)
  local t, backlog = gcra_load(key, now)
  return {L = B, T = T, tau = tau, t = t, backlog = backlog}
end
local function gcra_layer_decide(s, n) return gcra_decide(s.backlog, n, s.L, s.T, s.tau) end
local function gcra_layer_commit(key, s, _, reset) gcra_commit(key, s.t, reset) end
local kinds = {
  fixed_window = {fixed_window_load, fixed_window_decide, fixed_window_commit},
  sliding_window_log = {sliding_window_log_load, sliding_window_log_decide, sliding_window_log_commit},
  sliding_window_counter = {sliding_window_counter_load, sliding_window_counter_decide, sliding_window_counter_commit},
  gcra = {gcra_state, gcra_layer_decide, gcra_layer_commit},
  token_bucket = {function(key, now, C, T) return gcra_state(key, now, C, T, C * T) end, gcra_layer_decide,
                  gcra_layer_commit},
}

local server_now
local layers, replies, all = {}, {}, true
for i = 1, #KEYS do
  local a = 6 * i - 6
  local kind = kinds[ARGV[a + 1]]
  if not kind then return redis.error_reply("ratelimit layered: unknown policy kind " .. tostring(ARGV[a + 1])) end
  local now = ARGV[a + 2]
  if now == "" then
    server_now = server_now or clock("")
    now = server_now
  else
    now = tonumber(now)
  end
  local cost = tonumber(ARGV[a + 3])
  local s = kind[1](KEYS[i], now, tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6]))
  local allowed, remaining, retry, reset = kind[2](s, cost)
  layers[i] = {kind, s, cost, allowed, reset}
  replies[i] = {allowed and 1 or 0, s.L, remaining, retry, reset}
  if not allowed then all = false end
end
for i = 1, #KEYS do
  local kind, s, cost, allowed, reset = unpack(layers[i])
  if all then
    if cost > 0 then kind[3](KEYS[i], s, cost, reset) end
  elseif allowed then
    local _, remaining, _, current_reset = kind[2](s, 0)
    replies[i] = {1, s.L, remaining, 0, current_reset}
  end
end
return replies
