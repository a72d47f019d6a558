"""`protocol.shallow`: the same copies and JSON as pydantic's `model_copy` and `dump_json`."""

from __future__ import annotations

from pydantic import ConfigDict, PrivateAttr

import a2a_handoff.server  # noqa: F401  (every wire model defined, the agent card's included)
from a2a_handoff.protocol import shallow
from a2a_handoff.protocol.models import (
    JSON_NULL,
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    WireModel,
)


def _task() -> Task:
    message = Message(
        message_id="m1", role=Role.USER, parts=[Part(text='héllo \u2028 "quoted"'), Part(data=None)]
    )
    return Task(
        id="t1",
        context_id="c1",
        status=TaskStatus(state=TaskState.SUBMITTED, timestamp="2026-01-01T00:00:00.000Z"),
        history=[message],
        metadata={"k": [1, {"x": None}]},
    )


def _same(a: WireModel, b: WireModel) -> None:
    assert type(a) is type(b)
    assert a == b
    assert a.model_fields_set == b.model_fields_set
    assert a.__pydantic_extra__ == b.__pydantic_extra__
    assert a.__pydantic_private__ == b.__pydantic_private__
    assert a.dump_json() == b.dump_json()
    assert a.model_dump(exclude_unset=True) == b.model_dump(exclude_unset=True)


def test_copied_is_model_copy() -> None:
    task = _task()
    artifact = Artifact(artifact_id="a1", parts=[Part(text="x")])
    for update in ({"artifacts": [artifact]}, {"history": None}, {}, {"context_id": "c2"}):
        new = shallow.copied(task, update)
        _same(new, task.model_copy(update=update))
    message = task.history[0]  # type: ignore[index]
    bound = shallow.copied(message, {"task_id": "t1", "context_id": "c1"})
    _same(bound, message.model_copy(update={"task_id": "t1", "context_id": "c1"}))
    assert bound.parts is message.parts  # shallow, as model_copy
    assert message.task_id is None
    assert "task_id" not in message.model_fields_set


def test_copy_owns_its_fields() -> None:
    task = _task()
    new = shallow.copied(task, {"artifacts": []})
    new.__dict__["id"] = "other"
    new.model_fields_set.add("x")
    assert task.id == "t1"
    assert "x" not in task.model_fields_set


def test_dump_json_is_pydantics_json() -> None:
    task = _task()
    assert task.dump_json() == task.model_dump_json(exclude_none=True)
    assert '"data":null' in task.dump_json()  # JSON_NULL written as null
    assert task.history[0].parts[1].data is JSON_NULL  # type: ignore[index]
    excluded = {"history", "artifacts"}
    assert task.dump_json(excluded) == task.model_dump_json(exclude_none=True, exclude=excluded)
    event = StreamResponse(
        artifact_update=TaskArtifactUpdateEvent(
            task_id="t1",
            context_id="c1",
            artifact=Artifact(artifact_id="a", parts=[Part(text="é")]),
        )
    )
    assert event.dump_json() == event.model_dump_json(exclude_none=True)
    update = event.artifact_update
    assert update is not None
    assert update.dump_json({"artifact"}) == update.model_dump_json(
        exclude_none=True, exclude={"artifact"}
    )


def _plain(cls: type[WireModel]) -> bool:
    """What a shallow copy takes for granted: no extra members, no private attributes."""
    return cls.model_config.get("extra") == "ignore" and not cls.__private_attributes__


def _all(cls: type[WireModel]) -> list[type[WireModel]]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_all(sub)]
    return found


def test_every_wire_model_has_nothing_a_shallow_copy_would_miss() -> None:
    models = _all(WireModel)
    assert {"AgentCard", "Task", "Message"} <= {m.__name__ for m in models}
    for model in models:
        assert _plain(model), model


def test_a_model_with_private_or_extra_data_is_refused() -> None:
    # (last in this module: the two models stay among WireModel's subclasses)
    # The check above would catch either, were it a wire model.
    class Private(WireModel):
        _cache: int = PrivateAttr(default=0)

    class Extra(WireModel):
        model_config = ConfigDict(extra="allow")

    for model in (Private, Extra):
        assert not _plain(model)
