-- part: window (the fixed-window lease script's). Start of the epoch-aligned window of width w holding t;
-- fmod is exact, unlike floor(t / w).
local function window_start(t, w)
  local r = math.fmod(t, w)
  if r < 0 then r = r + w end
  return t - r
end
