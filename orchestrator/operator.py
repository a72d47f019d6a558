"""The operator's side of escalations: the inbox of a human agent, and answering one.

`inbox` lists the escalations waiting at a human agent, oldest first, each with its age, the
agent that escalated, the user it acted for (`onBehalfOf`: whose task it is), and the three
parts of its message. `approve` and `deny` decide one; `reply` answers one that needs
information, an action or a decision — to a permission it is a note, and the escalation keeps
waiting for approve or deny. The human agent hands the decision back to the agent that
escalated (a return handoff), and the user's conversation follows it.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from a2a_handoff import HANDOFF_EXTENSION_URI, AgentClient, Message, Part, Role, Task, TaskState
from a2a_handoff.errors import RemoteError
from a2a_handoff.protocol import parse_time

Item = dict[str, Any]
HUMAN_CAPABILITY = "escalations"  # what a human agent's card offers (servers.human)


def _escalation(task: Task) -> dict[str, Any] | None:
    ext = (task.metadata or {}).get(HANDOFF_EXTENSION_URI)
    value = ext.get("escalation") if isinstance(ext, dict) else None
    return value if isinstance(value, dict) else None


def on_behalf_of(task: Task) -> str:
    """Whose task it is: the end user the agent that sent it acted for, as the proven
    envelope named them when the task arrived ("" when it named none)."""
    ext = (task.metadata or {}).get(HANDOFF_EXTENSION_URI)
    received = ext.get("handoff") if isinstance(ext, dict) else None
    return str(received.get("onBehalfOf") or "") if isinstance(received, dict) else ""


def _age(stamp: str | None, now: datetime) -> float:
    if not stamp:
        return 0.0
    return max(0.0, (now - parse_time(stamp)).total_seconds())


async def inbox(client: AgentClient, url: str) -> list[Item]:
    """The escalations waiting for an operator at the human agent `url`, oldest first: in
    the tenant its card names (where agents escalate to it), as an operator sees them."""
    await client.addressed(url)
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
            returns_to = escalation.get("returnsTo") or source
            items.append(
                {
                    "taskId": task.id,
                    "contextId": task.context_id,
                    "since": task.status.timestamp or "",
                    "ageSeconds": round(_age(task.status.timestamp, now), 1),
                    "source": source.get("agent", ""),
                    "sourceTaskId": source.get("taskId", ""),
                    "onBehalfOf": on_behalf_of(task),
                    "tier": escalation.get("tier", "blocking"),
                    "trigger": escalation.get("trigger", ""),
                    "need": escalation.get("need", ""),
                    "whatHappened": escalation.get("whatHappened", ""),
                    "whatWasTried": list(escalation.get("whatWasTried") or []),
                    "whatIsNeeded": escalation.get("whatIsNeeded", ""),
                    # What a decision binds: the action (its fingerprint is what is signed)
                    # and the agent that acts on it once approved.
                    "action": _action(escalation.get("action")),
                    "actingAgent": returns_to.get("agent", ""),
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


def _action(raw: Any) -> dict[str, Any] | None:
    """The action an escalation holds back, as its fingerprint was computed (name, params,
    amount) — the fingerprint an approval is signed over."""
    if not isinstance(raw, dict):
        return None
    return {k: raw.get(k) for k in ("name", "params", "amount", "description", "fingerprint")}


def describe_action(action: dict[str, Any], agent: str) -> str:
    """`refund {"orderId": "4242"} for $750.00 — billing acts on it once approved`."""
    params = json.dumps(action.get("params") or {}, sort_keys=True)
    amount = action.get("amount")
    money = f" for ${amount:,.2f}" if isinstance(amount, int | float) else ""
    return f"{action.get('name')} {params}{money} — {agent or '?'} acts on it once approved"


def render(item: Item) -> str:
    """One inbox entry as a person reads it: what a decision binds first."""
    tried = "\n".join(f"      - {entry}" for entry in item["whatWasTried"])
    user = f" for {item['onBehalfOf']}" if item.get("onBehalfOf") else ""
    action = item.get("action")
    binds = (
        f"    action: {describe_action(action, item.get('actingAgent', ''))}\n"
        if action
        else f"    decision goes back to: {item.get('actingAgent') or item['source']}\n"
    )
    return (
        f"{item['taskId']}  {describe_age(item['ageSeconds'])} old  from {item['source']}"
        f"{user}  [{item['tier']}, {item['trigger']}, {item['need']} needed]\n"
        f"{binds}"
        f"    what happened: {item['whatHappened']}\n"
        f"    what was tried:\n{tried}\n"
        f"    what is needed: {item['whatIsNeeded']}"
    )


class AlreadyDecided(Exception):
    """The escalation is no longer waiting: an operator (or the fallback) answered it."""


class AmbiguousId(ValueError):
    """A shortened task id that is the start of more than one escalation waiting."""


MIN_PREFIX = 4  # characters of a shortened id


async def resolve(client: AgentClient, url: str, given: str) -> str:
    """The task an operator names: its whole id, or the start of one (as ids are shortened
    to read them: `01a20458-f522-…`, the ellipsis allowed) that exactly one escalation waiting
    at `url` has. The start of several is refused, naming them (AmbiguousId); one that none
    has is passed on as it is, for the agent to say it knows no such task."""
    prefix = given.strip().rstrip("….")
    if len(prefix) < MIN_PREFIX:
        return given
    waiting = [item["taskId"] for item in await inbox(client, url)]
    if prefix in waiting:
        return prefix
    found = [task_id for task_id in waiting if task_id.startswith(prefix)]
    if len(found) > 1:
        raise AmbiguousId(
            f"{given} is the start of {len(found)} escalations waiting at {url}:"
            f" {', '.join(found)}; give more of the id"
        )
    return found[0] if found else given


@dataclass(frozen=True)
class Answered:
    task_id: str
    verdict: str
    noted: bool = False  # a reply to a permission: recorded, the escalation still waits
    not_operator: bool = False  # the agent kept it as a note: the caller is no operator


async def is_human_agent(client: AgentClient, url: str) -> bool:
    """Whether the agent at `url` keeps escalations: its card offers `escalations`."""
    card = await client.card(url)
    for ext in card.capabilities.extensions or []:
        offered = (ext.params or {}).get("capabilities") or []
        if ext.uri == HANDOFF_EXTENSION_URI and HUMAN_CAPABILITY in offered:
            return True
    return False


async def _waiting(client: AgentClient, url: str, task_id: str) -> dict[str, Any]:
    """The escalation of task `task_id`, still waiting for an answer; AlreadyDecided if not."""
    task = await client.get_task(url, task_id, history_length=0)
    escalation = _escalation(task)
    if escalation is None:
        raise AlreadyDecided(f"task {task_id} at {url} is not an escalation")
    if task.status.state is not TaskState.INPUT_REQUIRED:
        state = task.status.state.name.lower()
        raise AlreadyDecided(
            f"escalation {task_id} is already decided (its task is {state}): nothing to answer"
        )
    return escalation


async def answer(client: AgentClient, url: str, task_id: str, verdict: str, text: str) -> Answered:
    """Answer escalation `task_id`: `approved`, `denied` or `answered` (a free reply).

    A free reply to a permission is a note: the human agent records it and the escalation
    keeps waiting for a verdict. An escalation no longer waiting raises AlreadyDecided.
    """
    escalation = await _waiting(client, url, task_id)
    message = Message(
        message_id=str(uuid.uuid4()),
        role=Role.USER,
        parts=[Part(text=text or verdict)],
        task_id=task_id,
        metadata={HANDOFF_EXTENSION_URI: {"decision": {"verdict": verdict, "by": "operator"}}},
    )
    try:
        result = await client.send(url, message, return_immediately=True)
    except RemoteError:
        await _waiting(client, url, task_id)  # answered meanwhile: say so
        raise
    if not isinstance(result, Task):
        raise ValueError("the human agent answered with a message, not the task")
    status = result.status.message
    ext = (status.metadata or {}).get(HANDOFF_EXTENSION_URI) if status else None
    if isinstance(ext, dict) and "note" in ext:  # the agent does not take us for an operator
        return Answered(result.id, verdict, noted=True, not_operator=True)
    noted = verdict == "answered" and escalation.get("need") == "permission"
    return Answered(result.id, verdict, noted)
