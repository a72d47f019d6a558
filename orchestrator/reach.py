"""Whom the orchestrator may follow a pointer to, and which key goes where.

A transfer pointer is a claim made by an agent. The orchestrator follows one only to an
origin reachable from the agents it was configured with (the entry agent, the `--agent` of
a command, the origins of the keys file): those agents, and — transitively — the agents their
signed cards name as their peers (their routes and trust lists). Anything else is shown and
not followed (exit 5). Keys are per origin: a key (or an OAuth2 client's token) is sent only to
the origin it was given for, never to a URL learned from a pointer; an origin without a key is
called without one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from a2a_handoff import HANDOFF_EXTENSION_URI, AgentClient
from a2a_handoff.client import TokenSource, read_credential
from a2a_handoff.errors import CircuitOpenError, RemoteError
from a2a_handoff.errors import UnavailableError as Unavailable
from a2a_handoff.secrets import check_private

MAX_AGENTS = 64  # agents explored for reachability, at most


def origin(url: str) -> str:
    """`scheme://host:port` of a URL (the port made explicit)."""
    parts = urlsplit(url.strip())
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{parts.hostname}:{port}"


def origins(address: str) -> list[str]:
    """The origins of an agent address (comma-separated replicas allowed)."""
    return [origin(u) for u in address.split(",") if u.strip()]


def parse_keys(text: str, where: str) -> dict[str, str]:
    """`origin=key` lines (or comma-separated pairs); `#` starts a comment."""
    keys: dict[str, str] = {}
    for raw in text.replace(",", "\n").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        url, sep, key = line.partition("=")
        if not sep or "://" not in url or not key.strip():
            raise ValueError(f"{where}: a key entry reads ORIGIN=KEY (http://host:port=KEY)")
        keys[origin(url)] = key.strip()
    return keys


def credentials(start: str | None, api_key: str | None, keys_file: Path | None) -> dict[str, str]:
    """Origin → key: `$A2A_API_KEYS`, then the keys file, then `api_key` for `start`."""
    found: dict[str, str] = {}
    env = os.environ.get("A2A_API_KEYS")
    if env:
        found.update(parse_keys(env, "$A2A_API_KEYS"))
    if keys_file is not None:
        check_private(keys_file, "--keys-file")
        found.update(parse_keys(keys_file.read_text(), str(keys_file)))
    if api_key and start:
        for one in origins(start):
            found[one] = api_key
    return found


def named_credentials(values: Iterable[str]) -> dict[str, str | TokenSource]:
    """`--credential ORIGIN=…` options: origin → an API key (`@FILE`, `env:VAR`) or the
    tokens of an OAuth2 client (`oauth2:@FILE`)."""
    found: dict[str, str | TokenSource] = {}
    for value in values:
        url, sep, where = value.partition("=")
        if not sep or "://" not in url or not where:
            raise ValueError(
                f"--credential reads ORIGIN=oauth2:@FILE, ORIGIN=@FILE or ORIGIN=env:VAR"
                f" (ORIGIN: http://host:port), not {value.partition('=')[0]!r}=…"
            )
        for one in origins(url):
            found[one] = read_credential(where, f"--credential {one}")
    return found


class Reach:
    """The origins a pointer may lead to (see the module docstring)."""

    def __init__(self, client: AgentClient, configured: Iterable[str]) -> None:
        self.client = client
        self.configured = {o for address in configured if address for o in origins(address)}
        self._seeds = [a for a in configured if a]
        self._reachable: set[str] | None = None

    async def allows(self, url: str) -> bool:
        wanted = set(origins(url))
        if wanted <= self.configured:
            return True
        if self._reachable is None or not wanted <= self._reachable:
            self._reachable = await self._explore()
        return wanted <= self._reachable

    async def _explore(self) -> set[str]:
        """Every origin reachable from the configured agents through their cards' peers."""
        reachable = set(self.configured)
        queue = [u for address in self._seeds for u in address.split(",") if u.strip()]
        seen: set[str] = set()
        while queue and len(seen) < MAX_AGENTS:
            url = queue.pop(0)
            if url in seen:
                continue
            seen.add(url)
            try:
                card = await self.client.card(url)
            except (Unavailable, CircuitOpenError, RemoteError, ValueError):
                continue
            for peer in _peers(card.capabilities.extensions or []):
                reachable.add(origin(peer))
                queue.append(peer)
        return reachable


def _peers(extensions: Iterable[object]) -> list[str]:
    for ext in extensions:
        if getattr(ext, "uri", None) == HANDOFF_EXTENSION_URI:
            params = getattr(ext, "params", None)
            peers = params.get("peers") if isinstance(params, Mapping) else None
            if isinstance(peers, list):
                return [str(p) for p in peers if isinstance(p, str) and "://" in p]
    return []
