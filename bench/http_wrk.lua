-- wrk script for examples/http_server: requests come from many client IPs (X-Forwarded-For, believed
-- because the server trusts 127.0.0.1). CLIENTS=N draws from N addresses (steady state: keys exist);
-- CLIENTS unset or 0: every request from a new random address (worst case: each creates its keys).
local clients = tonumber(os.getenv("CLIENTS") or "0")
math.randomseed(os.time())
request = function()
  local n = clients > 0 and math.random(0, clients - 1) or math.random(0, 16777215)
  local ip = string.format("10.%d.%d.%d", math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
  return wrk.format("GET", "/search?q=x", {["X-Forwarded-For"] = ip})
end
