"""Building an agent card with the defaults this library serves."""

from __future__ import annotations

from collections.abc import Sequence

from a2a_handoff.extension import handoff_extension
from a2a_handoff.models import AgentCapabilities, AgentCard, AgentInterface, AgentSkill

__all__ = ["build_card", "skill"]


def skill(skill_id: str, description: str, *tags: str, name: str | None = None) -> AgentSkill:
    """A skill entry; the name defaults to the id."""
    return AgentSkill(id=skill_id, name=name or skill_id, description=description, tags=list(tags))


def build_card(
    name: str,
    url: str,
    *,
    description: str = "",
    skills: Sequence[AgentSkill] = (),
    capabilities: Sequence[str] = (),
    version: str = "1.0.0",
) -> AgentCard:
    """A card for an agent served at `url`: JSON-RPC 1.0, streaming, the handoff extension.

    `capabilities` are what the agent offers to agents handing tasks to it (the handoff
    extension's `params.capabilities`).
    """
    return AgentCard(
        name=name,
        description=description or name,
        version=version,
        supported_interfaces=[AgentInterface(url=url)],
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=False,
            extensions=[handoff_extension(list(capabilities))],
        ),
        skills=list(skills),
    )
