-- The reference GCRA script of the design documents, for comparison only (not used by the library):
-- GET the TAT, compute, then SET it and PEXPIRE it in two more calls.
-- KEYS[1] tat key; ARGV[1] now (us), or "" to read the server's TIME (the same time sources as the
-- library's scripts); ARGV[2] emission interval T (us); ARGV[3] tolerance tau (us)
local now = tonumber(ARGV[1])
if ARGV[1] == "" then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local interval = tonumber(ARGV[2])
local tolerance = tonumber(ARGV[3])
local tat = tonumber(redis.call("GET", KEYS[1])) or now
if tat < now then tat = now end
local new_tat = tat + interval
if new_tat - now > tolerance then
  return {0, math.floor((new_tat - now - tolerance))}
end
redis.call("SET", KEYS[1], new_tat)
redis.call("PEXPIRE", KEYS[1], math.ceil((new_tat - now) / 1000))
return {1, 0}
