"""Which webhook URLs an agent calls: the SSRF guard of push notifications.

A webhook URL is chosen by a caller, so it is a way to make the agent send requests to
whatever the agent can reach. By default only `https` URLs whose host is a public address
are accepted — every address a name resolves to must be public: not private, loopback,
link-local, shared (CGNAT), multicast, reserved or unspecified (`push.addresses`: an IPv6
form embedding an IPv4 address, NAT64, 6to4, Teredo, IPv4-mapped…, is judged by the address
it embeds). The allowlist admits others: an entry is a host name (`localhost`,
`hooks.internal`: that name, whatever it resolves to) or an address or network (`127.0.0.1`,
`10.0.0.0/8`, `::1`); a URL whose host is listed, or all of whose addresses are in listed
networks, is admitted over `http` too. An IPv6 form is in a listed network when it is itself,
or when every IPv4 address it embeds is (`64:ff9b::10.1.2.3` with `10.0.0.0/8` listed), and
each address it embeds may be public or listed. Loopback is admitted only when listed.

The check runs when a config is made (a name that does not resolve yet is accepted then)
and again before every delivery, whose connection goes to the address just checked (the
name is not resolved a second time: no rebinding in between). URLs with credentials
(`user:pass@`) are refused: credentials go in the config's `authentication`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import SplitResult, urlsplit

from a2a_handoff.errors import InvalidParamsError
from a2a_handoff.push.addresses import Address, Network, not_public, reaches

MAX_URL = 2048
RESOLVE_TIMEOUT = 5.0


class PushRefused(InvalidParamsError):
    """A webhook URL this agent will not call (-32602)."""


def _parse_entry(entry: str) -> str | Network:
    entry = entry.strip().lower()
    if not entry:
        raise ValueError("an empty push allowlist entry")
    try:
        return ipaddress.ip_network(entry.strip("[]"), strict=False)
    except ValueError:
        pass
    if "/" in entry or ":" in entry or " " in entry:
        raise ValueError(f"push allowlist entry {entry!r}: not a host name, address or network")
    return entry.rstrip(".")


@dataclass(frozen=True, slots=True)
class PushPolicy:
    """The webhook URLs accepted: public https ones, and those the allowlist admits."""

    allow: tuple[str, ...] = ()
    names: frozenset[str] = field(init=False)
    networks: tuple[Network, ...] = field(init=False)

    def __post_init__(self) -> None:
        parsed = [_parse_entry(e) for e in self.allow]
        object.__setattr__(self, "names", frozenset(e for e in parsed if isinstance(e, str)))
        networks = tuple(e for e in parsed if not isinstance(e, str))
        object.__setattr__(self, "networks", networks)

    @classmethod
    def of(cls, allow: Iterable[str]) -> PushPolicy:
        """The policy admitting `allow` (entries also separated by commas)."""
        entries = [part for entry in allow for part in entry.split(",") if part.strip()]
        return cls(tuple(entries))

    def _listed(self, address: Address) -> bool:
        """`address` is in a listed network, or so is every address its IPv6 form reaches."""
        return any(address in network for network in self.networks) or all(
            any(reached in network for network in self.networks) for reached in reaches(address)
        )

    def _refusal(self, address: Address) -> str | None:
        """Why `address` may not be called: some address it reaches is neither public nor
        listed (None when it may)."""
        if self._listed(address):
            return None
        for reached in reaches(address):
            if not self._listed(reached):
                why = not_public(reached)
                if why is not None:
                    return why if reached == address else f"reaches {reached}: {why}"
        return None

    def check_syntax(self, url: str) -> SplitResult:
        """`url` parsed, when its form may be called (scheme, host, no credentials)."""
        if not isinstance(url, str) or not url or len(url) > MAX_URL:
            raise PushRefused(f"url: a webhook URL of at most {MAX_URL} characters is needed")
        if any(c.isspace() or ord(c) < 32 for c in url):
            raise PushRefused("url: white space or control characters in the webhook URL")
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises on a bad port
        except ValueError:
            raise PushRefused("url: not a valid URL") from None
        host = (parts.hostname or "").rstrip(".")
        if parts.scheme not in ("https", "http") or not host:
            raise PushRefused("url: an https:// URL with a host is needed")
        if parts.username is not None or parts.password is not None:
            raise PushRefused("url: credentials in a webhook URL are refused (use authentication)")
        if parts.scheme == "http" and not self._host_listed(host):
            raise PushRefused(
                f"url: {host} is not on this agent's push allowlist, so only https is accepted"
            )
        return parts

    def _host_listed(self, host: str) -> bool:
        if host.lower() in self.names:
            return True
        try:
            return self._listed(ipaddress.ip_address(host.strip("[]")))
        except ValueError:
            return False

    def check_addresses(self, host: str, addresses: Iterable[Address]) -> list[Address]:
        """The addresses of `host` that may be called; PushRefused when any may not."""
        addresses = list(addresses)
        if host.lower() in self.names:
            return addresses
        for address in addresses:
            why = self._refusal(address)
            if why is not None:
                raise PushRefused(
                    f"url: {host} is (or resolves to) {address}, not a public address ({why});"
                    " an agent's operator may admit it with the push allowlist (--push-allow)"
                )
        return addresses

    async def resolve(self, url: str, *, unresolved_ok: bool = False) -> list[Address]:
        """The checked addresses to call `url` at (PushRefused when refused). With
        `unresolved_ok`, a name that does not resolve is accepted with no address."""
        parts = self.check_syntax(url)
        host = (parts.hostname or "").rstrip(".")
        try:
            return self.check_addresses(host, [ipaddress.ip_address(host)])
        except ValueError:
            pass
        name = host.lower()
        if (name == "localhost" or name.endswith(".localhost")) and name not in self.names:
            raise PushRefused(f"url: {host} is a loopback name, not on the push allowlist")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(RESOLVE_TIMEOUT):  # (wait_for may swallow a cancel)
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, TimeoutError, UnicodeError) as exc:
            if unresolved_ok:
                return []
            raise PushUnreachable(f"{host} does not resolve: {exc}") from None
        found = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
        return self.check_addresses(host, dict.fromkeys(found))


class PushUnreachable(Exception):
    """A delivery could not be attempted (the name did not resolve): retried."""
