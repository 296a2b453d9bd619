-- ratelimit: give back a permit's units, one atomic step (README "Concurrency limits", Redis).
--
-- KEYS[1]  the permits' sorted set (see parts/permits.lua)
-- ARGV[1]  units of the permit: integer >= 1
-- ARGV[2]  permit id
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
return {removed}
