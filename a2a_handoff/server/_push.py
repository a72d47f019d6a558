"""The push-notification config operations, for every face, and a config given on SendMessage.

`CreateTaskPushNotificationConfig`, `GetTaskPushNotificationConfig`,
`ListTaskPushNotificationConfigs`, `DeleteTaskPushNotificationConfig` (REST:
`/tasks/{id}/pushNotificationConfigs[/{configId}]`), and `ListPushDeliveries` (ours: the
deliveries made for a task, from each config's stored history: a method rather than the
task's metadata, since writing a delivery into the task would be a task update — an event to
push in turn — and would show credentials' outcomes to every reader of the task). A caller
sees and edits only the configs of tasks it may see (anyone else's are "not found", as the
tasks are). A webhook URL the push policy refuses is -32602 (InvalidParams), and so is a
config beyond the caps (`push._caps`: per task, per caller; counted for the task's owner).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from a2a_handoff.errors import TaskNotFoundError
from a2a_handoff.protocol.models import SendMessageRequest, WireModel
from a2a_handoff.protocol.wire_ids import Id
from a2a_handoff.push import Pusher, history_of, parse_config
from a2a_handoff.push.push_config import PushConfig, load_config
from a2a_handoff.runtime.submission import Submission
from a2a_handoff.runtime.tasks import TaskManager
from a2a_handoff.stores.base import PushConfigRecord

PUSH_METHODS = (
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
)


class ConfigRef(WireModel):
    task_id: Id = Field(min_length=1, max_length=256)
    id: Id = Field(min_length=1, max_length=256)


class TaskRef(WireModel):
    task_id: Id = Field(min_length=1, max_length=256)
    id: Id | None = Field(default=None, max_length=256)
    page_size: int | None = Field(default=None, ge=0, le=1000)
    page_token: str | None = None


def _shown(record: PushConfigRecord) -> dict[str, Any]:
    return load_config(record.config).wire(record.task_id)


class PushConfigs:
    """The push config operations of one agent: each answers the configs as A2A 1.0 shows
    them (`TaskPushNotificationConfig` objects)."""

    def __init__(self, manager: TaskManager, pusher: Pusher) -> None:
        self.manager = manager
        self.pusher = pusher

    async def _checked(self, raw: Any, task_id: str) -> PushConfig:
        config = parse_config(raw, task_id)
        await self.pusher.policy.resolve(config.url, unresolved_ok=True)
        return config

    async def create(self, task_id: str, raw: Mapping[str, Any], principal: str) -> dict[str, Any]:
        """CreateTaskPushNotificationConfig: `raw` (the config as sent) checked and stored
        for the task, whose deliveries start after its current event."""
        record = await self.manager.owned(task_id, principal)
        config = await self._checked(raw, task_id)
        stored = await self.pusher.add(config, cursor=record.version, owner=record.owner)
        return _shown(stored)

    async def get(self, ref: ConfigRef, principal: str) -> dict[str, Any]:
        await self.manager.owned(ref.task_id, principal)
        found = await self.pusher.store.push_configs(ref.task_id, ref.id)
        if not found:
            raise TaskNotFoundError(
                f"task {ref.task_id} has no push notification config {ref.id!r}",
                metadata={"taskId": ref.task_id},
            )
        return _shown(found[0])

    async def list(self, ref: TaskRef, principal: str) -> list[dict[str, Any]]:
        await self.manager.owned(ref.task_id, principal)
        return [_shown(r) for r in await self.pusher.store.push_configs(ref.task_id)]

    async def delete(self, ref: ConfigRef, principal: str) -> None:
        await self.manager.owned(ref.task_id, principal)
        await self.pusher.remove(ref.task_id, ref.id)

    async def deliveries(self, ref: TaskRef, principal: str) -> dict[str, Any]:
        """ListPushDeliveries (ours): the task's deliveries (each config's last ones), `id`
        for one config's."""
        await self.manager.owned(ref.task_id, principal)
        records = await self.pusher.store.push_configs(ref.task_id, ref.id)
        shown = [
            {
                "configId": r.config_id,
                "cursor": r.cursor,
                "done": r.done,
                "failingSince": r.failing_since or None,
            }
            for r in records
        ]
        return {"configs": shown, "deliveries": list(history_of(records))}

    async def given(self, request: SendMessageRequest, principal: str | None = None) -> int:
        """For a message with a push config: the config checked before the message runs
        (-32602 for a URL the policy refuses, or beyond the caps of the task or of the
        caller `principal`, when named), and where its deliveries start (the task's current
        event, for a follow-up; 0 for a new task)."""
        raw = given_config(request)
        if raw is None:
            return 0
        given = {k: v for k, v in raw.items() if k not in ("taskId", "task_id")}
        config = await self._checked(given, "")
        task_id = request.message.task_id
        record = await self.manager.store.get(task_id) if task_id else None
        if principal is not None:  # checked again when stored (`attach_given`)
            if record is None:
                await self.pusher.caps.check_caller(principal)
            elif record.visible_to(principal):  # else the message is refused as not found
                named = config.id if given.get("id") is not None else None
                await self.pusher.caps.check(record.id, named, record.owner)
        return record.version if record is not None else 0

    async def attach_given(
        self, request: SendMessageRequest, submission: Submission, cursor: int
    ) -> None:
        """The message's push config, stored for its task once the task is (before the
        answer: a client told of the task has its config kept); its deliveries start after
        event `cursor`."""
        raw = given_config(request)
        if raw is None:
            return
        try:
            record = await asyncio.shield(submission.created)
        except Exception:  # a direct reply, or the task not stored: answered by the caller
            return
        config = await self._checked(raw, record.id)
        await self.pusher.add(config, cursor=cursor, owner=record.owner)


def given_config(request: SendMessageRequest) -> dict[str, Any] | None:
    """The push config given on a SendMessage (as sent), or None."""
    config = request.configuration
    return config.task_push_notification_config if config is not None else None
