-- part: time. The server's TIME in integer microseconds; a main reads it only when ARGV gives no client
-- time (""), so a client-time call makes no TIME call.
local function server_time()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- The request's time: a client time as given (integer microseconds in text), or "" for the server's TIME.
local function clock(arg)
  if arg ~= "" then return tonumber(arg) end
  return server_time()
end
