-- ratelimit: take units of a concurrency limit, one atomic step (include/ratelimit/concurrency/README.md "Concurrency
-- limits", Redis).
--
-- KEYS[1]  the permits' sorted set (see parts/permits.lua)
-- KEYS[2]  the given-up ids' sorted set (see concurrency_release.lua), in KEYS[1]'s slot
-- ARGV[1]  permits: units in flight at most, integer >= 1
-- ARGV[2]  units to take: integer in [1, permits]
-- ARGV[3]  permit id: unique per acquisition (random, 128 bits), so a release frees only its own units
-- ARGV[4]  expiry: microseconds, integer >= 1
-- Reply    {1, in_flight, 0} when taken; {0, in_flight, wait_us} when not: wait_us is how long until the
--          earliest unit held expires (an upper bound on the wait when nobody releases); {0, in_flight, 0}
--          when the id was given up (its caller stopped waiting and released it before this ran)
-- Writes   expired units are dropped first; taken units are added with score now + expiry; PEXPIRE.
-- Time     the server's TIME: processes whose clocks differ share one time line.
-- Parts time permits
local key = KEYS[1]
local permits = tonumber(ARGV[1])
local units = tonumber(ARGV[2])
local id = ARGV[3]
local now = server_time()
permits_prune(key, now)
local used = redis.call("ZCARD", key)
if redis.call("ZSCORE", KEYS[2], id) ~= false then return {0, used, 0} end
if used + units > permits then
  local first = redis.call("ZRANGE", key, 0, 0, "WITHSCORES")
  local wait = 0
  if first[2] ~= nil then wait = tonumber(first[2]) - now end
  return {0, used, wait}
end
local expires = now + tonumber(ARGV[4])
for i = 1, units do
  redis.call("ZADD", key, expires, id .. ":" .. i)
end
permits_keep(key, now)
return {1, used + units, 0}
