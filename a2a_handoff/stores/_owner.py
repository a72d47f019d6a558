"""One shared store, one agent: a PostgreSQL schema or a Redis key prefix names its owner.

Two agents on one schema (or prefix) would serve each other's tasks: a handler would answer a
task meant for another agent. So the first agent that opens a schema records its name (from
its card: `claim`) there, replicas of it (the same name) share it, and an agent of another
name is refused at start with a message naming both and the way out. An agent's default
schema is `a2a_<name>` (prefix `a2a:<name>:`), so agents on one database or Redis keep apart
without configuration; an explicit `?schema=` / `?prefix=` still wins and is still checked.

Stores made before defaults were per agent used `a2a` (`a2a:`) for every agent. An agent
without an explicit schema keeps that one when it already names this agent; when it holds
data of an agent it does not name, the agent is refused and told to say which it means
(`?schema=a2a` to keep that data, or its own default to start afresh).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from a2a_handoff.errors import StoreError

LEGACY_SCHEMA = "a2a"
LEGACY_PREFIX = "a2a:"
_NOT_SCHEMA = re.compile(r"[^a-z0-9_]")
_NOT_PREFIX = re.compile(r"[^A-Za-z0-9_.-]")


def _fitted(name: str, clean: str, length: int) -> str:
    """`clean`, cut to `length`; a name that had to change gets a short hash of the original,
    so that names differing only in what was cleaned stay apart."""
    if clean == name and len(clean) <= length:
        return clean
    digest = hashlib.blake2b(name.encode(), digest_size=4).hexdigest()
    return f"{clean[: length - 9]}_{digest}"


def schema_for(agent: str) -> str:
    """The default PostgreSQL schema of the agent named `agent`: `a2a_<name>`, lower-case
    letters, digits and `_` only (48 characters at most)."""
    return "a2a_" + _fitted(agent, _NOT_SCHEMA.sub("_", agent.lower()), 44)


def prefix_for(agent: str) -> str:
    """The default Redis key prefix of the agent named `agent`: `a2a:<name>:`."""
    return f"a2a:{_fitted(agent, _NOT_PREFIX.sub('_', agent), 64)}:"


def taken(kind: str, where: str, owner: str, agent: str, own: str) -> StoreError:
    """The refusal of agent `agent` on a schema (`kind`) or prefix `where` `owner` has."""
    option = "?schema=" if kind == "schema" else "?prefix="
    return StoreError(
        f"the store's {kind} {where} belongs to agent {owner!r}, and this agent is {agent!r}:"
        f" two agents on one {kind} would serve each other's tasks. Give {agent} a {kind} of"
        f" its own (leave {option} out of the store URL for its default, {own}), or start it"
        f" under the name {owner!r} if it is meant to be a replica of that agent"
    )


def unclaimed_legacy(kind: str, legacy: str, agent: str, own: str) -> StoreError:
    """The refusal of an agent whose default moved while the old default holds data."""
    option = "?schema=" if kind == "schema" else "?prefix="
    return StoreError(
        f"the {kind} {legacy} (every agent's default before each got its own) holds an"
        f" agent's data and does not say whose; this agent ({agent!r}) now defaults to {own}."
        f" If that data is {agent}'s, add {option}{legacy} to its store URL (it then records"
        f" {agent} as its owner); otherwise add {option}{own} to start {agent} in a {kind} of"
        " its own"
    )


async def claim_prefix(client: Any, prefix: str, explicit: bool, agent: str) -> str:
    """The Redis prefix `agent` uses — `prefix`, or the old default when it names `agent` and
    `prefix` (a default, not `explicit`) holds nothing yet — recorded as `agent`'s (`SET NX`:
    of two agents opening a new prefix at once, one gets it); refused when another agent's."""
    if not explicit and not await client.exists(prefix + "layout"):
        owner = await client.get(LEGACY_PREFIX + "agent")
        if owner == agent:
            prefix = LEGACY_PREFIX
        elif owner is None and await client.exists(LEGACY_PREFIX + "i:all"):
            raise unclaimed_legacy("prefix", LEGACY_PREFIX, agent, prefix)
    if not await client.set(prefix + "agent", agent, nx=True):
        owner = await client.get(prefix + "agent")
        if owner != agent:
            raise taken("prefix", prefix, owner, agent, prefix_for(agent))
    return prefix
