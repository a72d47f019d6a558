"""One delivery's request: signed for its receiver, to the address the policy just checked,
no redirect, within a deadline, on one of its receiver's few connections.

Every request carries a stable id (`X-A2A-Delivery-Id`: task, config, event seq: the same
for every attempt, in every process) and two signatures by the agent's key (verifiable with
its JWKS at `/.well-known/jwks.json`): `X-A2A-Delivery-Signature`, a detached JWS of the
delivery's claims — the config's URL, the delivery id and the body's SHA-256 — so a delivery
made to one receiver cannot be presented to another (nor its id or body swapped), and
`X-A2A-Signature`, a detached JWS of the body alone (what receivers written before check).
Then the config's token (`X-A2A-Notification-Token`) and `Authorization`. The URL's name is
resolved and checked by the policy just before, and the connection goes to the address
checked (the TLS server name stays the URL's host): no rebinding in between.

An attempt ends within `deadline` seconds whatever the receiver does (a read timeout alone
lets one that sends a byte every few seconds hold the connection for ever), and takes one of
at most `per_receiver` connections its receiver may hold (`_receivers`).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import Callable
from typing import Any

import httpx
from joserfc.jwk import OKPKey

from a2a_handoff.canonical import canonical
from a2a_handoff.push._receivers import ReceiverGates
from a2a_handoff.push.addresses import Address
from a2a_handoff.push.policy import PushRefused, PushUnreachable
from a2a_handoff.push.push_config import PushConfig, PushSettings
from a2a_handoff.trust.signing import sign_detached

PUSH_TYP = "a2a-push-notification+jws"
DELIVERY_TYP = "a2a-push-delivery+jws"
DELIVERY_HEADER = "X-A2A-Delivery-Id"
TOKEN_HEADER = "X-A2A-Notification-Token"
SIGNATURE_HEADER = "X-A2A-Signature"
DELIVERY_SIGNATURE_HEADER = "X-A2A-Delivery-Signature"


def delivery_id(task_id: str, config_id: str, seq: int) -> str:
    return f"{task_id}:{config_id}:{seq}"


def delivery_claims(url: str, did: str, body: bytes) -> bytes:
    """What `X-A2A-Delivery-Signature` signs: the JCS (RFC 8785) of `{"bodySha256", "deliveryId",
    "url"}` — the body's SHA-256 (base64url, unpadded), the delivery id, the config's URL as
    given. A receiver makes the same bytes from its own URL and what arrived."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
    return canonical({"bodySha256": digest, "deliveryId": did, "url": url})


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
        settings: PushSettings,
        signing_key: Callable[[], OKPKey],
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.policy = settings.policy
        self.signing_key = signing_key
        self.deadline = settings.deadline
        self.receivers = ReceiverGates(settings.per_receiver)
        self._own_http = http is None
        timeout = settings.timeout
        self.http = http or httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=min(5.0, timeout)),
            # No pool-wide bound: a shared bound is what a slow receiver would fill for all;
            # each receiver's share is bounded instead (`receivers`), and so is each attempt.
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=20),
            follow_redirects=False,
            trust_env=False,  # a proxy would call a URL other than the address checked
        )

    async def aclose(self) -> None:
        if self._own_http:
            await self.http.aclose()

    def headers(self, config: PushConfig, body: bytes, did: str) -> dict[str, str]:
        """The headers of a delivery of `body`."""
        key = self.signing_key()
        claims = delivery_claims(config.url, did, body)
        headers = {
            "Content-Type": "application/json",
            DELIVERY_HEADER: did,
            DELIVERY_SIGNATURE_HEADER: sign_detached(claims, key, DELIVERY_TYP),
            SIGNATURE_HEADER: sign_detached(body, key, PUSH_TYP),
        }
        if config.token:
            headers[TOKEN_HEADER] = config.token
        auth = config.authentication
        if auth is not None:
            credentials = f" {auth.credentials}" if auth.credentials else ""
            headers["Authorization"] = f"{auth.scheme}{credentials}"
        return headers

    async def attempt(self, config: PushConfig, body: bytes, did: str) -> str | None:
        """POST one delivery; None when acknowledged (2xx), else what went wrong. Waits for
        a connection of its receiver's share; then ends within the deadline."""
        async with self.receivers.seat(config.url):
            try:
                async with asyncio.timeout(self.deadline):
                    return await self._post(config, body, did)
            except TimeoutError:
                return f"no answer within the deadline ({self.deadline:g} s)"

    async def _post(self, config: PushConfig, body: bytes, did: str) -> str | None:
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
