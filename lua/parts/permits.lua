-- part: permits. A concurrency limit's sorted set: member "<permit id>:<unit>" (one per unit held), score
-- the unit's expiry in integer microseconds of server time. A unit whose expiry passed no longer counts.
local function permits_prune(key, now)
  redis.call("ZREMRANGEBYSCORE", key, "-inf", now)
end
-- Every write keeps a TTL: the set lives as long as its latest expiry (+1 s), then goes by itself.
local function permits_keep(key, now)
  local last = redis.call("ZRANGE", key, -1, -1, "WITHSCORES")
  if last[2] == nil then
    redis.call("DEL", key)
    return
  end
  redis.call("PEXPIRE", key, math.floor((tonumber(last[2]) - now) / 1000) + 1000)
end
