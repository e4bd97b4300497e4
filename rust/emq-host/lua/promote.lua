-- emq PROMOTE (SPEC §5), the reference the in-process plan is tested against.
-- KEYS: P schedule, P pending. ARGV: P, batch (checked by the caller).
-- Every type is checked before the first write: a script's writes are not undone.
-- Runs after prelude.lua (typ, int, push, layout_error, now_ms, WAKE_MAX).
local p, batch = ARGV[1], ARGV[2] -- batch as given: a decimal integer, up to 2^63-1
local schedule, pending = KEYS[1], KEYS[2]
local function layout(what) return layout_error('EMQ.PROMOTE', what) end

local st = typ(schedule)
if st ~= 'zset' and st ~= 'none' then return layout(schedule .. ' has the wrong type') end
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', schedule, '-inf', now, 'LIMIT', 0, batch)
if #due == 0 then return 0 end

-- Rows' priority is read only where P promotions says the queue uses them (SPEC §15).
local promotions = p .. 'promotions'
local uses_levels = typ(promotions) == 'string' and (tonumber(redis.call('GET', promotions)) or 0) >= LEVELS_IN_USE
local live, flat, lanes, by_lane, levels, flat_levels = {}, {}, {}, {}, {}, false
for _, id in ipairs(due) do
  local jk = p .. 'job:' .. id
  local ty = typ(jk)
  if ty == 'hash' then
    live[#live + 1] = jk
    local lane, lvl
    if uses_levels then
      local f = redis.call('HMGET', jk, 'lane', 'priority')
      lane, lvl = f[1], level_of(f[2])
    else
      lane, lvl = redis.call('HGET', jk, 'lane'), 0
    end
    if lane and not by_lane[lane] then by_lane[lane] = {}; lanes[#lanes + 1] = lane end
    if lvl > 0 then
      level_push(levels, p, lane, lvl, id)
      if not lane then flat_levels = true end
    elseif lane then
      local ids = by_lane[lane]
      ids[#ids + 1] = id
    else
      flat[#flat + 1] = id
    end
  elseif ty ~= 'none' then
    return layout(jk .. ' has the wrong type')
  end
end

local ring, tokens = {}, {}
for _, lane in ipairs(lanes) do
  local ctl, lk = p .. 'lanectl:' .. lane, p .. 'lane:' .. lane
  local ct, lt = typ(ctl), typ(lk)
  if (ct ~= 'hash' and ct ~= 'none') or (lt ~= 'list' and lt ~= 'none') then
    return layout(lk .. ' or its control has the wrong type')
  end
  local f = redis.call('HMGET', ctl, 'paused', 'limit', 'active', 'ring')
  local limit, active = int(f[2]), int(f[3])
  local serve = f[1] ~= '1' and (limit <= 0 or active < limit)
  if serve and f[4] ~= '1' then ring[#ring + 1] = lane; tokens[#tokens + 1] = lane end
end
if #flat > 0 or flat_levels then tokens[#tokens + 1] = '' end
local pt, rt, wt = typ(pending), typ(p .. 'ring'), typ(p .. 'wake')
-- pending is typed on every call that selected members (SPEC §5 step 5)
if (pt ~= 'list' and pt ~= 'none') or (#ring > 0 and rt ~= 'list' and rt ~= 'none')
    or (wt ~= 'list' and wt ~= 'none') then
  return layout('pending, ring or wake has the wrong type')
end

push('ZREM', schedule, due)
push('RPUSH', pending, flat)
for _, lane in ipairs(lanes) do push('RPUSH', p .. 'lane:' .. lane, by_lane[lane]) end
level_writes(levels)
for _, jk in ipairs(live) do redis.call('HSET', jk, 'state', 'pending') end
for _, lane in ipairs(ring) do redis.call('HSET', p .. 'lanectl:' .. lane, 'ring', '1') end
push('RPUSH', p .. 'ring', ring)
push('RPUSH', p .. 'wake', tokens)
redis.call('LTRIM', p .. 'wake', -WAKE_MAX, -1)
-- every promote that takes members counts itself: in-process promoters watch this
-- key, and a script's promote changes the rows they selected (SPEC §9)
redis.call('INCR', p .. 'promotions')
return #due
