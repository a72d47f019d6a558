"""What an MCP tool call gave a handler (`ctx.tools.call`): plain data, no `mcp` import.

`content` holds the tool's content blocks as MCP's JSON has them (`{"type": "text", "text":
…}`, images, resources…), `structured` its structured content. The same value is what the
task's journal keeps of a keyed call, so a handler run again after a restart gets back
exactly what the first run got.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The answer of one MCP tool call."""

    content: tuple[dict[str, Any], ...] = ()
    structured: dict[str, Any] | None = None
    is_error: bool = False

    @property
    def text(self) -> str:
        """The text blocks of `content`, joined by newlines."""
        return "\n".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {"content": list(self.content)}
        if self.structured is not None:
            value["structured"] = self.structured
        if self.is_error:
            value["isError"] = True
        return value

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> ToolResult:
        content = value.get("content") or []
        structured = value.get("structured")
        return cls(
            tuple(b for b in content if isinstance(b, dict)),
            structured if isinstance(structured, dict) else None,
            bool(value.get("isError")),
        )
