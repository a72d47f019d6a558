"""`GET /.well-known/agent-card.json` (signed, cacheable) and `GET /.well-known/jwks.json`.

The card served is the agent's card with the handoff extension naming its JWKS
(`params.jwks`) and the agents it knows (`params.peers`: its routes and trust list, so an
orchestrator can tell which pointers it may follow — shown, under API-key auth, only to a
caller with a valid key, as `/health` shows them), signed as A2A 1.0 defines — by every
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
from a2a_handoff.server._authentication import Authentication
from a2a_handoff.server._tls_peer import peer_of
from a2a_handoff.trust.agent_trust import AgentTrust
from a2a_handoff.trust.card_signature import sign_card
from a2a_handoff.trust.keys import Identity
from a2a_handoff.trust.trustlist import JWKS_PATH

CARD_PATH = "/.well-known/agent-card.json"
V03_CARD_PATH = "/.well-known/agent.json"
JWKS_ROUTE = "/" + JWKS_PATH


def signed_card(
    card: AgentCard, trust: AgentTrust, *, v03_fields: bool = False, peers: bool = True
) -> dict[str, Any]:
    """The card as served: JWKS and (with `peers`) the peers in the handoff extension (and the
    0.3 members, with `v03_fields`), signed by every active key."""
    jwks_url = card.url.rstrip("/") + JWKS_ROUTE
    body = card.dump()
    for ext in body.get("capabilities", {}).get("extensions", []):
        if ext.get("uri") == HANDOFF_EXTENSION_URI:
            params = ext.setdefault("params", {})
            params["jwks"] = jwks_url
            known = trust.trust_list.urls() if peers else []
            if known:
                params["peers"] = known
    if v03_fields:
        body = {**body, **card_v03(body)}
    for entry in trust.identity.active:
        body = sign_card(body, entry.key, jwks_url)
    return body


class CardRoute:
    """Serves one agent's card; its bodies and validators are made again when its keys change.

    Under API-key auth a caller without a valid key gets the card without its peers (the
    agents this one knows are no stranger's business); a caller with one gets them."""

    def __init__(
        self,
        card: AgentCard,
        trust: AgentTrust,
        *,
        v03_fields: bool = False,
        auth: Authentication | None = None,
    ) -> None:
        self.card = card
        self.trust = trust
        self.v03_fields = v03_fields
        self.auth = auth
        self._for: Identity | None = None
        self._served: dict[bool, tuple[bytes, str]] = {}  # with peers? → body, etag
        self.modified = ""

    def _current(self) -> None:
        identity = self.trust.identity
        if identity is self._for:
            return
        for peers in (True, False):
            served = signed_card(self.card, self.trust, v03_fields=self.v03_fields, peers=peers)
            body = json.dumps(served, separators=(",", ":")).encode()
            self._served[peers] = body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        self.modified = email.utils.formatdate(time.time(), usegmt=True)
        self._for = identity

    def text(self) -> str:
        """The card as served to a caller with a valid key (or to anyone, without auth)."""
        self._current()
        return self._served[True][0].decode()

    async def get(self, request: Request) -> Response:
        self._current()
        auth, peer = self.auth, peer_of(request.scope)
        known = auth is None or await auth.authenticate(request.headers, peer) is not None
        body, etag = self._served[known]
        headers = {
            "ETag": etag,
            "Cache-Control": "public, max-age=300" if self.auth is None else "private, max-age=300",
            "Last-Modified": self.modified,
        }
        if self.auth is not None:
            headers["Vary"] = "X-API-Key, Authorization"
        if etag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)

    async def jwks(self, request: Request) -> Response:
        """The active public keys (a retired key disappears from here)."""
        body = json.dumps(self.trust.identity.jwks(), separators=(",", ":"))
        headers = {"Cache-Control": "public, max-age=60"}
        return Response(body, media_type="application/jwk-set+json", headers=headers)
