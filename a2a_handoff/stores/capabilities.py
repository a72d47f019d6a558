"""What a store may offer beyond the `Store` contract, each declared by a protocol of its own.

The contract (`stores.base.Store`) is what every backend implements. Some backends can do
more, and the server asks for it by name — never by probing for a member or by testing for a
concrete class:

- `Shared`: the store may be shared by several processes (replicas of one agent): an agent's
  private keys are never kept in it, and the agent must be given a key file;
- `KeepsKeyFile`: the store keeps the agent's keys in a file of its own (SQLite, beside its
  database), which is also where the keys the agent pins are kept;
- `Ephemeral`: the store keeps nothing across a restart (memory): neither do its pins;
- `Pooled`: the store holds a pool of connections whose use `/health` reports;
- `RefusesLegacyKeys`: the store may hold private keys an older version kept in it, and
  moves them out before the agent starts.

A caller asks with `isinstance(store, Pooled)` (the protocols are runtime-checkable), and
mypy then knows the store as that capability.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from a2a_handoff.trust import KeyFile


@runtime_checkable
class Shared(Protocol):
    """Several processes may serve one agent from this store (Redis, PostgreSQL)."""

    @property
    def shared_by_replicas(self) -> bool:
        """True: keys are never kept in it, and replicas coordinate through its leases."""
        ...


@runtime_checkable
class Ephemeral(Protocol):
    """Nothing kept across a restart (the memory store)."""

    @property
    def ephemeral(self) -> bool: ...


@runtime_checkable
class KeepsKeyFile(Protocol):
    """The agent's keys live in a file that belongs to the store (SQLite)."""

    @property
    def key_file(self) -> KeyFile: ...


@runtime_checkable
class Pooled(Protocol):
    """A pool of connections: open, in use, max (PostgreSQL)."""

    def pool_use(self) -> dict[str, int]: ...


@runtime_checkable
class RefusesLegacyKeys(Protocol):
    """Private keys an older version kept in the store are moved out before start-up."""

    async def refuse_legacy_identity(self, agent: str) -> None: ...


def shared(store: object) -> bool:
    """Whether `store` may be shared by replicas (a `Shared` store that says so)."""
    return isinstance(store, Shared) and store.shared_by_replicas


def ephemeral(store: object) -> bool:
    """Whether `store` keeps nothing across a restart (an `Ephemeral` store that says so)."""
    return isinstance(store, Ephemeral) and store.ephemeral
