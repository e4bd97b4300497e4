-- emq's Lua prelude: the helpers both reference scripts share. The host sends
-- each script as its constants (WAKE_MAX, TRIM_SLACK, DEAD_MS, DEAD_MAX: `local`
-- lines generated from the Rust constants, src/sweeps.rs), this prelude, and the
-- script's own text.
local function layout_error(verb, what) return redis.error_reply('EMQLAYOUT ' .. verb .. ': layout: ' .. what) end
local function typ(k) return redis.call('TYPE', k).ok end
-- A stored integer: an optional '-' and 1 to 15 digits (exact in a double, even
-- after + 1); anything else counts as absent. Written back with '%d', never '%.14g'.
local function int(v)
  if v and string.match(v, '^%-?%d+$') and #string.gsub(v, '^%-', '') <= 15 then return tonumber(v) end
  return 0
end
-- A retention field (rust/emq-plan/src/jobs/retention.rs): an integer as int() reads
-- it, -1 or more; else the default.
local function policy(v, default)
  if v and string.match(v, '^%-?%d+$') and #string.gsub(v, '^%-', '') <= 15 and tonumber(v) >= -1 then
    return tonumber(v)
  end
  return default
end
-- A score as ZRANGE ... WITHSCORES gives it (Lua's tonumber knows no 'inf').
local function score(s)
  if s == 'inf' or s == '+inf' then return math.huge elseif s == '-inf' then return -math.huge end
  return tonumber(s)
end
-- Redis's zset order of {score, member} pairs: by score, then member bytes
-- (not Lua's '<' on strings, which follows the server's locale).
local function zless(a, b)
  if a[1] ~= b[1] then return a[1] < b[1] end
  local x, y = a[2], b[2]
  for i = 1, math.min(#x, #y) do
    local bx, by = string.byte(x, i), string.byte(y, i)
    if bx ~= by then return bx < by end
  end
  return #x < #y
end
local function push(cmd, key, items) -- one call per 1000 items: unpack has a stack limit
  for i = 1, #items, 1000 do
    redis.call(cmd, key, unpack(items, i, math.min(i + 999, #items)))
  end
end
-- The clock, read once (SPEC §4).
local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end
-- P promotions at or above this says the queue uses priorities (SPEC §15).
local LEVELS_IN_USE = 1099511627776
-- A row's priority level (SPEC §15): its `priority` field, one digit; else 0.
local function level_of(v)
  if v and string.match(v, '^%d$') then return tonumber(v) end
  return 0
end
-- Ready ids of priority 1 to 9, grouped by their level's list (P pending:<p>,
-- P plane:<p>:L) in order of first id; level_writes pushes each group and marks
-- its level in the control hash (lvl:<p> of P flatctl or P lanectl:L).
local function level_push(groups, p, lane, lvl, id)
  local key = lane and (p .. 'plane:' .. lvl .. ':' .. lane) or (p .. 'pending:' .. lvl)
  local g = groups[key]
  if not g then
    g = {ctl = lane and (p .. 'lanectl:' .. lane) or (p .. 'flatctl'), field = 'lvl:' .. lvl, ids = {}}
    groups[key] = g
    groups[#groups + 1] = key
  end
  g.ids[#g.ids + 1] = id
end
local function level_writes(groups)
  for _, key in ipairs(groups) do
    local g = groups[key]
    push('RPUSH', key, g.ids)
    redis.call('HSET', g.ctl, g.field, '1')
  end
end
-- Whether a lane's control says a level 1 to 9 holds work (fields 5 to 13 of its HMGET).
local function has_levels(f)
  for i = 5, 13 do if f[i] then return true end end
  return false
end
