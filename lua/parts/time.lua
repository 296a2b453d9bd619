-- part: time. The server's TIME in integer microseconds; a main reads it only when ARGV gives no client
-- time (""), so a client-time call makes no TIME call.
local function server_time()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
