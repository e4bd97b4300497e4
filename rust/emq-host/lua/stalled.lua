-- emq STALLED CHECK (SPEC §6), the reference the in-process plan is tested against.
-- KEYS: P active, P pending, P dead. ARGV: P, max_stalled ('' for no limit), batch.
-- Every type is checked before the first write: a script's writes are not undone.
-- Runs after prelude.lua (typ, int, policy, score, zless, push, layout_error, now_ms,
-- WAKE_MAX, TRIM_SLACK, DEAD_MS, DEAD_MAX, DONE_MS, INBOX_KEEP_MS, LEASE_MARK_MS,
-- LEASE_MARK_KEEP_MS).
-- SPEC §13: a row asked to stop (`cancel 1`) is cancelled, not recovered, kept as a
-- done row is (its own `keep`, else the queue's `done_ms`) and listed in `P cancelled`;
-- the ids of rows that die or are cancelled are pushed to each inbox their `wait` lists.
local p, batch = ARGV[1], ARGV[3] -- batch as given: a decimal integer, up to 2^63-1
local max_stalled = ARGV[2] ~= '' and tonumber(ARGV[2]) or nil
local active, pending, dead = KEYS[1], KEYS[2], KEYS[3]
local function layout(what) return layout_error('EMQ.STALLED.CHECK', what) end

local at = typ(active)
if at ~= 'zset' and at ~= 'none' then return layout(active .. ' has the wrong type') end
local now = now_ms()
local pairs_ = redis.call('ZRANGEBYSCORE', active, '-inf', now, 'WITHSCORES', 'LIMIT', 0, batch)
if #pairs_ == 0 then return {{}, {}} end
-- The expired ids, and the seconds their leases ended in, each once (ascending):
-- the lease marks this check sets (SPEC §9; rust/emq-plan/src/protocol/guard.rs).
local expired, marks = {}, {}
for i = 1, #pairs_, 2 do
  expired[#expired + 1] = pairs_[i]
  local s = score(pairs_[i + 1])
  local b = 0
  if s > 0 then b = math.floor(s / LEASE_MARK_MS) end
  if marks[#marks] ~= b then marks[#marks + 1] = b end
end

-- The inboxes a `wait` field lists, each once, in order.
local function inboxes_of(wait)
  local out, seen = {}, {}
  if wait then
    for w in string.gmatch(wait, '[^ ]+') do
      if not seen[w] then seen[w] = true; out[#out + 1] = w end
    end
  end
  return out
end

-- rows: {key, dies, stalls} of the rows dead or recovered; cancelled: {key, own keep};
-- per lane: recovered ids and rows that left active; per inbox: the ids it is told of.
local rows, recovered, died, flat, lanes, by_lane = {}, {}, {}, {}, {}, {}
local cancelled, inboxes, told, checked = {}, {}, {}, {}
local levels, flat_levels = {}, false
for _, id in ipairs(expired) do
  local jk = p .. 'job:' .. id
  local ty = typ(jk)
  if ty == 'hash' then
    local f = redis.call('HMGET', jk, 'lane', 'stalls', 'wait', 'cancel', 'keep', 'priority')
    local lvl = level_of(f[6])
    local stalls = int(f[2]) + 1
    local cancel = f[4] == '1'
    local dies = not cancel and max_stalled ~= nil and stalls > max_stalled
    local waiters = inboxes_of(f[3])
    -- Every listed inbox is typed, told or not (as the plan reads them).
    for _, w in ipairs(waiters) do
      if not checked[w] then checked[w] = true; checked[#checked + 1] = w end
    end
    if cancel then
      cancelled[#cancelled + 1] = {jk, f[5]}
    else
      rows[#rows + 1] = {jk, dies, stalls}
      if dies then died[#died + 1] = id else recovered[#recovered + 1] = id end
    end
    if cancel or dies then
      for _, w in ipairs(waiters) do
        if not told[w] then told[w] = {}; inboxes[#inboxes + 1] = w end
        told[w][#told[w] + 1] = id
      end
    end
    local lane = f[1]
    if lane then
      if not by_lane[lane] then by_lane[lane] = {ids = {}, left = 0, leveled = 0}; lanes[#lanes + 1] = lane end
      local l = by_lane[lane]
      l.left = l.left + 1
      if not dies and not cancel and lvl > 0 then
        level_push(levels, p, lane, lvl, id)
        l.leveled = l.leveled + 1
      elseif not dies and not cancel then
        l.ids[#l.ids + 1] = id
      end
    elseif not dies and not cancel and lvl > 0 then
      level_push(levels, p, nil, lvl, id)
      flat_levels = true
    elseif not dies and not cancel then
      flat[#flat + 1] = id
    end
  elseif ty ~= 'none' then
    return layout(jk .. ' has the wrong type')
  end
end
for _, w in ipairs(checked) do
  local wk = p .. 'inbox:' .. w
  local t = typ(wk)
  if t ~= 'list' and t ~= 'none' then return layout(wk .. ' has the wrong type') end
end
-- Cancelled rows are kept as done rows are: their own keep, else the queue's done_ms.
local done_ms = DONE_MS
if #cancelled > 0 then
  local rk, ck = p .. 'retention', p .. 'cancelled'
  local kt, ct = typ(rk), typ(ck)
  if kt ~= 'hash' and kt ~= 'none' then return layout(rk .. ' has the wrong type') end
  if ct ~= 'zset' and ct ~= 'none' then return layout(ck .. ' has the wrong type') end
  done_ms = policy(redis.call('HMGET', rk, 'done_ms')[1], DONE_MS)
end

local ring, tokens = {}, {}
for _, lane in ipairs(lanes) do
  local ctl, lk, l = p .. 'lanectl:' .. lane, p .. 'lane:' .. lane, by_lane[lane]
  local ct, lt = typ(ctl), typ(lk)
  if (ct ~= 'hash' and ct ~= 'none') or (lt ~= 'list' and lt ~= 'none') then
    return layout(lk .. ' or its control has the wrong type')
  end
  local f = redis.call('HMGET', ctl, 'paused', 'limit', 'active', 'ring',
    'lvl:1', 'lvl:2', 'lvl:3', 'lvl:4', 'lvl:5', 'lvl:6', 'lvl:7', 'lvl:8', 'lvl:9')
  local limit = int(f[2])
  l.active = math.max(0, int(f[3]) - l.left)
  local serve = f[1] ~= '1' and (limit <= 0 or l.active < limit)
  local work = redis.call('LLEN', lk) + #l.ids + l.leveled > 0 or has_levels(f)
  if work and serve and f[4] ~= '1' then
    ring[#ring + 1] = lane; tokens[#tokens + 1] = lane
  end
end
if #flat > 0 or flat_levels then tokens[#tokens + 1] = '' end
local pt, dt, rt, wt = typ(pending), typ(dead), typ(p .. 'ring'), typ(p .. 'wake')
-- pending is typed on every call that selected members (SPEC §5 step 5)
if (pt ~= 'list' and pt ~= 'none') or (#died > 0 and dt ~= 'zset' and dt ~= 'none')
    or (#ring > 0 and rt ~= 'list' and rt ~= 'none') or (wt ~= 'list' and wt ~= 'none') then
  return layout('pending, dead, ring or wake has the wrong type')
end

-- The trim of `dead` (retention), read before the adds: with c its size and head
-- its first d + TRIM_SLACK entries, merged = head and (now, id) for each new dead id,
-- in zset order; the first k of merged leave, k = min(d + TRIM_SLACK, max(count_k, time_k)).
local trimmed = {}
if #died > 0 then
  local rk = p .. 'retention'
  local kt = typ(rk)
  if kt ~= 'hash' and kt ~= 'none' then return layout(rk .. ' has the wrong type') end
  local f = redis.call('HMGET', rk, 'dead_ms', 'dead_max')
  local dead_ms, dead_max = policy(f[1], DEAD_MS), policy(f[2], DEAD_MAX)
  local d = #died
  local c = redis.call('ZCARD', dead)
  local head = redis.call('ZRANGE', dead, 0, d + TRIM_SLACK - 1, 'WITHSCORES')
  local merged = {}
  for i = 1, #head, 2 do merged[#merged + 1] = {score(head[i + 1]), head[i]} end
  for _, id in ipairs(died) do merged[#merged + 1] = {now, id} end
  table.sort(merged, zless)
  local count_k, time_k = 0, 0
  if dead_max >= 0 then count_k = math.max(0, c + d - dead_max) end
  if dead_ms >= 0 then
    local cut = now - dead_ms
    while time_k < #merged and merged[time_k + 1][1] <= cut do time_k = time_k + 1 end
  end
  for i = 1, math.min(d + TRIM_SLACK, math.max(count_k, time_k), #merged) do trimmed[i] = merged[i][2] end
end

push('ZREM', active, expired)
for _, b in ipairs(marks) do
  redis.call('SET', p .. 'leases:' .. string.format('%d', b), '1', 'PX', LEASE_MARK_KEEP_MS)
end
for _, id in ipairs(died) do redis.call('ZADD', dead, string.format('%d', now), id) end
for _, r in ipairs(rows) do
  if r[2] then
    redis.call('HSET', r[1], 'state', 'dead', 'stalls', string.format('%d', r[3]), 'error', 'stalled')
    -- An earlier attempt's error type and traceback are not this ending's.
    redis.call('HDEL', r[1], 'error_type', 'traceback')
  else
    redis.call('HSET', r[1], 'state', 'pending', 'stalls', string.format('%d', r[3]))
  end
  redis.call('HDEL', r[1], 'token', 'lease')
end
-- The cancelled rows (rust/emq-plan/src/jobs/ending.rs, ended_writes).
local listed, longest = {}, nil
for _, c in ipairs(cancelled) do
  local keep = policy(c[2], done_ms)
  if keep == 0 then
    redis.call('DEL', c[1])
  else
    redis.call('HSET', c[1], 'state', 'cancelled', 'finished', string.format('%d', now), 'error', 'cancelled')
    redis.call('HDEL', c[1], 'token', 'lease')
    if keep > 0 then
      redis.call('PEXPIREAT', c[1], string.format('%d', now + keep))
      if longest == nil or keep > longest then longest = keep end
    end
    listed[#listed + 1] = string.sub(c[1], #p + 5)
  end
end
for _, id in ipairs(listed) do redis.call('ZADD', p .. 'cancelled', string.format('%d', now), id) end
if longest ~= nil then redis.call('ZREMRANGEBYSCORE', p .. 'cancelled', '-inf', '(' .. string.format('%d', now - longest)) end
push('RPUSH', pending, flat)
for _, lane in ipairs(lanes) do
  local l = by_lane[lane]
  push('RPUSH', p .. 'lane:' .. lane, l.ids)
  redis.call('HSET', p .. 'lanectl:' .. lane, 'active', string.format('%d', l.active))
end
level_writes(levels)
for _, lane in ipairs(ring) do redis.call('HSET', p .. 'lanectl:' .. lane, 'ring', '1') end
push('RPUSH', p .. 'ring', ring)
push('RPUSH', p .. 'wake', tokens)
redis.call('LTRIM', p .. 'wake', -WAKE_MAX, -1)
for _, w in ipairs(inboxes) do
  push('RPUSH', p .. 'inbox:' .. w, told[w])
  redis.call('PEXPIRE', p .. 'inbox:' .. w, INBOX_KEEP_MS)
end
if #trimmed > 0 then
  push('ZREM', dead, trimmed)
  local rows_gone = {}
  for i, id in ipairs(trimmed) do rows_gone[i] = p .. 'job:' .. id end
  for i = 1, #rows_gone, 1000 do redis.call('DEL', unpack(rows_gone, i, math.min(i + 999, #rows_gone))) end
end
-- The per-minute counters (rust/emq-plan/src/jobs/counters.rs): one HINCRBY per kind
-- present, in the plan's order, then the minute's expiry of 25 hours.
local sk, counted = p .. 'stats:' .. string.format('%d', math.floor(now / 60000)), false
for _, c in ipairs({{'dead', #died}, {'cancelled', #cancelled}, {'recovered', #recovered}}) do
  if c[2] > 0 then redis.call('HINCRBY', sk, c[1], c[2]); counted = true end
end
if counted then redis.call('PEXPIRE', sk, 90000000) end
return {recovered, died}
