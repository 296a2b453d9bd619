-- part: time. The request's time in integer microseconds: a client time as given, or "" for the server's TIME.
local function clock(arg)
  if arg ~= "" then return tonumber(arg) end
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
