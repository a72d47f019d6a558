"""The Redis store's Lua scripts: every write that checks something is one of them.

A script runs atomically across replicas, so the snapshot, its events, its indexes and the
outbox or ledger rows it touches change together or not at all. Key and argument lists are
documented above each script; `stores.redis` builds them.
"""

from __future__ import annotations

from a2a_handoff.stores.versions import Migration

LAYOUT = "2"
"""The key layout this code writes; `MIGRATE` brings a store of layout 1 to it."""

LAYOUTS = (
    Migration(1, "tasks, their events and indexes, the outbox and the ledger", "breaking"),
    # Layout 1's code reads pending handoffs from a set this step replaces.
    Migration(2, "pending handoffs by creation, the ledger by context", "breaking"),
)
"""The key layouts, named and of their kind (`stores.versions`)."""

# KEYS: task, events, dedupe|"", i:all, i:o, i:d|"", i:c, i:s, outbox|"", ob:ids, ob:pend,
#       rcv|"", ob:c:<context>|"", rcv:c:<context>|""
# ARGV: id owner delegate context state version created updated body ttl_ms channel
#       n_events events… entry_json|"" created_score received_json|"" status_time (last)
CREATE = """
if KEYS[3] ~= '' then
  local found = redis.call('GET', KEYS[3])
  if found then return {'dup', found} end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists', ''} end
if KEYS[9] ~= '' and redis.call('EXISTS', KEYS[9]) == 1 then return {'entry', ''} end
if KEYS[3] ~= '' then redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[10]) end
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'delegate', ARGV[3], 'context', ARGV[4],
  'state', ARGV[5], 'version', ARGV[6], 'created', ARGV[7], 'updated', ARGV[8], 'body', ARGV[9],
  'stime', ARGV[#ARGV], 'dk', KEYS[3])
local n = tonumber(ARGV[12])
for i = 1, n do redis.call('XADD', KEYS[2], i .. '-0', 'e', ARGV[12 + i]) end
redis.call('SADD', KEYS[4], ARGV[1])
redis.call('SADD', KEYS[5], ARGV[1])
if KEYS[6] ~= '' then redis.call('SADD', KEYS[6], ARGV[1]) end
redis.call('SADD', KEYS[7], ARGV[1])
redis.call('SADD', KEYS[8], ARGV[1])
if KEYS[9] ~= '' then
  local entry = cjson.decode(ARGV[13 + n])
  for field, value in pairs(entry) do redis.call('HSET', KEYS[9], field, value) end
  redis.call('ZADD', KEYS[10], ARGV[14 + n], entry['handoff_id'])
  redis.call('ZADD', KEYS[11], ARGV[14 + n], entry['handoff_id'])
  redis.call('ZADD', KEYS[13], ARGV[14 + n], entry['handoff_id'])
end
if KEYS[12] ~= '' then
  redis.call('RPUSH', KEYS[12], ARGV[15 + n])
  redis.call('RPUSH', KEYS[14], ARGV[15 + n])
end
redis.call('PUBLISH', ARGV[11], n)
return {'ok', ''}
"""

# KEYS: task, events, i:s:<new state>, outbox|"", ob:pend, prefix-of-state-sets, ob:ids,
#       closed outbox|"", ob:c:<context>|"", ob:last_done
# ARGV: id expected new_version state updated body channel n_events events…
#       mode ("" | "checkpoint" | "terminate")
#       [entry_json created_score closed_id|"" status detail | status detail handoff_id]
#       status_time (last)
UPDATE = """
local current = redis.call('HMGET', KEYS[1], 'version', 'state')
if not current[1] then return 'missing' end
if tonumber(current[1]) ~= tonumber(ARGV[2]) then return 'conflict' end
local n = tonumber(ARGV[8])
local mode = ARGV[9 + n]
if mode == 'checkpoint' then
  if redis.call('EXISTS', KEYS[4]) == 1 then return 'entry' end
  if ARGV[12 + n] ~= '' and not redis.call('ZSCORE', KEYS[5], ARGV[12 + n]) then
    return 'not_pending'
  end
elseif mode == 'terminate' then
  if not redis.call('ZSCORE', KEYS[5], ARGV[12 + n]) then return 'not_pending' end
end
redis.call('HSET', KEYS[1], 'state', ARGV[4], 'version', ARGV[3], 'updated', ARGV[5],
  'body', ARGV[6], 'stime', ARGV[#ARGV])
local seq = tonumber(ARGV[2])
for i = 1, n do redis.call('XADD', KEYS[2], (seq + i) .. '-0', 'e', ARGV[8 + i]) end
if current[2] ~= ARGV[4] then
  redis.call('SREM', KEYS[6] .. current[2], ARGV[1])
  redis.call('SADD', KEYS[3], ARGV[1])
end
if mode == 'checkpoint' then
  local entry = cjson.decode(ARGV[10 + n])
  for field, value in pairs(entry) do redis.call('HSET', KEYS[4], field, value) end
  redis.call('ZADD', KEYS[7], ARGV[11 + n], entry['handoff_id'])
  redis.call('ZADD', KEYS[5], ARGV[11 + n], entry['handoff_id'])
  redis.call('ZADD', KEYS[9], ARGV[11 + n], entry['handoff_id'])
  if ARGV[12 + n] ~= '' then
    redis.call('HSET', KEYS[8], 'status', ARGV[13 + n], 'detail', ARGV[14 + n],
      'updated_at', ARGV[5])
    redis.call('ZREM', KEYS[5], ARGV[12 + n])
    if ARGV[13 + n] == 'done' then redis.call('SET', KEYS[10], ARGV[5]) end
  end
elseif mode == 'terminate' then
  redis.call('HSET', KEYS[4], 'status', ARGV[10 + n], 'detail', ARGV[11 + n],
    'updated_at', ARGV[5])
  redis.call('ZREM', KEYS[5], ARGV[12 + n])
  if ARGV[10 + n] == 'done' then redis.call('SET', KEYS[10], ARGV[5]) end
end
redis.call('PUBLISH', ARGV[7], n)
return 'ok'
"""

# KEYS: rcv, rcv:c:<context>;  ARGV: the entry's JSON
RECORD_RECEIVED = """
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1
"""

ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""

# Layout 1 kept pending entries in a set and no per-context ledger indexes.
# KEYS: layout, ob:pending (old set), ob:pend, ob:ids, rcv, ob:last_done;  ARGV: prefix, layout
MIGRATE = """
if redis.call('GET', KEYS[1]) == ARGV[2] then return 0 end
local prefix = ARGV[1]
if redis.call('TYPE', KEYS[2]).ok == 'set' then
  for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    local score = redis.call('ZSCORE', KEYS[4], id)
    if score then redis.call('ZADD', KEYS[3], score, id) end
  end
  redis.call('DEL', KEYS[2])
end
local last = ''
local ids = redis.call('ZRANGE', KEYS[4], 0, -1, 'WITHSCORES')
for i = 1, #ids, 2 do
  local f = redis.call('HMGET', prefix .. 'ob:' .. ids[i], 'context_id', 'status', 'updated_at')
  if f[1] then redis.call('ZADD', prefix .. 'ob:c:' .. f[1], ids[i + 1], ids[i]) end
  if f[2] == 'done' and f[3] and f[3] > last then last = f[3] end
end
if last ~= '' then redis.call('SET', KEYS[6], last) end
for _, row in ipairs(redis.call('LRANGE', KEYS[5], 0, -1)) do
  redis.call('RPUSH', prefix .. 'rcv:c:' .. cjson.decode(row)['context_id'], row)
end
redis.call('SET', KEYS[1], ARGV[2])
return 1
"""

# A finished task deleted with everything kept for it, unless it changed meanwhile, its
# idempotency key still names it, one of its handoffs is pending or a push config of it still
# has deliveries to make (checked before anything is deleted).
# KEYS: task, events, p:<task>, p:active, i:all, i:o, i:d|"", i:c, i:s:<state>, ob:c:<context>,
#       ob:ids, rcv, rcv:c:<context>, dedupe|""
# ARGV: id, before, prefix
PURGE = """
local t = redis.call('HMGET', KEYS[1], 'updated')
if not t[1] or t[1] >= ARGV[2] then return 0 end
if redis.call('SISMEMBER', KEYS[9], ARGV[1]) == 0 then return 0 end
if KEYS[14] ~= '' and redis.call('GET', KEYS[14]) == ARGV[1] then return 0 end
local configs = redis.call('HKEYS', KEYS[3])
for _, config in ipairs(configs) do
  if redis.call('SISMEMBER', KEYS[4], ARGV[1] .. ' ' .. config) == 1 then return 0 end
end
local mine = {}
for _, h in ipairs(redis.call('ZRANGE', KEYS[10], 0, -1)) do
  local f = redis.call('HMGET', ARGV[3] .. 'ob:' .. h, 'task_id', 'status')
  if f[1] == ARGV[1] then
    if f[2] == 'pending' then return 0 end
    table.insert(mine, h)
  end
end
for _, h in ipairs(mine) do
  redis.call('DEL', ARGV[3] .. 'ob:' .. h)
  redis.call('ZREM', KEYS[10], h)
  redis.call('ZREM', KEYS[11], h)
end
for _, row in ipairs(redis.call('LRANGE', KEYS[13], 0, -1)) do
  if cjson.decode(row)['task_id'] == ARGV[1] then
    redis.call('LREM', KEYS[13], 1, row)
    redis.call('LREM', KEYS[12], 1, row)
  end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
for i = 5, 9 do
  if KEYS[i] ~= '' then redis.call('SREM', KEYS[i], ARGV[1]) end
end
return 1
"""

# Ledger rows of handoffs that made no task (refused) received before a time, oldest first,
# up to a limit among the first rows (the list is in the order received).
# KEYS: rcv;  ARGV: before, prefix, limit, rows looked at
PURGE_RECEIVED = """
local done = 0
for _, row in ipairs(redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[4]) - 1)) do
  if done >= tonumber(ARGV[3]) then break end
  local entry = cjson.decode(row)
  if entry['at'] >= ARGV[1] then break end
  if redis.call('EXISTS', ARGV[2] .. 't:' .. entry['task_id']) == 0 then
    redis.call('LREM', KEYS[1], 1, row)
    redis.call('LREM', ARGV[2] .. 'rcv:c:' .. entry['context_id'], 1, row)
    done = done + 1
  end
end
return done
"""

# KEYS: id:<agent>  ARGV: expected document, new document — the identity's check-and-set
SWAP = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

ALL = {
    "swap": SWAP,
    "create": CREATE,
    "update": UPDATE,
    "record_received": RECORD_RECEIVED,
    "acquire": ACQUIRE,
    "release": RELEASE,
    "migrate": MIGRATE,
    "purge": PURGE,
    "purge_received": PURGE_RECEIVED,
}
