"""CLAIM and COMPLETE as Lua scripts: the comparison for benches/claims.py.

The same semantics as emq's in-process plans (rust/emq-plan/src/jobs/claim.rs and
settle.rs, SPEC §7), run server-side in one EVALSHA each:

- claim: flat ids first from the head of `P pending`; then lanes round-robin from
  the head of `P ring` (at most one id per lane per turn, only lanes that can be
  served; a lane found empty or no longer servable leaves the ring with
  `ring = 0`; the ring is rotated past each lane served). It reads at most
  `2 * slots + 16` ring entries and wraps around the ring only when it read all of
  it, and each lane's head as far as the slots left after the flat ids (a lane
  with more ids than that ends the claim), as the plan does. Each id taken gets
  `state = active`, `attempts + 1`, `lease`, a fresh `token` (made by the caller,
  as the Rust host makes them) and `claimed`; it joins `P active` at
  `now + lease`; its lane's `active` grows. Ids whose row is not `pending`
  (ghosts included) are dropped: in `pending` they use up their slot, in a lane
  they take the lane's turn but neither a slot nor the lane's limit; an id listed
  twice is taken once. If ready work is left, one wake token `""` is appended to
  `P wake` (trimmed to 64).
- complete: only while the row is `active` with that token: sets the lease mark
  of the second its lease ended in (SPEC §9), leaves `P active`, and is done as
  the retention says (SPEC §12: `state = done`, `finished`, `token` and `lease`
  removed, listed in `P done`, expiring `done_ms` after; or deleted); a lane job
  decrements its lane's `active`, then offer(L); it counts itself in the
  minute's counters (`P stats:<minute>`, SPEC §17).

`python benches/claims.py --check` runs one sequence (ghosts, a paused and a
limited lane) with emq, the module and these scripts, and compares what they
leave: the scripts do the plans' work, no less.

Both scripts make every read that can fail on a wrong type before their first
write (a script's writes are not undone), like the plans check every type before
`EXEC`. Benches only: this is not part of emq.
"""

from __future__ import annotations

import hashlib
import os

from emq import Job, _core

CLAIM_LUA = (
    f"local WAKE_MAX = {_core.WAKE_MAX}\n"
    + r"""
-- KEYS: P pending, P ring, P active, P wake. ARGV: P, n, lease_ms, token 1 .. token n
local p, n, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local pending, ring, active, wake = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local function int(v)
  if v and string.match(v, '^%-?%d+$') and #string.gsub(v, '^%-', '') <= 18 then return tonumber(v) end
  return 0
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local deadline = now + lease

-- Reads: every one that can fail on a wrong type comes before the first write.
redis.call('LLEN', wake)
redis.call('ZCARD', active)
local function row(id)
  -- A row a claim takes says it is `pending`: ghosts (no row) and rows in any
  -- other state are dropped.
  local f = redis.call('HMGET', p .. 'job:' .. id, 'state', 'attempts', 'max_attempts', 'data')
  if f[1] ~= 'pending' then return false end
  return f
end
local flat = redis.call('LRANGE', pending, 0, n - 1)
local flat_rows = {}
for i, id in ipairs(flat) do flat_rows[i] = row(id) end

local slots = n - #flat
-- Every lane's head is read as far as the claim's slots after the flat ids.
local head_len = slots
local lanes, visits = {}, {}
if slots > 0 then
  local rlen = redis.call('LLEN', ring)
  local names = rlen > 0 and redis.call('LRANGE', ring, 0, 2 * slots + 16 - 1) or {}
  local whole = #names == rlen
  local order, head, tail = {}, 1, #names
  for i = 1, #names do order[i] = i end
  while slots > 0 and head <= tail do
    local i = order[head]
    head = head + 1
    local l = lanes[i]
    if not l then
      local name = names[i]
      local ctl, lk = p .. 'lanectl:' .. name, p .. 'lane:' .. name
      local f = redis.call('HMGET', ctl, 'paused', 'limit', 'active', 'ring')
      l = { name = name, ctl = ctl, key = lk, paused = f[1] == '1', limit = int(f[2]),
            sim = int(f[3]), len = redis.call('LLEN', lk),
            head = redis.call('LRANGE', lk, 0, head_len - 1), taken = 0, claimed = 0, dropped = false }
      lanes[i] = l
    end
    -- More ids than it read: the rest is the next claim's.
    if l.taken == #l.head and l.len > l.taken then break end
    if l.len <= l.taken or l.paused or (l.limit > 0 and l.sim >= l.limit) then
      visits[#visits + 1] = { i, false }
      l.dropped = true
    else
      l.taken = l.taken + 1
      local id = l.head[l.taken]
      local f = row(id)
      -- A ghost (or a row not pending) takes the lane's turn, but neither a
      -- slot nor the limit.
      if f then
        l.sim = l.sim + 1
        slots = slots - 1
      end
      visits[#visits + 1] = { i, id, f }
      if whole then tail = tail + 1; order[tail] = i end
    end
  end
end

-- Writes.
local out, zadd, taken = {}, {}, {}
local function claimed(id, f, lane)
  local k = #out + 1
  local attempts = int(f[2]) + 1
  local token = ARGV[3 + k]
  redis.call('HSET', p .. 'job:' .. id, 'state', 'active', 'attempts', attempts,
    'lease', deadline, 'token', token, 'claimed', now)
  zadd[#zadd + 1] = deadline
  zadd[#zadd + 1] = id
  taken[id] = true
  out[k] = { id, f[4] or '', lane or false, attempts, int(f[3]), token, deadline }
end
if #flat > 0 then
  redis.call('LTRIM', pending, #flat, -1)
  for i, id in ipairs(flat) do
    -- An id listed twice is taken once.
    if flat_rows[i] and not taken[id] then claimed(id, flat_rows[i], nil) end
  end
end
for _, v in ipairs(visits) do
  local l = lanes[v[1]]
  if v[2] then
    redis.call('LPOP', l.key)
    redis.call('LMOVE', ring, ring, 'LEFT', 'RIGHT')
    if v[3] and not taken[v[2]] then
      claimed(v[2], v[3], l.name)
      l.claimed = l.claimed + 1
    end
  else
    redis.call('LPOP', ring)
  end
end
for _, l in pairs(lanes) do
  if l.claimed > 0 then redis.call('HINCRBY', l.ctl, 'active', l.claimed) end
  if l.dropped then redis.call('HSET', l.ctl, 'ring', '0') end
end
if #zadd > 0 then redis.call('ZADD', active, unpack(zadd)) end
if redis.call('LLEN', pending) > 0 or redis.call('LLEN', ring) > 0 then
  redis.call('RPUSH', wake, '')
  redis.call('LTRIM', wake, -WAKE_MAX, -1)
end
return out
"""
)

COMPLETE_LUA = (
    f"local WAKE_MAX = {_core.WAKE_MAX}\n"
    f"local DONE_MS = {dict(_core.RETENTION_DEFAULTS)['done_ms']}\n"
    f"local LEASE_MARK_KEEP_MS = {_core.LEASE_MARK_KEEP_MS}\n"
    + r"""
-- KEYS: P active, P ring, P wake. ARGV: P, id, token
local p, id, token = ARGV[1], ARGV[2], ARGV[3]
local active, ring, wake = KEYS[1], KEYS[2], KEYS[3]
local jk = p .. 'job:' .. id
local f = redis.call('HMGET', jk, 'state', 'token', 'lane', 'lease')
if f[1] ~= 'active' or f[2] ~= token then return 0 end
local function int(v)
  if v and string.match(v, '^%-?%d+$') and #string.gsub(v, '^%-', '') <= 18 then return tonumber(v) end
  return nil
end
-- Reads (type checks included) before the first write.
redis.call('ZCARD', active)
local lane, ctl, c, len = f[3], nil, nil, 0
if lane then
  ctl = p .. 'lanectl:' .. lane
  c = redis.call('HMGET', ctl, 'paused', 'limit', 'active', 'ring')
  len = redis.call('LLEN', p .. 'lane:' .. lane)
  redis.call('LLEN', ring)
  redis.call('LLEN', wake)
end
-- The retention of done rows (SPEC §12): 0 deletes the row, -1 keeps it for
-- ever, else it expires that many ms after it finished; `P done` lists it.
local done_ms = int(redis.call('HMGET', p .. 'retention', 'done_ms')[1])
if not done_ms or done_ms < -1 then done_ms = DONE_MS end
if done_ms ~= 0 then redis.call('ZCARD', p .. 'done') end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
-- The lease mark of the second the lease ended in (the guard's, SPEC §9).
local lease = int(f[4])
if lease then
  redis.call('SET', p .. 'leases:' .. (lease > 0 and math.floor(lease / 1000) or 0), '1', 'PX', LEASE_MARK_KEEP_MS)
end
redis.call('ZREM', active, id)
if done_ms == 0 then
  redis.call('DEL', jk)
else
  redis.call('HSET', jk, 'state', 'done', 'finished', now)
  redis.call('HDEL', jk, 'token', 'lease')
  if done_ms > 0 then redis.call('PEXPIREAT', jk, now + done_ms) end
end
if done_ms ~= 0 then
  redis.call('ZADD', p .. 'done', now, id)
  if done_ms > 0 then redis.call('ZREMRANGEBYSCORE', p .. 'done', '-inf', '(' .. (now - done_ms)) end
end
if lane then
  local a = math.max((int(c[3]) or 0) - 1, 0)
  redis.call('HSET', ctl, 'active', a)
  local limit = int(c[2]) or 0
  -- offer(L)
  if len > 0 and c[1] ~= '1' and (limit <= 0 or a < limit) and c[4] ~= '1' then
    redis.call('HSET', ctl, 'ring', '1')
    redis.call('RPUSH', ring, lane)
    redis.call('RPUSH', wake, lane)
    redis.call('LTRIM', wake, -WAKE_MAX, -1)
  end
end
-- The per-minute counters (SPEC §17), as every settle of emq writes them.
local sk = p .. 'stats:' .. string.format('%d', math.floor(now / 60000))
redis.call('HINCRBY', sk, 'completed', 1)
redis.call('PEXPIRE', sk, 90000000)
return 1
"""
)

CLAIM_SHA = hashlib.sha1(CLAIM_LUA.encode()).hexdigest()
COMPLETE_SHA = hashlib.sha1(COMPLETE_LUA.encode()).hexdigest()


class LuaQueue:
    """`claim` and `complete` of one queue by EVALSHA, on an emq client (the same
    connection code as emq's own calls: only the claim and complete differ)."""

    def __init__(self, client, name: str):
        self.client = client
        self.name = name
        self.prefix = "emq:{" + name + "}:"
        p = self.prefix
        self._claim_keys = (p + "pending", p + "ring", p + "active", p + "wake")
        self._complete_keys = (p + "active", p + "ring", p + "wake")
        self.load()

    def load(self) -> None:
        for text, sha in ((CLAIM_LUA, CLAIM_SHA), (COMPLETE_LUA, COMPLETE_SHA)):
            got = self.client.command("SCRIPT", "LOAD", text)
            assert got.decode() == sha, "unexpected script sha"

    def claim(self, n: int = 1, *, lease: float = 30) -> list[Job]:
        """As `emq.Queue.claim` takes it: `lease` in seconds, kept in ms."""
        lease_ms = max(1, round(lease * 1000))
        hexed = os.urandom(16 * n).hex()
        tokens = [hexed[32 * i : 32 * i + 32] for i in range(n)]
        rows = self.client.command("EVALSHA", CLAIM_SHA, 4, *self._claim_keys, self.prefix, n, lease_ms, *tokens)
        return [
            Job(
                id=i.decode(),
                data=d,
                lane=ln.decode() if ln is not None else None,
                attempts=a,
                max_attempts=m,
                token=t.decode(),
                lease_deadline_ms=dl,
                state="active",
            )
            for (i, d, ln, a, m, t, dl) in rows
        ]

    def complete(self, job: Job) -> bool:
        return self.client.command("EVALSHA", COMPLETE_SHA, 3, *self._complete_keys, self.prefix, job.id, job.token) == 1
