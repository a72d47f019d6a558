"""An OAuth2 token endpoint for the tests: the client-credentials grant (RFC 6749 §4.4), as a
real process (`python -m tests.oauth_token_server --port P …`).

One client (`--client-id`, `--client-secret`), authenticated with HTTP Basic. Tokens are
opaque and deterministic: the n-th token issued is `PREFIXtoken-n`, valid `expires_in`
seconds. A request is answered as RFC 6749 §5.2 says: 401 `invalid_client` for a wrong client
or secret, 400 `unsupported_grant_type`, 400 `invalid_target` without an audience. `GET
/requests` tells what it was asked: every token request (issued or refused), its form without
secrets. `POST /reset` (JSON `prefix`, `expires_in`) forgets them and starts the count again,
so one process serves several tests, each with tokens of its own.
"""

from __future__ import annotations

import argparse
import base64
from typing import Any
from urllib.parse import parse_qsl, unquote_plus

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def make_app(client_id: str, client_secret: str) -> Starlette:
    asked: list[dict[str, Any]] = []
    issued: list[str] = []
    settings: dict[str, Any] = {"prefix": "", "expires_in": 3600}

    def refuse(status: int, error: str) -> JSONResponse:
        return JSONResponse(
            {"error": error, "error_description": f"{error} (test token server)"},
            status_code=status,
            headers={"Cache-Control": "no-store"},
        )

    async def token(request: Request) -> JSONResponse:
        form = dict(parse_qsl((await request.body()).decode()))
        basic = request.headers.get("authorization", "")
        scheme, _, encoded = basic.partition(" ")
        who, _, secret = base64.b64decode(encoded or "Og==").decode().partition(":")
        who, secret = unquote_plus(who), unquote_plus(secret)
        asked.append({"form": form, "client": who, "basic": scheme.lower() == "basic"})
        if scheme.lower() != "basic" or (who, secret) != (client_id, client_secret):
            return refuse(401, "invalid_client")
        if form.get("grant_type") != "client_credentials":
            return refuse(400, "unsupported_grant_type")
        if not form.get("audience"):
            return refuse(400, "invalid_target")
        issued.append(f"{settings['prefix']}token-{len(issued) + 1}")
        lifetime = settings["expires_in"]
        return JSONResponse(
            {"access_token": issued[-1], "token_type": "Bearer", "expires_in": lifetime},
            headers={"Cache-Control": "no-store"},
        )

    async def requests(request: Request) -> JSONResponse:
        return JSONResponse({"requests": asked, "issued": issued})

    async def reset(request: Request) -> JSONResponse:
        asked.clear()
        issued.clear()
        settings.update(await request.json())
        return JSONResponse(settings)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/token", token, methods=["POST"]),
            Route("/requests", requests),
            Route("/reset", reset, methods=["POST"]),
            Route("/health", health),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--client-secret", required=True)
    args = parser.parse_args()
    app = make_app(args.client_id, args.client_secret)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
