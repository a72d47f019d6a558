"""A config's delivery history: the last deliveries (`PushSettings.history`) kept on its
stored record, each delivered or given up, as `ListPushDeliveries` shows them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from a2a_handoff.protocol.models import StreamResponse, utc_now
from a2a_handoff.stores.base import PushConfigRecord, TaskEvent


def recorded(
    record: PushConfigRecord,
    event: TaskEvent,
    did: str,
    attempts: int,
    error: str | None,
    failing_since: str,
    keep: int,
) -> PushConfigRecord:
    """`record` done with `event`: its cursor moved past it, the delivery (acknowledged when
    `error` is None, else given up) added to the last `keep` of its history."""
    entry: dict[str, Any] = {
        "deliveryId": did,
        "seq": event.seq,
        "event": _kind(event.item),
        "outcome": "delivered" if error is None else "given_up",
        "attempts": attempts,
        "at": utc_now(),
    }
    if error is not None:
        entry["error"] = error
    history = [*json.loads(record.history), entry][-keep:]
    return replace(
        record,
        cursor=event.seq,
        failing_since=failing_since,
        history=json.dumps(history, separators=(",", ":")),
        updated_at=entry["at"],
    )


def _kind(item: StreamResponse) -> str:
    for name in ("status_update", "artifact_update", "task", "message"):
        if getattr(item, name) is not None:
            return {"status_update": "statusUpdate", "artifact_update": "artifactUpdate"}.get(
                name, name
            )
    return "unknown"


def history_of(records: list[PushConfigRecord]) -> Iterator[dict[str, Any]]:
    """The deliveries of `records`, each with its config id, oldest first per config."""
    for record in records:
        for entry in json.loads(record.history):
            yield {"configId": record.config_id, **entry}
