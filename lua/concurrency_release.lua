-- ratelimit: give back a permit's units, one atomic step (include/ratelimit/concurrency/README.md "Concurrency limits",
-- Redis).
--
-- KEYS[1]  the permits' sorted set (see parts/permits.lua)
-- KEYS[2]  the given-up ids' sorted set, in KEYS[1]'s slot: member the id, score when it may go (as a unit's)
-- ARGV[1]  units of the permit: integer >= 1
-- ARGV[2]  permit id
-- ARGV[3]  "0"; or, for an acquire given up after it was sent (it may still run), the expiry in microseconds:
--          the id is then also kept in KEYS[2] that long, so that acquire takes nothing if it runs later
-- Reply    {removed}: units of this permit that were still there (0 after expiry, or a second release).
--          Only members named by the id are removed: a release after expiry never frees another's units.
-- Time     the server's TIME.
-- Parts time permits
local key = KEYS[1]
local units = tonumber(ARGV[1])
local id = ARGV[2]
local now = server_time()
local removed = 0
for i = 1, units do
  removed = removed + redis.call("ZREM", key, id .. ":" .. i)
end
permits_prune(key, now)
permits_keep(key, now)
if ARGV[3] ~= "0" then
  redis.call("ZADD", KEYS[2], now + tonumber(ARGV[3]), id)
  permits_prune(KEYS[2], now)
  permits_keep(KEYS[2], now)
end
return {removed}
