"""Push-notification settings, and a caller's `TaskPushNotificationConfig` parsed at the edge.

A config names the webhook `url`, an optional `token` (sent back as
`X-A2A-Notification-Token`) and `authentication` (`scheme` and `credentials`: sent as
`Authorization: <scheme> <credentials>`). `artifactUpdates: true` (ours: the A2A config has
no member for it) asks for artifact events as well as status changes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, ValidationError, model_validator

from a2a_handoff.errors import InvalidParamsError
from a2a_handoff.ids import new_id
from a2a_handoff.protocol.models import WireModel
from a2a_handoff.protocol.wire_ids import Id
from a2a_handoff.push.policy import PushPolicy

_HEADER_SAFE = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?")
_ID = re.compile(r"[A-Za-z0-9._~:@-]{1,128}")


@dataclass(frozen=True, slots=True)
class PushSettings:
    """How an agent delivers push notifications (`create_app(push=...)`).

    `allow`: the push allowlist (see `push.policy`); `give_up`: seconds a receiver may keep
    failing before the events it missed are given up; `retry_min`/`retry_max`: the first and
    the longest wait between attempts (exponential, with jitter); `timeout`: connecting, and
    each read or write of a request; `deadline`: a whole attempt (the answer's status line
    and headers included: a receiver that trickles its answer is cut off); `sweep`: how
    often configs left by another process (or replica) are looked for.

    The caps keep one caller from taking the deliveries of others: `per_task` configs on a
    task, `per_caller` configs with deliveries left on the tasks one principal owns, and
    `per_receiver` connections at once to one receiver (`scheme://host:port`): a slow
    receiver holds only its own.
    """

    allow: tuple[str, ...] = ()
    give_up: float = 3600.0
    retry_min: float = 0.5
    retry_max: float = 60.0
    timeout: float = 10.0
    deadline: float = 30.0
    sweep: float = 5.0
    history: int = 50  # deliveries kept per config
    per_task: int = 10
    per_caller: int = 100
    per_receiver: int = 4
    policy: PushPolicy = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "allow", tuple(self.allow))
        object.__setattr__(self, "policy", PushPolicy.of(self.allow))
        for name in ("per_task", "per_caller", "per_receiver"):
            if getattr(self, name) < 1:
                raise ValueError(f"PushSettings.{name} must be at least 1")
        if self.timeout <= 0 or self.deadline <= 0:
            raise ValueError("PushSettings: timeout and deadline must be positive")


class AuthenticationInfo(WireModel):
    scheme: str = Field(min_length=1, max_length=64)
    credentials: str | None = Field(default=None, max_length=4096)

    @model_validator(mode="before")
    @classmethod
    def _from_v03(cls, value: Any) -> Any:
        """A2A 0.3 named a list of schemes: its first is the one used."""
        if isinstance(value, dict) and "scheme" not in value:
            schemes = value.get("schemes")
            if isinstance(schemes, list) and schemes and isinstance(schemes[0], str):
                return {**value, "scheme": schemes[0]}
        return value


class PushConfig(WireModel):
    """A `TaskPushNotificationConfig` as this agent accepts it."""

    id: Id | None = Field(default=None, max_length=256)
    task_id: Id | None = None
    url: str
    token: str | None = Field(default=None, max_length=1024)
    authentication: AuthenticationInfo | None = None
    artifact_updates: bool | None = None
    tenant: str | None = None

    def wire(self, task_id: str) -> dict[str, Any]:
        """The config as answered (camelCase, unset members left out)."""
        shown: dict[str, Any] = {"id": self.id, "taskId": task_id, "url": self.url}
        if self.token is not None:
            shown["token"] = self.token
        if self.authentication is not None:
            shown["authentication"] = self.authentication.model_dump(
                by_alias=True, exclude_none=True
            )
        if self.artifact_updates is not None:
            shown["artifactUpdates"] = self.artifact_updates
        return shown


def parse_config(raw: Any, task_id: str) -> PushConfig:
    """A caller's config, checked (InvalidParams otherwise), with an id (made when absent).
    The URL's form is checked here; its addresses by the policy (`PushPolicy.resolve`)."""
    if not isinstance(raw, dict):
        raise InvalidParamsError("the push notification config must be an object")
    try:
        config = PushConfig.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "config"
        raise InvalidParamsError(f"{where}: {first['msg']}") from None
    if config.task_id and config.task_id != task_id:
        raise InvalidParamsError("taskId: the config names another task")
    if config.id is not None and not _ID.fullmatch(config.id):
        raise InvalidParamsError("id: 1 to 128 letters, digits or ._~:@- characters")
    for name, value in _header_values(config):
        if not _HEADER_SAFE.fullmatch(value):
            raise InvalidParamsError(f"{name}: printable ASCII only (it is sent as a header)")
    return config.model_copy(update={"id": config.id or new_id(), "task_id": task_id})


def _header_values(config: PushConfig) -> list[tuple[str, str]]:
    values = []
    if config.token is not None:
        values.append(("token", config.token))
    if config.authentication is not None:
        values.append(("authentication.scheme", config.authentication.scheme))
        if config.authentication.credentials:
            values.append(("authentication.credentials", config.authentication.credentials))
    return values


def config_json(config: PushConfig) -> str:
    return json.dumps(config.wire(config.task_id or ""), separators=(",", ":"))


def load_config(text: str) -> PushConfig:
    """A stored config (made by `config_json`)."""
    return PushConfig.model_validate_json(text)
