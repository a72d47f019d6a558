"""The registries a contract is linted against: the agents (agents.yaml: each one's url,
capabilities, skills, domains, tools, routes, whether it is human) and who holds which
permission (permissions.yaml). A registry that is not what it should be raises ContractError.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2a_handoff.contracts.contract import load_data
from a2a_handoff.errors import ContractError


@dataclass(frozen=True, slots=True)
class AgentEntry:
    """One agent of the registry: where it is and what it offers."""

    name: str
    url: str = ""
    capabilities: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    routes: tuple[str, ...] = ()
    human: bool = False


@dataclass(frozen=True, slots=True)
class Registry:
    """The agents (agents.yaml) and who holds which permission (permissions.yaml)."""

    agents: dict[str, AgentEntry] = field(default_factory=dict)
    permissions: dict[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def load(cls, agents: Path | None, permissions: Path | None) -> Registry:
        found: dict[str, AgentEntry] = {}
        if agents is not None:
            data = _mapping(load_data(agents), agents, "agents")
            for name, entry in _mapping(data.get("agents"), agents, "agents").items():
                entry = _mapping(entry, agents, f"agents.{name}")
                listed = {
                    key: tuple(str(v) for v in _names(entry.get(key), agents, f"{name}.{key}"))
                    for key in ("capabilities", "skills", "domains", "tools", "routes")
                }
                found[str(name)] = AgentEntry(
                    str(name),
                    str(entry.get("url", "")),
                    listed["capabilities"],
                    listed["skills"],
                    listed["domains"],
                    listed["tools"],
                    listed["routes"],
                    bool(entry.get("human", False)),
                )
        granted: dict[str, frozenset[str]] = {}
        if permissions is not None:
            data = _mapping(load_data(permissions), permissions, "permissions")
            for name, holders in _mapping(
                data.get("permissions"), permissions, "permissions"
            ).items():
                granted[str(name)] = frozenset(
                    str(h) for h in _names(holders, permissions, f"permissions.{name}")
                )
        return cls(found, granted)

    def card(self, name: str) -> dict[str, Any]:
        """What a predicate sees as `card`/`target` for this agent."""
        entry = self.agents.get(name)
        if entry is None:
            return {}
        return {
            "name": entry.name,
            "capabilities": list(entry.capabilities),
            "skills": list(entry.skills),
            "domains": list(entry.domains),
        }


def _mapping(value: Any, path: Path, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ContractError(f"{path}: {where} must be a mapping")
    return value


def _names(value: Any, path: Path, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ContractError(f"{path}: {where} must be a list of names")
    return value


def registry_file(directory: Path, stem: str) -> Path | None:
    """DIR/STEM.yaml (.yml, .json), the first that is there; None: none is."""
    for suffix in (".yaml", ".yml", ".json"):
        candidate = directory / f"{stem}{suffix}"
        if candidate.is_file():
            return candidate
    return None
