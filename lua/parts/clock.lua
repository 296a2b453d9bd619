-- part: clock (after time). The request's time: a client time as given (integer microseconds in text), or
-- "" for the server's TIME.
local function clock(arg)
  if arg ~= "" then return tonumber(arg) end
  return server_time()
end
