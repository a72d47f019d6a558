"""The Redis store's push-notification configs and their delivery progress.

A task's configs are one hash (`p:<task>`: config id → the record as JSON); `p:active` is the
set of configs with deliveries left (`<task> <config>`), what a start-up sweep reads. The
two writes that must check something — add-or-replace keeping progress, and saving progress
only while the config exists — are Lua scripts: atomic on the server.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from typing import Any

from a2a_handoff.stores._redis_ledger import RedisBase, guarded
from a2a_handoff.stores.base import PushConfigRecord
from a2a_handoff.stores.records import owner_principal

_FIELDS = tuple(f.name for f in fields(PushConfigRecord))

_PUT = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if current then
  local record = cjson.decode(current)
  record['config'] = ARGV[3]
  record['updated_at'] = ARGV[4]
  current = cjson.encode(record)
  redis.call('HSET', KEYS[1], ARGV[1], current)
  return current
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[5])
return ARGV[2]
"""

_SAVE = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then return 0 end
local record = cjson.decode(current)
local progress = cjson.decode(ARGV[2])
for _, name in ipairs({'cursor', 'failing_since', 'history', 'done', 'updated_at'}) do
  record[name] = progress[name]
end
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(record))
if progress['done'] then
  redis.call('SREM', KEYS[2], ARGV[3])
else
  redis.call('SADD', KEYS[2], ARGV[3])
end
return 1
"""


def _record(raw: Any) -> PushConfigRecord:
    data = json.loads(raw)
    values = {name: data[name] for name in _FIELDS if name in data}
    values["cursor"] = int(values.get("cursor", 0))
    values["done"] = bool(values.get("done", False))
    return PushConfigRecord(**values)


def _member(task_id: str, config_id: str) -> str:
    return f"{task_id} {config_id}"


class RedisPush(RedisBase):
    """Push configs (`stores.base.PushStore`) in Redis."""

    def _push_keys(self, task_id: str) -> list[str]:
        return [self._key(f"p:{task_id}"), self._key("p:active")]

    @guarded
    async def put_push_config(self, record: PushConfigRecord) -> PushConfigRecord:
        script = self._redis.register_script(_PUT)
        member = _member(record.task_id, record.config_id)
        args = [record.config_id, json.dumps(asdict(record)), record.config, record.updated_at]
        stored = await script(keys=self._push_keys(record.task_id), args=[*args, member])
        return _record(stored)

    @guarded
    async def push_configs(
        self, task_id: str, config_id: str | None = None
    ) -> list[PushConfigRecord]:
        key = self._key(f"p:{task_id}")
        if config_id is not None:
            found = await self._redis.hget(key, config_id)
            return [_record(found)] if found is not None else []
        rows = await self._redis.hvals(key)
        return sorted((_record(r) for r in rows), key=lambda r: (r.created_at, r.config_id))

    @guarded
    async def delete_push_config(self, task_id: str, config_id: str) -> None:
        key, active = self._push_keys(task_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hdel(key, config_id)
            pipe.srem(active, _member(task_id, config_id))
            await pipe.execute()

    @guarded
    async def save_push_progress(self, record: PushConfigRecord) -> bool:
        script = self._redis.register_script(_SAVE)
        progress = json.dumps(asdict(record))
        member = _member(record.task_id, record.config_id)
        saved = await script(
            keys=self._push_keys(record.task_id), args=[record.config_id, progress, member]
        )
        return bool(saved)

    @guarded
    async def active_push_configs(self) -> list[PushConfigRecord]:
        members = await self._redis.smembers(self._key("p:active"))
        pairs = [str(m).split(" ", 1) for m in members]
        if not pairs:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for task_id, config_id in pairs:
                pipe.hget(self._key(f"p:{task_id}"), config_id)
            rows = await pipe.execute()
        return [_record(row) for row in rows if row is not None]

    @guarded
    async def active_push_count(self, principal: str) -> int:
        members = await self._redis.smembers(self._key("p:active"))
        tasks = [str(m).split(" ", 1)[0] for m in members]
        if not tasks:
            return 0
        async with self._redis.pipeline(transaction=False) as pipe:
            for task_id in tasks:
                pipe.hget(self._key(f"t:{task_id}"), "owner")
            owners = await pipe.execute()
        return sum(
            1 for found in owners if found is not None and owner_principal(str(found)) == principal
        )
