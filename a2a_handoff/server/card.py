"""`GET /.well-known/agent-card.json`: the agent card, cacheable.

Served with `ETag`, `Cache-Control` and `Last-Modified`; a request whose `If-None-Match`
names the current ETag gets `304 Not Modified`.
"""

from __future__ import annotations

import email.utils
import hashlib
import time

from starlette.requests import Request
from starlette.responses import Response

from a2a_handoff.protocol.agent_card import AgentCard

CARD_PATH = "/.well-known/agent-card.json"


class CardRoute:
    """Serves one card; its body and validators are computed once."""

    def __init__(self, card: AgentCard) -> None:
        self.card = card
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
