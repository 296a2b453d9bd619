-- ratelimit: extend the expiry of a held permit, one atomic step (include/ratelimit/concurrency/README.md "Concurrency
-- limits", Redis).
--
-- KEYS[1]  the permits' sorted set (see parts/permits.lua)
-- ARGV[1]  units of the permit: integer >= 1
-- ARGV[2]  permit id
-- ARGV[3]  expiry: microseconds from now, integer >= 1
-- Reply    {1} when every unit was still held (now expiring at now + expiry); {0} when any had expired
--          (or was never there): the permit is lost, and its remaining units are removed too, so a lost
--          permit never comes back to count against others
-- Time     the server's TIME.
-- Parts time permits
local key = KEYS[1]
local units = tonumber(ARGV[1])
local id = ARGV[2]
local now = server_time()
permits_prune(key, now)
for i = 1, units do
  if redis.call("ZSCORE", key, id .. ":" .. i) == false then
    for j = 1, units do
      redis.call("ZREM", key, id .. ":" .. j)
    end
    permits_keep(key, now)
    return {0}
  end
end
local expires = now + tonumber(ARGV[3])
for i = 1, units do
  redis.call("ZADD", key, "XX", expires, id .. ":" .. i)
end
permits_keep(key, now)
return {1}
