"""An artifact written in chunks (`TaskContext.artifact_stream`), such as a model's tokens.

Each write is an artifact update of the same artifact id (`append` after the first, the name
and description on the first only); closing sends the last chunk (`lastChunk`), and nothing
is written after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from a2a_handoff.protocol.models import Artifact, Part

_artifact = Artifact.__pydantic_validator__.validate_python  # from one dict, parts and all


def artifact_of(
    artifact_id: str,
    parts: Sequence[Part],
    text: str | None,
    data: Any,
    name: str | None,
    description: str | None,
) -> Artifact:
    """The artifact `artifact_id` made of `parts`, then a text and a data part when given;
    ValueError when it has no part."""
    all_parts: list[Part | dict[str, Any]] = list(parts)
    if text is not None:
        all_parts.append({"text": text})
    if data is not None:
        all_parts.append({"data": data})  # validated: bounded depth
    if not all_parts:
        raise ValueError("an artifact needs at least one part")
    artifact: Artifact = _artifact(
        {"artifact_id": artifact_id, "parts": all_parts, "name": name, "description": description}
    )
    return artifact


class ArtifactSink(Protocol):
    """Where the chunks go: a handler's context (`TaskContext.artifact`)."""

    async def artifact(
        self,
        *parts: Part,
        text: str | None = None,
        data: Any = None,
        name: str | None = None,
        description: str | None = None,
        artifact_id: str | None = None,
        append: bool = False,
        last_chunk: bool | None = None,
    ) -> Artifact: ...


class ArtifactStream:
    """One artifact being written in chunks (see `TaskContext.artifact_stream`)."""

    def __init__(
        self, ctx: ArtifactSink, artifact_id: str, name: str | None, description: str | None
    ) -> None:
        self.ctx = ctx
        self.artifact_id = artifact_id
        self.name = name
        self.description = description
        self.chunks = 0
        self.closed = False

    async def write(
        self, text: str | None = None, *parts: Part, data: Any = None, last: bool = False
    ) -> None:
        """Send a chunk: a text, parts, or data; `last=True` makes it the last chunk."""
        if self.closed:
            raise RuntimeError(f"artifact {self.artifact_id} is complete: nothing more to write")
        first = self.chunks == 0
        await self.ctx.artifact(
            *parts,
            text=text,
            data=data,
            name=self.name if first else None,
            description=self.description if first else None,
            artifact_id=self.artifact_id,
            append=not first,
            last_chunk=last,
        )
        self.chunks += 1
        self.closed = last

    async def close(self) -> None:
        """Send the last chunk (an empty text: every chunk needs a part)."""
        if self.closed:
            return
        self.closed = True
        first = self.chunks == 0
        await self.ctx.artifact(
            text="",
            name=self.name if first else None,
            description=self.description if first else None,
            artifact_id=self.artifact_id,
            append=not first,
            last_chunk=True,
        )
