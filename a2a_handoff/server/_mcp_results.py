"""What the MCP face's tools answer: a task, an A2A error or a refused call as a tool result.

A task's result carries its answer as text (its artifacts, its last message, and what to do
next: a question to reply to, where it was handed off) and the task as structured content
(id, context, state, artifacts, and the handoff extension's transfer, duplicate, rejected).
A failed, rejected or canceled task, an error and a refused call are results with `isError`.

A task that waits for a human operator (an escalation at a human agent: input-required, but
the operator answers it, not the caller) is a normal result saying so (`awaitingOperator`,
`waitingFor`): what is decided and that `get_task` gives the outcome — never an invitation
to `reply`. A task handed off as an escalation (the library's `escalated (…)` reason) says a
human operator decides at the agent it went to.
"""

from __future__ import annotations

import json
from typing import Any

try:
    import mcp_types as types
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError(
        "the MCP face needs the mcp package: pip install '.[mcp]' in the a2a-handoff clone"
    ) from exc

from a2a_handoff.errors import RpcError
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI


def part_texts(parts: list[dict[str, Any]] | None) -> list[str]:
    """The parts as text: text as is, data as compact JSON, files by their URL."""
    out = []
    for part in parts or ():
        if "text" in part:
            out.append(str(part["text"]))
        elif "data" in part:
            out.append(json.dumps(part["data"], separators=(",", ":")))
        elif "url" in part:
            out.append(str(part["url"]))
    return out


def outcome(task: dict[str, Any]) -> types.CallToolResult:
    """A task as a tool's result: its answer as text, the task as structured content."""
    status = task.get("status") or {}
    state = str(status.get("state", "")).removeprefix("TASK_STATE_").lower().replace("_", "-")
    said = " ".join(part_texts((status.get("message") or {}).get("parts")))
    ext = (task.get("metadata") or {}).get(HANDOFF_EXTENSION_URI) or {}
    if ext.get("state") == "TRANSFERRED":
        state = "transferred"
    artifacts = [
        {"name": a.get("name"), "parts": a.get("parts") or []} for a in task.get("artifacts") or ()
    ]
    structured: dict[str, Any] = {
        "taskId": task.get("id"),
        "contextId": task.get("contextId"),
        "state": state,
        "message": said,
        "artifacts": artifacts,
    }
    escalation = ext.get("escalation") if isinstance(ext.get("escalation"), dict) else None
    waiting = escalation is not None and state == "input-required"
    structured["awaitingOperator"] = waiting
    if waiting and escalation is not None:
        structured["waitingFor"] = str(escalation.get("whatIsNeeded", ""))
    if "transfer" in ext:
        structured["transfer"] = ext["transfer"]
    for member in ("duplicate", "rejected"):
        if member in ext:
            structured[member] = ext[member]
    lines = [f"{a['name'] or 'artifact'}: {' '.join(part_texts(a['parts']))}" for a in artifacts]
    if said:
        lines.append(said)
    if waiting:
        lines.append(_awaiting(str(task.get("id")), structured["waitingFor"]))
    elif state == "input-required":
        lines.append(f"(task {task.get('id')} needs input: answer it with the reply tool)")
    elif state == "transferred" and "transfer" in ext:
        where = ext["transfer"]
        lines.append(f"(handed off to {where.get('agentName')}, task {where.get('taskId')})")
        if str(where.get("reason", "")).startswith("escalated"):
            lines.append(
                f"(a human operator at {where.get('agentName')} decides; its get_task on"
                f" task {where.get('taskId')} says when, and where the decision went)"
            )
    text = "\n".join(lines) or state
    failed = state in ("failed", "rejected", "canceled")
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=structured, is_error=failed
    )


def _awaiting(task_id: str, need: str) -> str:
    """What a caller is told of a task that waits for a human operator."""
    what = f": {need}" if need else ""
    return (
        f"(task {task_id} waits for a human operator's decision{what}. An operator answers it"
        " (approve, deny or reply), not this caller; call get_task with its id later for the"
        " outcome: the task then shows where the decision went)"
    )


def error_result(exc: RpcError) -> types.CallToolResult:
    """An A2A error as a tool's failed result (its code kept in the structured content)."""
    message = f"{exc.message} (A2A error {exc.code})"
    return types.CallToolResult(
        content=[types.TextContent(text=message)],
        structured_content={"error": {"code": exc.code, "message": exc.message}},
        is_error=True,
    )


def invalid_result(message: str) -> types.CallToolResult:
    """A call the tool cannot take (its arguments), as a failed result."""
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)
