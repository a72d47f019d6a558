"""`GET /.well-known/agent-card.json`: the agent card, cacheable.

Served with `ETag`, `Cache-Control` and `Last-Modified`; a request whose `If-None-Match`
names the current ETag gets `304 Not Modified`. The card is A2A 1.0; with `v03_fields` it
also carries the members an A2A 0.3 client needs to find the JSON-RPC endpoint (served so at
`/.well-known/agent.json`, the 0.3 era's path).
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import time

from starlette.requests import Request
from starlette.responses import Response

from a2a_handoff.protocol.agent_card import AgentCard
from a2a_handoff.protocol.v03 import card_v03

CARD_PATH = "/.well-known/agent-card.json"
V03_CARD_PATH = "/.well-known/agent.json"


class CardRoute:
    """Serves one card; its body and validators are computed once."""

    def __init__(self, card: AgentCard, *, v03_fields: bool = False) -> None:
        self.card = card
        if v03_fields:
            dumped = card.dump()
            self.body = json.dumps({**dumped, **card_v03(dumped)}).encode()
        else:
            self.body = card.dump_json().encode()
        self.etag = '"' + hashlib.sha256(self.body).hexdigest()[:32] + '"'
        self.modified = email.utils.formatdate(time.time(), usegmt=True)

    async def get(self, request: Request) -> Response:
        headers = {
            "ETag": self.etag,
            "Cache-Control": "public, max-age=300",
            "Last-Modified": self.modified,
        }
        if self.etag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=headers)
        return Response(self.body, media_type="application/json", headers=headers)
