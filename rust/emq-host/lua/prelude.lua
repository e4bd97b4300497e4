-- emq's Lua prelude: the helpers both reference scripts share. The host sends
-- each script as this prelude followed by the script's own text.
local function layout_error(verb, what) return redis.error_reply('EMQLAYOUT ' .. verb .. ': layout: ' .. what) end
local function typ(k) return redis.call('TYPE', k).ok end
-- A stored integer: an optional '-' and 1 to 15 digits (exact in a double, even
-- after + 1); anything else counts as absent. Written back with '%d', never '%.14g'.
local function int(v)
  if v and string.match(v, '^%-?%d+$') and #string.gsub(v, '^%-', '') <= 15 then return tonumber(v) end
  return 0
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
