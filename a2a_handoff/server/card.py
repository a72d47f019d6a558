"""`GET /.well-known/agent-card.json` (signed, cacheable) and `GET /.well-known/jwks.json`.

The card served is the agent's card with the handoff extension naming its JWKS
(`params.jwks`) and the agents it knows (`params.peers`: its routes and trust list, so an
orchestrator can tell which pointers it may follow), signed as A2A 1.0 defines — by every
active key, so a verifier holding an older pinned key still verifies it across a rotation.
It is made again when the agent's keys change. Served with `ETag`, `Cache-Control` and
`Last-Modified`; `If-None-Match` naming the current ETag gets `304 Not Modified`.
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
from a2a_handoff.trust import AgentTrust, Identity
from a2a_handoff.trust.card import sign_card
from a2a_handoff.trust.trustlist import JWKS_PATH

CARD_PATH = "/.well-known/agent-card.json"
JWKS_ROUTE = "/" + JWKS_PATH


def signed_card(card: AgentCard, trust: AgentTrust) -> dict[str, Any]:
    """The card as served: JWKS and peers in the handoff extension, signed by every active key."""
    jwks_url = card.url.rstrip("/") + JWKS_ROUTE
    body = card.dump()
    for ext in body.get("capabilities", {}).get("extensions", []):
        if ext.get("uri") == HANDOFF_EXTENSION_URI:
            params = ext.setdefault("params", {})
            params["jwks"] = jwks_url
            peers = trust.trust_list.urls()
            if peers:
                params["peers"] = peers
    for entry in trust.identity.active:
        body = sign_card(body, entry.key, jwks_url)
    return body


class CardRoute:
    """Serves one agent's card; its body and validators are made again when its keys change."""

    def __init__(self, card: AgentCard, trust: AgentTrust) -> None:
        self.card = card
        self.trust = trust
        self._for: Identity | None = None
        self.body = b""
        self.etag = ""
        self.modified = ""

    def _current(self) -> None:
        identity = self.trust.identity
        if identity is self._for:
            return
        self.body = json.dumps(signed_card(self.card, self.trust), separators=(",", ":")).encode()
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
