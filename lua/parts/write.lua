-- part: write. Exact integer formatting (Redis would print large numbers in exponent form), and the TTL
-- of a key that is full again after reset_us: ceil(reset_us / 1 ms) + 1000 ms of slack.
local function int(x) return string.format("%d", x) end
local function ttl_ms(reset_us)
  local r = math.fmod(reset_us, 1000)
  return (reset_us - r) / 1000 + (r > 0 and 1 or 0) + 1000
end
