"""The trust list: the agents whose handoffs this agent accepts, and how it knows their keys.

Secure by default: the agent's routes are on it (an agent trusts where it hands off to, for
the answers that come back); anything else — an agent that hands off to this one without
being one of its routes — is added by name (`--trust NAME=URL`, or a trust file). Each entry
names the agent, its address, the principal its calls arrive as under API-key auth (its name
unless said otherwise), and where its keys come from: pinned in the configuration (a JWKS
file or JWK: never fetched), or the JWKS of its configured address, fetched on first use and
pinned (trust on first use, logged; kept across restarts, `trust.pins`). Fetched again only
from that same address — when a signature names a key id not known yet (a rotation), or when
what was fetched is older than `max_age` — the pin holds: a key the agent serves is used only
when a pinned key vouches for it (a rotation statement, `keys.endorsed`); anything else is
refused and logged, until an operator forgets the pin. Keys are valid for `max_age` after
they were last fetched: an agent whose JWKS cannot be fetched then has no usable key (its
envelopes are answered "retry later", never accepted on keys it may have retired). A URL
inside a message or a `jku` header is never fetched.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from joserfc.jwk import OKPKey

from a2a_handoff.errors import TrustError
from a2a_handoff.protocol.urls import check_agent_url
from a2a_handoff.trust.keys import endorsed, jwks_keys, public_key
from a2a_handoff.trust.pins import MemoryPins, Pins

log = logging.getLogger("a2a_handoff.trust")

JWKS_PATH = ".well-known/jwks.json"

FetchJwks = Callable[[str, str], Awaitable[Any]]
"""`fetch(address, path)`: the JSON document at `path` of a configured address (comma-separated
replicas allowed; `path` "" when the address is the document's own URL)."""


@dataclass(frozen=True, slots=True)
class TrustedAgent:
    """One agent this agent accepts handoffs from."""

    name: str
    url: str
    principal: str = ""  # its principal under API-key auth; "" means its name
    jwks_url: str | None = None  # where its keys are fetched (default: its address's JWKS)
    pinned: Mapping[str, OKPKey] | None = field(default=None, compare=False)
    approvals: bool = False  # may sign operators' decisions (a human agent)

    def __post_init__(self) -> None:
        # A URL without its scheme was accepted before and never matched a caller.
        object.__setattr__(self, "url", check_agent_url(self.url, f"trusted agent {self.name}"))
        if self.jwks_url is not None:
            where = check_agent_url(self.jwks_url, f"the JWKS URL of {self.name}", replicas=False)
            object.__setattr__(self, "jwks_url", where)

    @property
    def caller(self) -> str:
        return self.principal or self.name


def _urls(address: str) -> list[str]:
    return [u.strip() for u in address.split(",") if u.strip()]


class TrustList:
    """The trusted agents by name, and their keys (pinned, or fetched and pinned)."""

    def __init__(
        self,
        agents: Iterable[TrustedAgent] = (),
        fetch: FetchJwks | None = None,
        *,
        max_age: float = 60.0,
        min_refresh: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        pins: Pins | None = None,
    ) -> None:
        self.agents: dict[str, TrustedAgent] = {}
        for agent in agents:
            self.agents[agent.name] = agent
        self.fetch = fetch
        self.pins: Pins = pins if pins is not None else MemoryPins()
        self.max_age = max_age
        self.min_refresh = min_refresh
        self.clock = clock
        self._keys: dict[str, tuple[float, dict[str, OKPKey]]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._fetches: dict[str, int] = {}

    def fetches(self, name: str) -> int:
        """How many times the keys of `name` were fetched (to tell a fresh answer)."""
        return self._fetches.get(name, 0)

    def pinned(self, name: str) -> bool:
        """Whether the keys of `name` are pinned in the configuration (never fetched)."""
        agent = self.agents.get(name)
        return agent is not None and agent.pinned is not None

    def get(self, name: str) -> TrustedAgent | None:
        return self.agents.get(name)

    def by_url(self, url: str) -> TrustedAgent | None:
        """The trusted agent one of whose configured URLs is `url`."""
        wanted = url.rstrip("/")
        for agent in self.agents.values():
            if any(u.rstrip("/") == wanted for u in _urls(agent.url)):
                return agent
        return None

    def urls(self) -> list[str]:
        """Every configured URL of every trusted agent (for the card: whom this agent knows)."""
        return sorted({u for agent in self.agents.values() for u in _urls(agent.url)})

    def cached_keys(self, name: str) -> dict[str, OKPKey]:
        """The keys known now for `name`, without fetching (empty when none)."""
        agent = self.agents.get(name)
        if agent is not None and agent.pinned is not None:
            return dict(agent.pinned)
        cached = self._keys.get(name)
        return cached[1] if cached else {}

    async def keys(self, name: str, *, unknown_kid: str | None = None) -> dict[str, OKPKey]:
        """kid → public key of trusted agent `name`; fetched when not pinned yet, when
        `unknown_kid` is not among them (once per `min_refresh` s), or past `max_age`.

        TrustError when `name` is not trusted or its keys cannot be had.
        """
        agent = self.agents.get(name)
        if agent is None:
            raise TrustError(f"{name} is not on the trust list")
        if agent.pinned is not None:
            return dict(agent.pinned)
        cached = self._keys.get(name)
        if cached is not None and not self._stale(cached, unknown_kid):
            return cached[1]
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock:
            cached = self._keys.get(name)  # another caller may have fetched meanwhile
            if cached is not None and not self._stale(cached, unknown_kid):
                return cached[1]
            return await self._refresh(agent, cached)

    def _stale(self, cached: tuple[float, dict[str, OKPKey]], unknown_kid: str | None) -> bool:
        age = self.clock() - cached[0]
        if age >= self.max_age:
            return True
        return unknown_kid is not None and unknown_kid not in cached[1] and age >= self.min_refresh

    async def _refresh(
        self, agent: TrustedAgent, cached: tuple[float, dict[str, OKPKey]] | None
    ) -> dict[str, OKPKey]:
        source = agent.jwks_url or agent.url
        if self.fetch is None:
            raise TrustError(f"no way to fetch the keys of {agent.name}")
        try:
            document = await self.fetch(source, "" if agent.jwks_url else JWKS_PATH)
            served = jwks_keys(document)
        except Exception as exc:
            if cached is not None and self.clock() - cached[0] < self.max_age:
                # Keys fetched less than max_age ago still hold: a passing failure to see a
                # rotation changes nothing. Older ones are never extended.
                log.warning(
                    "trust: could not refresh %s's keys from %s: %s", agent.name, source, exc
                )
                return cached[1]
            raise TrustError(
                f"cannot fetch the keys of {agent.name} from {source}: {exc}"
            ) from None
        self._fetches[agent.name] = self._fetches.get(agent.name, 0) + 1
        keys = self._pinned_subset(agent, source, served, document)
        self._keys[agent.name] = (self.clock(), keys)
        return keys

    def _pinned_subset(
        self, agent: TrustedAgent, source: str, served: dict[str, OKPKey], document: Any
    ) -> dict[str, OKPKey]:
        """Of the keys `agent` serves, those its pin vouches for (all of them, pinned now, on
        first use); the pin follows the agent's own rotation statements."""
        pinned = self.pins.get(agent.name)
        if pinned is None:
            self.pins.put(agent.name, served)
            log.warning(
                "trust: pinned %s's keys %s from %s (trust on first use)",
                agent.name,
                sorted(served),
                source,
            )
            return served
        proven = endorsed(agent.name, pinned, document)
        keys = {kid: key for kid, key in served.items() if kid in proven}
        refused = sorted(set(served) - set(keys))
        if refused:
            log.error(
                "trust: REFUSED %s's keys %s served at %s: no key pinned for %s (%s) vouches"
                " for them. If %s's identity changed on purpose, drop the pin: python -m"
                " a2a_handoff trust forget %s (--store URL | --key-file PATH)",
                agent.name,
                refused,
                source,
                agent.name,
                sorted(pinned),
                agent.name,
                agent.name,
            )
        if keys and set(keys) != set(pinned):
            self.pins.put(agent.name, keys)
            log.warning(
                "trust: %s rotated its keys at %s: pinned %s (was %s)",
                agent.name,
                source,
                sorted(keys),
                sorted(pinned),
            )
        return keys


def parse_trust(value: str) -> TrustedAgent:
    """`NAME=URL` (a `--trust` argument)."""
    name, sep, url = value.partition("=")
    if not sep or not name.strip() or not url.strip():
        raise TrustError(f"a trusted agent reads NAME=URL, not {value!r}")
    return TrustedAgent(name.strip(), url.strip())


def _pinned_keys(entry: Mapping[str, Any], base: Path) -> dict[str, OKPKey] | None:
    if entry.get("jwks_file"):
        path = base / str(entry["jwks_file"])
        try:
            return jwks_keys(yaml.safe_load(path.read_text()))
        except OSError as exc:
            raise TrustError(f"cannot read {path}: {exc}") from None
    if entry.get("key"):
        key = public_key(entry["key"])
        assert key.kid is not None
        return {key.kid: key}
    return None


def load_trust_file(path: str | Path) -> list[TrustedAgent]:
    """A trust file (YAML or JSON): `agents: [{name, url, principal?, jwks_url?, jwks_file?,
    key?, approvals?}]`; relative `jwks_file` paths are read from the file's directory."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise TrustError(f"cannot read the trust file {path}: {exc}") from None
    entries = data.get("agents") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise TrustError(f"{path}: a trust file holds `agents:`, a list")
    agents = []
    for entry in entries:
        if not isinstance(entry, dict) or not entry.get("name") or not entry.get("url"):
            raise TrustError(f"{path}: every trusted agent needs a name and a url")
        agents.append(
            TrustedAgent(
                name=str(entry["name"]),
                url=str(entry["url"]),
                principal=str(entry.get("principal") or ""),
                jwks_url=str(entry["jwks_url"]) if entry.get("jwks_url") else None,
                pinned=_pinned_keys(entry, path.parent),
                approvals=bool(entry.get("approvals", False)),
            )
        )
    return agents
