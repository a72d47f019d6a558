"""A2A 1.0 wire models (ProtoJSON): camelCase members, enums by name, oneofs by member name.

Models are data: validation lives here, I/O elsewhere. Unknown members are ignored, snake_case
names are accepted as ProtoJSON parsers do, and `dump()` writes camelCase without unset members.
"""

from __future__ import annotations

import base64
import binascii
import time
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import SchemaSerializer, core_schema

from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.wire_ids import Id

__all__ = [
    "JSON_NULL",
    "Artifact",
    "CancelTaskRequest",
    "GetTaskRequest",
    "ListTasksRequest",
    "ListTasksResponse",
    "Message",
    "Part",
    "Role",
    "SendMessageConfiguration",
    "SendMessageRequest",
    "SendMessageResponse",
    "StreamResponse",
    "SubscribeToTaskRequest",
    "Task",
    "TaskArtifactUpdateEvent",
    "TaskState",
    "TaskStatus",
    "TaskStatusUpdateEvent",
    "WireModel",
    "exactly_one",
    "parse_time",
    "utc_now",
]


MAX_JSON_DEPTH = 64


def _too_deep(value: Any, limit: int) -> bool:
    """Whether a JSON value nests objects and arrays more than `limit` levels deep.

    Level by level, containers only: free-form data is mostly shallow and scalar-heavy.
    """
    level = [value]
    for _ in range(limit):
        nested: list[Any] = []
        for container in level:
            items = container.values() if isinstance(container, dict) else container
            for item in items:
                if isinstance(item, _CONTAINERS):
                    nested.append(item)
        if not nested:
            return False
        level = nested
    return True


_CONTAINERS = (dict, list)  # a tuple: `dict | list` would make a union at every call


def _bounded(value: Any) -> Any:
    if isinstance(value, _CONTAINERS) and _too_deep(value, MAX_JSON_DEPTH):
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value


JsonValue = Annotated[Any, AfterValidator(_bounded)]
"""Free-form JSON (data parts, metadata): bounded in depth so it can always be stored."""
Metadata = Annotated[dict[str, Any], AfterValidator(_bounded)]


class _JsonNull:
    """JSON null held as a value (`{"data": null}`), where None means "no such member".

    Written back as null wherever it is dumped: pydantic serializes an object it meets in a
    free-form field with the object's own `__pydantic_serializer__`.
    """

    __slots__ = ()
    __pydantic_serializer__ = SchemaSerializer(
        core_schema.any_schema(
            serialization=core_schema.plain_serializer_function_ser_schema(lambda _: None)
        )
    )

    def __repr__(self) -> str:
        return "JSON_NULL"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "JSON_NULL"  # unpickles as the module's one instance

    def __copy__(self) -> _JsonNull:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _JsonNull:
        return self


JSON_NULL = _JsonNull()
"""A data part's null content: `Part(data=None)` holds it, and writes `{"data": null}`."""


def _null_is_a_value(value: Any) -> Any:
    return JSON_NULL if value is None else value


JsonData = Annotated[Any, BeforeValidator(_null_is_a_value), AfterValidator(_bounded)]
"""A data part's content: any JSON value, null included (as JSON_NULL)."""


_last_second: tuple[int, str] = (-1, "")


def utc_stamp(seconds: float) -> str:
    """A unix time as a timestamp of `utc_now()`'s form (stamps compare as their times)."""
    whole, millis = divmod(int(seconds * 1000), 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{millis:03d}Z"


def utc_now() -> str:
    """The current time as an ISO-8601 UTC timestamp with millisecond precision."""
    global _last_second
    seconds, millis = divmod(time.time_ns() // 1_000_000, 1000)
    if seconds != _last_second[0]:  # the date and time of day change once a second
        _last_second = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
    return f"{_last_second[1]}.{millis:03d}Z"


def parse_time(stamp: str) -> datetime:
    """An ISO-8601 timestamp as an aware datetime (UTC when it names no zone)."""
    value = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class WireModel(BaseModel):
    """Base of every wire model: camelCase aliases, snake_case accepted, unknown members ignored."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="ignore",  # enums keep their members (use_enum_values: False, the default)
    )

    def dump(self) -> dict[str, Any]:
        """The ProtoJSON object: camelCase, enums by name, unset members left out."""
        return self.model_dump(mode="json", exclude_none=True)

    def dump_json(self, exclude: set[str] | None = None) -> str:
        """`dump()` as JSON (`exclude` left out too): the Rust serializer called directly."""
        serialized = self.__pydantic_serializer__.to_json(self, exclude=exclude, exclude_none=True)
        return serialized.decode()


class Role(StrEnum):
    USER = "ROLE_USER"
    AGENT = "ROLE_AGENT"


class Part(WireModel):
    """One piece of content: exactly one of `text`, `data`, `url` or `raw` (base64 on the
    wire; `Part(raw=b"...")` takes the bytes themselves and encodes them)."""

    text: str | None = None
    data: JsonData = None  # None: no data member; JSON_NULL: the member, holding null
    url: str | None = None
    raw: str | None = None
    metadata: Metadata | None = None
    filename: str | None = None
    media_type: str | None = None

    @model_validator(mode="after")
    def _one_content(self) -> Part:
        if (self.text, self.data, self.url, self.raw).count(None) != 3:  # no list made
            present = [n for n in ("text", "data", "url", "raw") if getattr(self, n) is not None]
            raise ValueError(
                "a part holds exactly one of text, data, url or raw"
                + (f" (found {', '.join(present)})" if present else "")
            )
        return self

    @field_validator("raw", mode="before")
    @classmethod
    def _encode_bytes(cls, value: Any) -> Any:
        if isinstance(value, bytes | bytearray | memoryview):
            return base64.b64encode(value).decode("ascii")
        return value

    @property
    def raw_bytes(self) -> bytes | None:
        """The decoded content of a `raw` part (None for other parts)."""
        return None if self.raw is None else base64.b64decode(self.raw)

    @field_validator("raw")
    @classmethod
    def _base64(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ValueError("raw must be base64") from exc
        return value


class Message(WireModel):
    message_id: Id = Field(min_length=1)
    role: Role
    parts: list[Part] = Field(min_length=1)
    context_id: Id | None = None
    task_id: Id | None = None
    metadata: Metadata | None = None
    extensions: list[str] | None = None
    reference_task_ids: list[Id] | None = None

    @property
    def text(self) -> str:
        """All text parts joined by newlines."""
        return "\n".join(part.text for part in self.parts if part.text is not None)


class TaskStatus(WireModel):
    state: TaskState
    message: Message | None = None
    timestamp: str | None = None


class Artifact(WireModel):
    artifact_id: str = Field(min_length=1)
    parts: list[Part] = Field(min_length=1)
    name: str | None = None
    description: str | None = None
    metadata: Metadata | None = None
    extensions: list[str] | None = None


class Task(WireModel):
    id: str = Field(min_length=1)
    context_id: str = Field(min_length=1)
    status: TaskStatus
    artifacts: list[Artifact] | None = None
    history: list[Message] | None = None
    metadata: Metadata | None = None


class TaskStatusUpdateEvent(WireModel):
    task_id: str
    context_id: str
    status: TaskStatus
    metadata: Metadata | None = None


class TaskArtifactUpdateEvent(WireModel):
    task_id: str
    context_id: str
    artifact: Artifact
    append: bool | None = None
    last_chunk: bool | None = None
    metadata: Metadata | None = None


def exactly_one(model: BaseModel, names: tuple[str, ...], what: str) -> None:
    """Raise unless exactly one of the oneof members `names` is set."""
    present = [name for name in names if getattr(model, name) is not None]
    if len(present) != 1:
        raise ValueError(f"{what} holds exactly one of {', '.join(names)}")


_STREAM_MEMBERS = ("task", "message", "status_update", "artifact_update")


class StreamResponse(WireModel):
    """One streamed item: exactly one of task, message, statusUpdate, artifactUpdate."""

    task: Task | None = None
    message: Message | None = None
    status_update: TaskStatusUpdateEvent | None = None
    artifact_update: TaskArtifactUpdateEvent | None = None

    @model_validator(mode="after")
    def _one_member(self) -> StreamResponse:
        if (self.task, self.message, self.status_update, self.artifact_update).count(None) != 3:
            exactly_one(self, _STREAM_MEMBERS, "a stream item")
        return self


class SendMessageResponse(WireModel):
    task: Task | None = None
    message: Message | None = None

    @model_validator(mode="after")
    def _one_member(self) -> SendMessageResponse:
        exactly_one(self, ("task", "message"), "a send result")
        return self


# -- requests -------------------------------------------------------------------------------


class SendMessageConfiguration(WireModel):
    accepted_output_modes: list[str] | None = None
    task_push_notification_config: dict[str, Any] | None = None
    history_length: int | None = Field(default=None, ge=0)
    return_immediately: bool | None = None


class SendMessageRequest(WireModel):
    message: Message
    configuration: SendMessageConfiguration | None = None
    metadata: Metadata | None = None
    tenant: str | None = None


class GetTaskRequest(WireModel):
    id: Id = Field(min_length=1)
    history_length: int | None = Field(default=None, ge=0)
    tenant: str | None = None


class ListTasksRequest(WireModel):
    context_id: Id | None = None
    status: TaskState | None = None
    page_size: int | None = Field(default=None, ge=1, le=100)
    page_token: Id | None = None
    history_length: int | None = Field(default=None, ge=0)
    status_timestamp_after: Id | None = None
    include_artifacts: bool | None = None
    tenant: str | None = None


class ListTasksResponse(WireModel):
    tasks: list[Task]
    next_page_token: str
    page_size: int
    total_size: int


class CancelTaskRequest(WireModel):
    id: Id = Field(min_length=1)
    metadata: Metadata | None = None
    tenant: str | None = None


class SubscribeToTaskRequest(WireModel):
    id: Id = Field(min_length=1)
    tenant: str | None = None
