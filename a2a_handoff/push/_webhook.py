"""One delivery's request: signed, to the address the policy just checked, no redirect.

Every request carries a stable id (`X-A2A-Delivery-Id`: task, config, event seq: the same
for every attempt, in every process), a signature (`X-A2A-Signature`: a detached JWS of the
body's bytes by the agent's key, verifiable with its JWKS at `/.well-known/jwks.json`), the
config's token (`X-A2A-Notification-Token`) and `Authorization`. The URL's name is resolved
and checked by the policy just before, and the connection goes to the address checked (the
TLS server name stays the URL's host): no rebinding in between.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from joserfc.jwk import OKPKey

from a2a_handoff.push.addresses import Address
from a2a_handoff.push.policy import PushPolicy, PushRefused, PushUnreachable
from a2a_handoff.push.push_config import PushConfig
from a2a_handoff.trust.signing import sign_detached

PUSH_TYP = "a2a-push-notification+jws"
DELIVERY_HEADER = "X-A2A-Delivery-Id"
TOKEN_HEADER = "X-A2A-Notification-Token"
SIGNATURE_HEADER = "X-A2A-Signature"


def delivery_id(task_id: str, config_id: str, seq: int) -> str:
    return f"{task_id}:{config_id}:{seq}"


def _pinned(url: str, address: Address) -> tuple[str, dict[str, str], dict[str, Any]]:
    """(the URL with its host replaced by `address`, the Host header, the request's
    extensions: the TLS server name stays the URL's host, so certificates are checked
    against it)."""
    parts = httpx.URL(url)
    extensions: dict[str, Any] = {}
    if parts.scheme == "https":
        extensions["sni_hostname"] = parts.host
    pinned = parts.copy_with(host=str(address))
    return str(pinned), {"Host": parts.netloc.decode("ascii")}, extensions


class Webhook:
    """POSTs deliveries to the webhooks `policy` admits, signed with `signing_key`."""

    def __init__(
        self,
        policy: PushPolicy,
        signing_key: Callable[[], OKPKey],
        timeout: float,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.policy = policy
        self.signing_key = signing_key
        self._own_http = http is None
        self.http = http or httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=min(5.0, timeout)),
            follow_redirects=False,
            trust_env=False,  # a proxy would call a URL other than the address checked
        )

    async def aclose(self) -> None:
        if self._own_http:
            await self.http.aclose()

    def headers(self, config: PushConfig, body: bytes, did: str) -> dict[str, str]:
        """The headers of a delivery of `body`."""
        signature = sign_detached(body, self.signing_key(), PUSH_TYP)
        headers = {
            "Content-Type": "application/json",
            DELIVERY_HEADER: did,
            SIGNATURE_HEADER: signature,
        }
        if config.token:
            headers[TOKEN_HEADER] = config.token
        auth = config.authentication
        if auth is not None:
            credentials = f" {auth.credentials}" if auth.credentials else ""
            headers["Authorization"] = f"{auth.scheme}{credentials}"
        return headers

    async def attempt(self, config: PushConfig, body: bytes, did: str) -> str | None:
        """POST one delivery; None when acknowledged (2xx), else what went wrong."""
        try:
            addresses = await self.policy.resolve(config.url)
        except (PushRefused, PushUnreachable) as exc:
            return str(exc)
        if not addresses:
            return "no address to call"
        url, host, extensions = _pinned(config.url, addresses[0])
        headers = {**self.headers(config, body, did), **host}
        try:
            async with self.http.stream(
                "POST", url, content=body, headers=headers, extensions=extensions
            ) as response:
                status = response.status_code
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"[:300]
        if 200 <= status < 300:
            return None
        return f"HTTP {status}"  # a redirect too: never followed
