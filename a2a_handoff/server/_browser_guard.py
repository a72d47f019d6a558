"""What a web page may not make an agent do: the check in front of every route.

A browser lets any page it shows send requests to any address the user's machine reaches, a
local agent included, and with DNS rebinding (the page's own name re-pointed at 127.0.0.1)
read the answers as its own. Two checks, before anything else runs, keep pages out — with or
without API keys:

- `Host` must name this agent: a host of its own URLs (the card's and its interfaces'), a
  name in `allowed_hosts`, or an IP address (a rebinding needs a name the attacker owns);
  `localhost` too when one of its own hosts is a loopback or unspecified address. A request
  without `Host` (HTTP/1.0, no browser) passes.
- `Origin`, which a browser sends with every request that is not a plain GET, must be this
  agent's own (an origin of its URLs, or the request's own `scheme://Host`) or listed in
  `allowed_origins`; `null` (a sandboxed page, a file, a redirect) is refused unless listed.

`*` in either list lets any host or origin through. A refusal is a 403 carrying
`ForeignRequestError` (-32107): as a JSON-RPC error on `POST /`, as a `google.rpc.Status`
elsewhere. A2A clients that are not browsers send their own agent's host and no `Origin`:
they pass both checks untouched. The third browser trick, a body sent as `text/plain` or a
form (types a page may send without asking first), is refused by each binding as it reads
the body (`server._call.browser_content_type`).

The cost on the hot path is one walk over the request's header list and a set look-up of the
raw `Host` value, as accepted values are remembered.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.responses import Response
from starlette.types import Scope

from a2a_handoff.errors import ForeignRequestError

ANY = "*"
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_REMEMBERED = 64  # accepted raw Host values kept, so the usual ones cost one look-up


class BrowserGuard:
    """The Host and Origin checks of one app (see the module docstring)."""

    def __init__(
        self,
        own_urls: Iterable[str],
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
    ) -> None:
        urls = [urlsplit(url) for url in own_urls]
        hosts = {(u.hostname or "").lower() for u in urls} - {""}
        if any(_loopback_or_unspecified(host) for host in hosts):
            hosts.update(_LOOPBACK_NAMES)
        listed_hosts = {h.strip().lower().strip("[]").rstrip(".") for h in allowed_hosts}
        self.any_host = ANY in listed_hosts
        self.hosts = frozenset(hosts | listed_hosts - {ANY, ""})
        listed_origins = {o.strip().lower().rstrip("/") for o in allowed_origins}
        self.any_origin = ANY in listed_origins
        own = {_origin(u.scheme, u.hostname or "", u.port) for u in urls if u.hostname}
        self.origins = frozenset(own | {_normal(o) for o in listed_origins - {ANY, ""}})
        self._accepted: set[bytes] = set()

    def refusal(self, scope: Scope) -> ForeignRequestError | None:
        """Why this request is refused, or None when it may go on."""
        host = origin = None
        for name, value in scope["headers"]:
            if name == b"host":
                host = value
            elif name == b"origin":
                origin = value
        return self.refusal_of(host, origin, scope)

    def refusal_of(
        self, host: bytes | None, origin: bytes | None, scope: Scope
    ) -> ForeignRequestError | None:
        """`refusal`, the request's `Host` and `Origin` (the last value of each) already
        read."""
        if host is not None and host not in self._accepted and not self.any_host:
            if not self._own_host(host):
                shown = host.decode("latin-1")[:100]
                return ForeignRequestError(
                    f"Host {shown!r} is not this agent's: it answers at its own URL, an IP"
                    " address, or a name given with --allowed-hosts"
                )
            if len(self._accepted) < _REMEMBERED:
                self._accepted.add(host)
        if origin is not None and not self.any_origin:
            seen = origin.decode("latin-1").strip().lower().rstrip("/")
            if seen not in self.origins and not _same_origin(seen, scope, host):
                return ForeignRequestError(
                    f"Origin {seen[:100]!r} is not this agent's: a web page may not call it"
                    " (an origin given with --allowed-origins may)"
                )
        return None

    def _own_host(self, raw: bytes) -> bool:
        name = _hostname(raw.decode("latin-1"))
        if name is None:
            return False
        return name in self.hosts or _is_address(name)


def refused(error: ForeignRequestError, *, jsonrpc: bool = False) -> Response:
    """The 403 answer for the binding the request was made to (`jsonrpc`: the JSON-RPC
    endpoint's, an error object; else a `google.rpc.Status`)."""
    if jsonrpc:
        body = {"jsonrpc": "2.0", "id": None, "error": error.to_dict()}
    else:
        body = error.to_status()
    return Response(json.dumps(body), status_code=403, media_type="application/json")


def _hostname(value: str) -> str | None:
    """The host of a `Host` value (`name`, `name:port`, `[v6]:port`), lower-case; None when
    it is not one."""
    value = value.strip().lower()
    if value.startswith("["):
        name, bracket, port = value[1:].partition("]")
        if not bracket or (port and not (port[:1] == ":" and port[1:].isdigit())):
            return None
        return name
    name, _, port = value.partition(":")
    if port and not port.isdigit():
        return None
    return name.rstrip(".") or None


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _loopback_or_unspecified(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def _origin(scheme: str, host: str, port: int | None) -> str:
    host = host.lower()
    shown = f"[{host}]" if ":" in host else host
    if port is None or port == _DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{shown}"
    return f"{scheme}://{shown}:{port}"


def _normal(origin: str) -> str:
    """An origin as `_origin` writes it (`http://host:80` → `http://host`)."""
    parts = urlsplit(origin)
    try:
        port = parts.port
    except ValueError:
        return origin
    return _origin(parts.scheme, parts.hostname or "", port) if parts.hostname else origin


def _same_origin(origin: str, scope: Scope, host: bytes | None) -> bool:
    """Whether `origin` is the request's own `scheme://Host` (a page the agent served)."""
    if host is None:
        return False
    return _normal(f"{scope.get('scheme', 'http')}://{host.decode('latin-1')}") == _normal(origin)
