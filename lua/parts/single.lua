-- part: single. The one-key script of a window policy (ARGV[3]: "0" check, "1" peek, "2" refund) from
-- the policy part's functions:
--   load(key, now, L, W) -> state s (s.L is the limit)
--   decide(s, n) -> allowed, remaining, retry_after_us (-1 = never), reset_after_us; writes nothing
--   commit(key, s, n, reset_after_us) keeps an admitted cost n >= 1
--   refund(key, s, n) gives back up to n units (SPEC addition "Refunds") and updates s
local function single(load, decide, commit, refund)
  local s = load(KEYS[1], clock(ARGV[1]), tonumber(ARGV[4]), tonumber(ARGV[5]))
  local cost = tonumber(ARGV[2])
  if ARGV[3] == "2" then
    refund(KEYS[1], s, cost)
    local _, remaining, _, reset = decide(s, 0)
    return {1, s.L, remaining, 0, reset}
  end
  if ARGV[3] == "1" then                                     -- cost 1's allowed/retry, cost 0's numbers
    local allowed, _, retry = decide(s, 1)
    local _, remaining, _, reset = decide(s, 0)
    return {allowed and 1 or 0, s.L, remaining, retry, reset}
  end
  local allowed, remaining, retry, reset = decide(s, cost)
  if allowed and cost > 0 then commit(KEYS[1], s, cost, reset) end
  return {allowed and 1 or 0, s.L, remaining, retry, reset}
end
