"""Pins: the keys this agent holds for each agent it trusts, kept across restarts.

A trusted agent's keys are pinned the first time they are fetched from its configured address
(trust on first use) and then change only by proof or by an operator's act: keys the agent
itself vouches for with a rotation statement signed by a pinned key (see `keys.endorsed`), or
`python -m a2a_handoff trust forget NAME`, after which the next fetch pins afresh. Whoever
takes a stopped agent's port cannot replace its keys, and a restart of this agent does not
forget them. Kept in a file beside the agent's key file (mode 0600; read again at each use,
so a `trust forget` from the command line reaches a running agent), or in memory.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Protocol

from joserfc.jwk import OKPKey

from a2a_handoff.errors import TrustError
from a2a_handoff.secrets import SecretError, check_private, private_dir
from a2a_handoff.trust.keys import public_key


class Pins(Protocol):
    """Where pinned keys are kept."""

    def get(self, name: str) -> dict[str, OKPKey] | None:
        """The keys pinned for agent `name` (None: none yet)."""
        ...

    def put(self, name: str, keys: Mapping[str, OKPKey]) -> None: ...

    def forget(self, name: str) -> bool:
        """Drop the pin of `name` (an operator's act); whether there was one."""
        ...

    def names(self) -> dict[str, list[str]]:
        """Every pinned agent and its kids."""
        ...


class MemoryPins:
    """Pins for this process only (an agent whose keys live nowhere on disk)."""

    def __init__(self) -> None:
        self._pins: dict[str, dict[str, OKPKey]] = {}

    def get(self, name: str) -> dict[str, OKPKey] | None:
        pinned = self._pins.get(name)
        return dict(pinned) if pinned is not None else None

    def put(self, name: str, keys: Mapping[str, OKPKey]) -> None:
        self._pins[name] = dict(keys)

    def forget(self, name: str) -> bool:
        return self._pins.pop(name, None) is not None

    def names(self) -> dict[str, list[str]]:
        return {name: sorted(keys) for name, keys in self._pins.items()}


class PinFile:
    """Pins in a JSON file (`{name: [public JWK, …]}`), mode 0600, changed under a lock."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @classmethod
    def beside(cls, key_file: Path) -> PinFile:
        """`billing.keys.json` → `billing.pins.json`."""
        name = key_file.name.removesuffix(".keys.json").removesuffix(".json")
        return cls(key_file.with_name(name + ".pins.json"))

    def _read(self) -> dict[str, list[dict[str, object]]]:
        try:  # another user's file could pin keys of their choosing
            check_private(self.path, "the pinned keys")
        except SecretError as exc:
            raise TrustError(str(exc)) from None
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise TrustError(f"cannot read the pinned keys in {self.path}: {exc}") from None
        return data if isinstance(data, dict) else {}

    @contextlib.contextmanager
    def _changing(self) -> Iterator[dict[str, list[dict[str, object]]]]:
        private_dir(self.path.parent)
        lock = os.open(self.path.with_name(self.path.name + ".lock"), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self._read()
            yield data
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump(data, out, indent=2, sort_keys=True)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        finally:
            os.close(lock)

    def get(self, name: str) -> dict[str, OKPKey] | None:
        jwks = self._read().get(name)
        if not isinstance(jwks, list):
            return None
        keys = [public_key(jwk) for jwk in jwks if isinstance(jwk, dict)]
        return {k.kid: k for k in keys if k.kid is not None}

    def put(self, name: str, keys: Mapping[str, OKPKey]) -> None:
        with self._changing() as data:
            data[name] = [{**k.as_dict(private=False), "kid": kid} for kid, k in keys.items()]

    def forget(self, name: str) -> bool:
        with self._changing() as data:
            return data.pop(name, None) is not None

    def names(self) -> dict[str, list[str]]:
        return {
            name: sorted(str(j.get("kid")) for j in jwks if isinstance(j, dict))
            for name, jwks in self._read().items()
            if isinstance(jwks, list)
        }
