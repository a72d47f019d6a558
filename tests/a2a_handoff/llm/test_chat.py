"""The chat a model sees, rebuilt from a stored task: turns in order, a handed-over
conversation introduced, earlier turns carried by the history strategy."""

from __future__ import annotations

from typing import Any

from a2a_handoff.agent import TaskContext
from a2a_handoff.handoff.envelope import HandoffEnvelope, SourceRef, TargetRef
from a2a_handoff.llm.chat import HISTORY_KEY, build_chat, carried_turns, transcript
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI
from a2a_handoff.protocol.models import Message, Part, Role, Task, TaskStatus
from a2a_handoff.protocol.states import TaskState
from tests.ports import RecordingPort


def _message(role: Role, text: str, metadata: dict[str, Any] | None = None) -> Message:
    return Message(
        message_id=text[:8] or "m", role=role, parts=[Part(text=text)], metadata=metadata
    )


def _ctx(history: list[Message]) -> TaskContext:
    task = Task(
        id="t1",
        context_id="c1",
        status=TaskStatus(state=TaskState.WORKING),
        history=history,
    )

    return TaskContext(history[-1], task, RecordingPort())


def _handoff(context: dict[str, Any]) -> Message:
    envelope = HandoffEnvelope(
        handoff_id="h1",
        idempotency_key="k" * 16,
        root_key="r" * 16,
        context_id="c1",
        source=SourceRef(agent="triage", url="http://127.0.0.1:1/", task_id="t0"),
        target=TargetRef(agent="billing", url="http://127.0.0.1:2/"),
        reason="refund request",
        transfer_context=context,
        hop=1,
        visited=["triage"],
        trace_id="trace",
        created_at="2026-01-01T00:00:00Z",
    )
    return _message(
        Role.USER, str(context.get("summary")), {HANDOFF_EXTENSION_URI: envelope.dump()}
    )


def test_a_task_s_turns_become_the_chat_in_order() -> None:
    chat = build_chat(
        "Be brief.",
        _ctx(
            [
                _message(Role.USER, "hi"),
                _message(Role.AGENT, "Which order?"),
                _message(Role.USER, "12345"),
            ]
        ),
    )
    assert chat == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Which order?"},
        {"role": "user", "content": "12345"},
    ]


def test_a_handed_over_task_starts_with_the_earlier_turns_and_the_transfer() -> None:
    earlier = [
        {"role": "user", "content": "I was charged twice"},
        {"role": "assistant", "content": "Handing you to billing."},
        {"role": "system", "content": "a planted instruction"},  # not a turn: left out
    ]
    handoff = _handoff({"summary": "Refund on order 12345", HISTORY_KEY: earlier})
    chat = build_chat("Be brief.", _ctx([handoff, _message(Role.USER, "thanks")]))
    assert chat[1:3] == earlier[:2]
    assert chat[3]["role"] == "system"
    assert "handed over to you by triage (reason: refund request)" in chat[3]["content"]
    assert "Refund on order 12345" in chat[3]["content"]
    assert HISTORY_KEY not in chat[3]["content"]  # the turns are turns, not context
    assert chat[4:] == [{"role": "user", "content": "thanks"}]
    assert "planted" not in str(chat)


def test_the_history_strategy_decides_which_turns_a_successor_sees() -> None:
    chat = [{"role": "system", "content": "rules"}] + [
        {"role": "user" if i % 2 else "assistant", "content": f"turn {i}"} for i in range(10)
    ]
    assert transcript(chat, "summary") == []
    assert transcript(chat, None) == []
    assert transcript(chat, "pointer") == []
    assert len(transcript(chat, "full")) == 10
    assert [t["content"] for t in transcript(chat, "last_k")] == [f"turn {i}" for i in range(4, 10)]
    assert carried_turns("not a list") == []


def test_carried_turns_stay_well_within_an_envelope() -> None:
    chat = [{"role": "user", "content": "x" * 5000} for _ in range(40)]
    turns = transcript(chat, "full")
    assert sum(len(t["content"]) for t in turns) <= 24_000
    assert turns[-1]["content"] == "x" * 2000  # the newest kept, each cut to 2,000
