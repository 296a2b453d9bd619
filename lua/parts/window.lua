-- part: window. Exact integer helpers of the window policies (every value an integer below 2^53).
-- Exact integer formatting (Redis would print large numbers in exponent form).
local function int(x) return string.format("%d", x) end
-- TTL of a key that is full again after reset_us: ceil(reset_us / 1 ms) + 1000 ms of slack.
local function ttl_ms(reset_us)
  local r = math.fmod(reset_us, 1000)
  return (reset_us - r) / 1000 + (r > 0 and 1 or 0) + 1000
end
-- Start of the epoch-aligned window holding t; fmod is exact, unlike floor(t / w).
local function window_start(t, w)
  local r = math.fmod(t, w)
  if r < 0 then r = r + w end
  return t - r
end
-- floor(a / b) for integers a >= 0, b >= 1 below 2^53, exactly.
local function idiv(a, b) return (a - math.fmod(a, b)) / b end
