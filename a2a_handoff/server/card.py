"""`GET /.well-known/agent-card.json` (signed, cacheable) and `GET /.well-known/jwks.json`.

The card served is the agent's card with the handoff extension naming its JWKS
(`params.jwks`) and the agents it knows (`params.peers`: its routes and trust list, so an
orchestrator can tell which pointers it may follow), signed as A2A 1.0 defines — by every
active key, so a verifier holding an older pinned key still verifies it across a rotation.
It is made again when the agent's keys change. Served with `ETag`, `Cache-Control` and
`Last-Modified`; `If-None-Match` naming the current ETag gets `304 Not Modified`. The card is
A2A 1.0; with `v03_fields` it also carries the members an A2A 0.3 client needs to find the
JSON-RPC endpoint (served so at `/.well-known/agent.json`, the 0.3 era's path; signed with
them, so our client verifies it — the official SDK's verifier drops members it does not know
and would not).
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from a2a_handoff.protocol.agent_card import AgentCard
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI
from a2a_handoff.protocol.v03 import card_v03
from a2a_handoff.trust import AgentTrust, Identity
from a2a_handoff.trust.card import sign_card
from a2a_handoff.trust.trustlist import JWKS_PATH

CARD_PATH = "/.well-known/agent-card.json"
V03_CARD_PATH = "/.well-known/agent.json"
JWKS_ROUTE = "/" + JWKS_PATH


def signed_card(card: AgentCard, trust: AgentTrust, *, v03_fields: bool = False) -> dict[str, Any]:
    """The card as served: JWKS and peers in the handoff extension (and the 0.3 members, with
    `v03_fields`), signed by every active key."""
    jwks_url = card.url.rstrip("/") + JWKS_ROUTE
    body = card.dump()
    for ext in body.get("capabilities", {}).get("extensions", []):
        if ext.get("uri") == HANDOFF_EXTENSION_URI:
            params = ext.setdefault("params", {})
            params["jwks"] = jwks_url
            peers = trust.trust_list.urls()
            if peers:
                params["peers"] = peers
    if v03_fields:
        body = {**body, **card_v03(body)}
    for entry in trust.identity.active:
        body = sign_card(body, entry.key, jwks_url)
    return body


class CardRoute:
    """Serves one agent's card; its body and validators are made again when its keys change."""

    def __init__(self, card: AgentCard, trust: AgentTrust, *, v03_fields: bool = False) -> None:
        self.card = card
        self.trust = trust
        self.v03_fields = v03_fields
        self._for: Identity | None = None
        self.body = b""
        self.etag = ""
        self.modified = ""

    def _current(self) -> None:
        identity = self.trust.identity
        if identity is self._for:
            return
        served = signed_card(self.card, self.trust, v03_fields=self.v03_fields)
        self.body = json.dumps(served, separators=(",", ":")).encode()
        self.etag = '"' + hashlib.sha256(self.body).hexdigest()[:32] + '"'
        self.modified = email.utils.formatdate(time.time(), usegmt=True)
        self._for = identity

    async def get(self, request: Request) -> Response:
        self._current()
        headers = {
            "ETag": self.etag,
            "Cache-Control": "public, max-age=300",
            "Last-Modified": self.modified,
        }
        if self.etag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=headers)
        return Response(self.body, media_type="application/json", headers=headers)

    async def jwks(self, request: Request) -> Response:
        """The active public keys (a retired key disappears from here)."""
        body = json.dumps(self.trust.identity.jwks(), separators=(",", ":"))
        headers = {"Cache-Control": "public, max-age=60"}
        return Response(body, media_type="application/jwk-set+json", headers=headers)
