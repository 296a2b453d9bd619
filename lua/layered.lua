-- ratelimit: a layered check, all or nothing, one atomic step over N keys: each layer
-- has its own policy kind, parameters, time and cost; every layer is decided against its key's state,
-- and only when every enforcing layer admits are the consumptions (cost >= 1) kept. Otherwise nothing is written.
-- It decides as ratelimit::check_layers does in memory (the policies' parts are the per-policy scripts').
--
-- KEYS[i]      the key of layer i; all distinct (the C++ side checks; a repeated key is checked layer by
--              layer instead), all in one hash slot on Redis Cluster
-- ARGV[5i-4]   layer i's policy kind: fixed_window, sliding_window_log, sliding_window_counter,
--              token_bucket or gcra
-- ARGV[5i-3]   layer i's now: integer microseconds, or "" for the server's TIME (read once per call)
-- ARGV[5i-2]   layer i's cost: integer >= 0
-- ARGV[5i-1..5i]  the two parameters the per-policy script takes as ARGV[4..5]
-- ARGV[5n+1]   optional shadow mask: character i is "1" when layer i is in shadow mode (its denial
--              does not stop the others; absent or shorter: enforcing)
-- Reply        one struct.pack("<ddddd", allowed (1/0), limit, remaining, retry_after_us (-1 = never),
--              reset_after_us) per layer, in order (the per-policy scripts' reply). When every layer admits:
--              each as its per-policy check would reply.
--              When any enforcing layer denies: the denying layers' replies as their checks would give
--              them, and each admitted layer's current state with nothing consumed (1, limit, remaining, 0,
--              reset_after) (a cost-0 check's numbers: what the in-memory check reports for a rolled-back layer).
-- Writes       only when every enforcing layer admits: then each admitting layer runs as its per-policy
--              check (mode "0"), which decides again exactly as the first, dry pass (mode "3") did, and
--              keeps the cost; a shadow layer that denied writes nothing. Except, in the first pass, the
-- conversion of a state written under other parameters (include/ratelimit/README.md "Changing a policy at run
--              time") and a sliding log's longer TTL: a layer denied here keeps its usage in the new units
--              and must not expire at the old parameters' TTL.
-- Parts        time write text fixed_window sliding_window_log sliding_window_counter gcra
--              (lua/parts/, in this order, then this file: cmake/RatelimitRedis.cmake assembles the script)

-- Each kind's one-step function, called as f(key, now, cost, mode, p1, p2) with its parameters (a token
-- bucket is GCRA's step with capacity C and refill interval T).
local kinds = {fixed_window = fixed_window, sliding_window_log = sliding_window_log,
               sliding_window_counter = sliding_window_counter, token_bucket = gcra, gcra = gcra}

local n = #KEYS
local shadow = ARGV[5 * n + 1] or ""
local server_now                                             -- one TIME reading for every layer
local steps, nows, costs, params, replies = {}, {}, {}, {}, {}
local all = true
for i = 1, n do
  local a = 5 * i - 5
  local step = kinds[ARGV[a + 1]]
  if not step then return redis.error_reply("ratelimit layered: unknown policy kind " .. tostring(ARGV[a + 1])) end
  local now = ARGV[a + 2]
  if now == "" then
    server_now = server_now or server_time()
    now = server_now
  else
    now = tonumber(now)
  end
  local p1, p2 = tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  steps[i], nows[i], costs[i], params[i] = step, now, tonumber(ARGV[a + 3]), {p1, p2}
  replies[i] = {step(KEYS[i], now, costs[i], "3", p1, p2)}
  if replies[i][1] == 0 and shadow:sub(i, i) ~= "1" then all = false end
end
for i = 1, n do
  local p = params[i]
  if all then
    if costs[i] > 0 and replies[i][1] == 1 then              -- a shadow layer's denial writes nothing
      replies[i] = {steps[i](KEYS[i], nows[i], costs[i], "0", p[1], p[2])}
    end
  elseif replies[i][1] == 1 then                             -- admitted, not kept: its current state
    replies[i] = {steps[i](KEYS[i], nows[i], 0, "3", p[1], p[2])}
  end
  local r = replies[i]
  replies[i] = struct.pack("<ddddd", r[1], r[2], r[3], r[4], r[5])
end
return replies
