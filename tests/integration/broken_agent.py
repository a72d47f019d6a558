"""A test agent that takes every handoff and fails it with -32603 (run as a process).

python -m tests.integration.broken_agent billing --port P --store IGNORED

It presents itself as `billing` (offering `refunds`, `invoices`) and answers every
SendMessage with a JSON-RPC internal error, as a target whose handler keeps crashing would.
`GET /count` tells how many SendMessage calls it answered.
"""

from __future__ import annotations

import argparse

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from a2a_handoff import build_card


def build(name: str, url: str) -> Starlette:
    calls = {"SendMessage": 0}
    card = build_card(name, url, capabilities=("invoices", "refunds")).dump_json()

    async def rpc(request: Request) -> Response:
        body = await request.json()
        calls[body.get("method", "")] = calls.get(body.get("method", ""), 0) + 1
        error = {"code": -32603, "message": "internal error: the refund service crashed"}
        return JSONResponse({"jsonrpc": "2.0", "id": body.get("id"), "error": error})

    async def agent_card(request: Request) -> Response:
        return Response(card, media_type="application/json")

    async def count(request: Request) -> Response:
        return JSONResponse(calls)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "healthy"})

    return Starlette(
        routes=[
            Route("/", rpc, methods=["POST"]),
            Route("/.well-known/agent-card.json", agent_card),
            Route("/count", count),
            Route("/health", health),
        ]
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--store", default="")
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}/"
    uvicorn.run(build(args.name, url), host="127.0.0.1", port=args.port, log_level="warning")
