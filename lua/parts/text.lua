-- part: text. Exact integer text for a command argument (Redis would print a large number in exponent form).
local function int(x) return string.format("%d", x) end
