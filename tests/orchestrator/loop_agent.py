"""A deliberately misconfigured A2A agent for the loop-guard test (run as a process).

Every task it has is TRANSFERRED to its peer's task, and the peer's to it: following the
pointers never ends unless the follower guards against loops. No handoff protocol behind it.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from a2a_handoff import HANDOFF_EXTENSION_URI

URI = "urn:a2a-handoff:ext:handoff:v1"


def build(name: str, url: str, peer_name: str, peer_url: str) -> Starlette:
    def task(task_id: str) -> dict[str, Any]:
        pointer = {
            "agentUrl": peer_url,
            "agentName": peer_name,
            "taskId": f"{peer_name}-1",
            "contextId": "loop",
            "reason": "misconfigured",
            "handoffId": "h",
        }
        return {
            "id": task_id,
            "contextId": "loop",
            "status": {"state": "TASK_STATE_TRANSFERRED"},
            "metadata": {URI: {"state": "TRANSFERRED", "transfer": pointer}},
        }

    async def rpc(request: Request) -> Response:
        body = await request.json()
        method, rid = body["method"], body.get("id")
        if method == "SendStreamingMessage":
            frame = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"task": task(f"{name}-1")}})
            return Response(f"id: 1\ndata: {frame}\n\n", media_type="text/event-stream")
        if method == "SubscribeToTask":
            error = {"code": -32004, "message": "terminal"}
            return JSONResponse({"jsonrpc": "2.0", "id": rid, "error": error})
        if method == "GetTask":
            return JSONResponse({"jsonrpc": "2.0", "id": rid, "result": task(body["params"]["id"])})
        return JSONResponse(
            {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "?"}}
        )

    async def card(request: Request) -> Response:
        return JSONResponse(
            {
                "name": name,
                "description": "loops",
                "version": "1",
                "supportedInterfaces": [
                    {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
                ],
                "capabilities": {
                    "streaming": True,
                    "extensions": [
                        # Each trusts the other (that is the misconfiguration): the
                        # pointers are followed.
                        {"uri": HANDOFF_EXTENSION_URI, "params": {"peers": [peer_url]}},
                    ],
                },
            }
        )

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "healthy"})

    return Starlette(
        routes=[
            Route("/", rpc, methods=["POST"]),
            Route("/.well-known/agent-card.json", card),
            Route("/health", health),
        ]
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--peer-name", required=True)
    parser.add_argument("--peer-url", required=True)
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}/"
    app = build(args.name, url, args.peer_name, args.peer_url)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
