-- part: write. The TTL of a key that is full again after reset_us: ceil(reset_us / 1 ms) + 1000 ms of
-- slack.
-- `%` (floored modulo, a VM operation, unlike the C function math.fmod) is exact for integers with
-- |a| + b < 2^53, which every use in the policy parts keeps (times below 2^52, durations below 2^52).
local function ttl_ms(reset_us)
  local r = reset_us % 1000
  return (reset_us - r) / 1000 + (r > 0 and 1 or 0) + 1000
end
