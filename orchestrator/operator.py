"""The operator's side of escalations: the inbox of a human agent, and answering one.

`inbox` lists the escalations waiting at a human agent, oldest first, each with its age, the
agent that escalated, and the three parts of its message. `reply`, `approve` and `deny` answer
one: the human agent hands the decision back to the agent that escalated (a return handoff),
and the user's conversation follows it there.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from a2a_handoff import HANDOFF_EXTENSION_URI, AgentClient, Message, Part, Role, Task
from a2a_handoff.protocol.models import parse_time

Item = dict[str, Any]


def _escalation(task: Task) -> dict[str, Any] | None:
    ext = (task.metadata or {}).get(HANDOFF_EXTENSION_URI)
    value = ext.get("escalation") if isinstance(ext, dict) else None
    return value if isinstance(value, dict) else None


def _age(stamp: str | None, now: datetime) -> float:
    if not stamp:
        return 0.0
    return max(0.0, (now - parse_time(stamp)).total_seconds())


async def inbox(client: AgentClient, url: str) -> list[Item]:
    """The escalations waiting for an operator at the human agent `url`, oldest first."""
    now = datetime.now(UTC)
    items: list[Item] = []
    token = ""
    while True:
        query: dict[str, Any] = {"status": "TASK_STATE_INPUT_REQUIRED", "pageSize": 100}
        if token:
            query["pageToken"] = token
        page = await client.list_tasks(url, **query)
        for raw in page["tasks"]:
            task = Task.model_validate(raw)
            escalation = _escalation(task)
            if escalation is None:
                continue
            source = escalation.get("source") or {}
            items.append(
                {
                    "taskId": task.id,
                    "contextId": task.context_id,
                    "since": task.status.timestamp or "",
                    "ageSeconds": round(_age(task.status.timestamp, now), 1),
                    "source": source.get("agent", ""),
                    "sourceTaskId": source.get("taskId", ""),
                    "tier": escalation.get("tier", "blocking"),
                    "trigger": escalation.get("trigger", ""),
                    "need": escalation.get("need", ""),
                    "whatHappened": escalation.get("whatHappened", ""),
                    "whatWasTried": list(escalation.get("whatWasTried") or []),
                    "whatIsNeeded": escalation.get("whatIsNeeded", ""),
                }
            )
        token = page.get("nextPageToken") or ""
        if not token:
            break
    items.sort(key=lambda item: (item["since"], item["taskId"]))
    return items


def describe_age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def render(item: Item) -> str:
    """One inbox entry as a person reads it."""
    tried = "\n".join(f"      - {entry}" for entry in item["whatWasTried"])
    return (
        f"{item['taskId']}  {describe_age(item['ageSeconds'])} old  from {item['source']}"
        f"  [{item['tier']}, {item['trigger']}, {item['need']} needed]\n"
        f"    what happened: {item['whatHappened']}\n"
        f"    what was tried:\n{tried}\n"
        f"    what is needed: {item['whatIsNeeded']}"
    )


async def answer(client: AgentClient, url: str, task_id: str, verdict: str, text: str) -> Task:
    """Answer escalation `task_id`: `approved`, `denied` or `answered` (a free reply)."""
    message = Message(
        message_id=str(uuid.uuid4()),
        role=Role.USER,
        parts=[Part(text=text or verdict)],
        task_id=task_id,
        metadata={HANDOFF_EXTENSION_URI: {"decision": {"verdict": verdict, "by": "operator"}}},
    )
    result = await client.send(url, message, return_immediately=True)
    if not isinstance(result, Task):
        raise ValueError("the human agent answered with a message, not the task")
    return result
