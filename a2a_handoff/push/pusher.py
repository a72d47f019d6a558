"""Push deliveries: each config's events POSTed to its webhook, at least once, in order.

Invariants:
- the task's event log is the outbox: an event is committed with the state it reports, and a
  config's `cursor` (stored) says which events it is done with; a worker follows the log
  from there, so a crash (kill -9 included) or a restart loses nothing: the events after
  the cursor are delivered by the next process (a sweep finds configs not `done`);
- a config is added only within the caps (`_caps`: per task, per caller);
- a delivery carries a stable id (`X-A2A-Delivery-Id`: task, config, event seq): the same
  for every attempt, in every process, so a receiver deduplicates what it got twice (an
  acknowledgement lost to a crash is delivered again);
- every request is signed for its receiver (`X-A2A-Delivery-Signature`: the config's URL,
  the delivery id and the body's digest, by the agent's key, verifiable with its JWKS at
  `/.well-known/jwks.json`), carries the config's token (`X-A2A-Notification-Token`) and
  `Authorization`, goes to an address the policy checked just before, follows no redirect,
  ends within a deadline and takes one of its receiver's few connections (`_webhook`);
- failed attempts are retried with exponential backoff and jitter; once a receiver has been
  failing for `give_up` seconds, the event is given up (recorded in the config's history,
  counted in /health and /metrics) and the next ones get one attempt each until one succeeds;
- /health, which any caller may read, gets counts and times only: no task or config id.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import httpx
from joserfc.jwk import OKPKey

from a2a_handoff.errors import StoreError
from a2a_handoff.ids import new_id
from a2a_handoff.protocol.extension import render_item
from a2a_handoff.protocol.models import StreamResponse, parse_time, utc_now
from a2a_handoff.push._caps import PushCaps
from a2a_handoff.push._collector import PushCollector, PushStats
from a2a_handoff.push._history import recorded
from a2a_handoff.push._webhook import Webhook, delivery_id
from a2a_handoff.push.push_config import PushConfig, PushSettings, config_json, load_config
from a2a_handoff.stores.base import PushConfigRecord, Store, TaskEvent

log = logging.getLogger("a2a_handoff.push")

LEASE_TTL = 10.0
"""Seconds a replica's claim on a config lasts unless renewed (every sweep): how long the
deliveries of a replica killed -9 wait before another one takes them over."""


PushingStore = Store  # the store a pusher needs: every store keeps push configs


def wanted(item: StreamResponse, config: PushConfig) -> bool:
    """Whether `config` gets this event: status changes (the task's first snapshot too),
    artifact updates when it asked for them; never the messages in the log."""
    if item.status_update is not None or item.task is not None:
        return True
    return item.artifact_update is not None and bool(config.artifact_updates)


def _elapsed(since: str) -> float:
    return (datetime.now(UTC) - parse_time(since)).total_seconds()


class Pusher:
    """Delivers the push notifications of one agent's store (see the module docstring)."""

    def __init__(
        self,
        store: PushingStore,
        settings: PushSettings,
        signing_key: Callable[[], OKPKey],
        *,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.policy = settings.policy
        self.webhook = Webhook(settings, signing_key, http)
        self.caps = PushCaps(store, settings)
        self.holder = new_id()
        self.stats = PushStats()
        self._workers: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._sweeper: asyncio.Task[None] | None = None

    # -- configs ----------------------------------------------------------------------------

    async def add(self, config: PushConfig, cursor: int, owner: str) -> PushConfigRecord:
        """Store `config` on a task `owner` owns, within the caps (InvalidParams beyond them,
        nothing stored): its deliveries start after event `cursor`; a config already there
        keeps its progress. Then start delivering."""
        assert config.task_id is not None
        assert config.id is not None
        now = utc_now()
        record = PushConfigRecord(
            config.task_id, config.id, config_json(config), cursor, created_at=now, updated_at=now
        )
        async with self.caps.lock:
            await self.caps.check(config.task_id, config.id, owner)
            stored = await self.store.put_push_config(record)
        self.watch(stored.task_id, stored.config_id)
        return stored

    async def remove(self, task_id: str, config_id: str) -> None:
        await self.store.delete_push_config(task_id, config_id)
        worker = self._workers.pop((task_id, config_id), None)
        if worker is not None:
            worker.cancel()

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(self._sweep_forever())

    async def aclose(self) -> None:
        tasks = [t for t in (self._sweeper, *self._workers.values()) if t is not None]
        for task in tasks:
            task.cancel()
        if tasks:  # bounded: a worker inside a name look-up (a thread) may not end at once
            await asyncio.wait(tasks, timeout=5.0)
        self._workers.clear()
        self._sweeper = None
        await self.webhook.aclose()

    def report(self) -> dict[str, Any]:
        """/health's `push` member."""
        return self.stats.report(len(self._workers))

    def collector(self) -> PushCollector:
        """Its Prometheus metrics (registered on the agent's registry)."""
        return PushCollector(self.report)

    def watch(self, task_id: str, config_id: str) -> None:
        """Deliver the config's events, unless this process does already."""
        key = (task_id, config_id)
        if key not in self._workers:
            self._workers[key] = asyncio.create_task(self._work(task_id, config_id))

    async def sweep(self) -> int:
        """Start a worker for every config with deliveries left; how many were found."""
        active = await self.store.active_push_configs()
        for record in active:
            self.watch(record.task_id, record.config_id)
        return len(active)

    async def _sweep_forever(self) -> None:
        while True:
            try:
                await self._renew()
                await self.sweep()
            except StoreError as exc:
                log.warning("push sweep failed: %s", exc)
            await asyncio.sleep(min(self.settings.sweep, LEASE_TTL / 3))

    async def _renew(self) -> None:
        """Renew the claims of this process's workers (replicas); a worker whose claim
        another replica took stops."""
        if not self.store.shared:
            return
        for (task_id, config_id), worker in list(self._workers.items()):
            lease = f"push:{task_id}:{config_id}"
            if not await self.store.acquire(lease, self.holder, LEASE_TTL):
                worker.cancel()

    # -- one config's deliveries ------------------------------------------------------------

    async def _work(self, task_id: str, config_id: str) -> None:
        lease = f"push:{task_id}:{config_id}"
        held = False
        try:
            held = await self.store.acquire(lease, self.holder, LEASE_TTL)
            if held:
                await self._follow(task_id, config_id, lease)
        except StoreError as exc:  # the sweep starts it again
            log.warning("push deliveries of task %s paused: %s", task_id, exc)
        except Exception:  # a bug: logged, and the sweep starts it again
            log.exception("push deliveries of task %s failed", task_id)
        finally:
            if self._workers.get((task_id, config_id)) is asyncio.current_task():
                del self._workers[(task_id, config_id)]
            if held:
                with contextlib.suppress(StoreError):
                    await self.store.release(lease, self.holder)

    async def _follow(self, task_id: str, config_id: str, lease: str) -> None:
        found = await self.store.push_configs(task_id, config_id)
        if not found or found[0].done:
            return
        record: PushConfigRecord | None = found[0]
        last = found[0].cursor
        async for event in self.store.follow(task_id, after=last):
            assert record is not None
            if wanted(event.item, load_config(record.config)):
                record = await self._deliver(record, event, lease)
                if record is None:  # deleted, or another replica took it
                    return
            last = event.seq
        if record is not None:
            done = replace(record, cursor=max(last, record.cursor), done=True, updated_at=utc_now())
            await self.store.save_push_progress(done)

    async def _deliver(
        self, record: PushConfigRecord, event: TaskEvent, lease: str
    ) -> PushConfigRecord | None:
        """Deliver `event` until acknowledged or given up; the record saved after it."""
        body = render_item(event.item, False).dump_json().encode()
        did = delivery_id(record.task_id, record.config_id, event.seq)
        key = (record.task_id, record.config_id)
        attempts, keep = 0, self.settings.history
        while True:
            found = await self.store.push_configs(record.task_id, record.config_id)
            if not found:
                return None
            record = found[0]
            if self.store.shared and not await self.store.acquire(lease, self.holder, LEASE_TTL):
                return None
            error = await self.webhook.attempt(load_config(record.config), body, did)
            attempts += 1
            if error is None:
                self.stats.delivered += 1
                self.stats.failing.discard(key)
                return await self._saved(recorded(record, event, did, attempts, None, "", keep))
            self.stats.failed_attempts += 1
            self.stats.failing.add(key)
            since = record.failing_since or utc_now()
            log.info("push delivery %s failed (attempt %d): %s", did, attempts, error)
            if _elapsed(since) >= self.settings.give_up:
                self._gave_up(did, error)
                return await self._saved(recorded(record, event, did, attempts, error, since, keep))
            if not record.failing_since:
                record = replace(record, failing_since=since, updated_at=utc_now())
                if not await self.store.save_push_progress(record):
                    return None
            await asyncio.sleep(self._backoff(attempts, since))

    def _backoff(self, attempts: int, since: str) -> float:
        s = self.settings
        delay = min(s.retry_max, s.retry_min * 2 ** min(attempts - 1, 30))
        delay = random.uniform(delay / 2, delay)  # jitter, not a secret
        left = s.give_up - _elapsed(since)
        return max(0.0, min(delay, left + 0.01))

    def _gave_up(self, did: str, error: str) -> None:
        self.stats.given_up += 1
        self.stats.last_given_up_at = utc_now()
        log.warning("push delivery %s given up: %s", did, error)

    async def _saved(self, record: PushConfigRecord) -> PushConfigRecord | None:
        """`record` saved, or None when it is gone (deleted, or taken by another replica)."""
        return record if await self.store.save_push_progress(record) else None
