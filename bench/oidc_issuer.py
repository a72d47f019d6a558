"""A token issuer for the bench's `ours-oidc` row (bench/run): OpenID Connect discovery and a
JWKS on 127.0.0.1, and one RS256 access token (typ at+jwt, an hour long) for the audience
written to a file, which wrk then sends on every request. What it measures is the agent's
cost of a bearer token seen before (a lookup), not the first verification.

    python bench/oidc_issuer.py --port P --audience http://127.0.0.1:A/ --token-file F
"""

from __future__ import annotations

import argparse
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from joserfc import jws
from joserfc.jwk import RSAKey


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--audience", required=True)
    parser.add_argument("--token-file", type=Path, required=True)
    args = parser.parse_args()
    issuer = f"http://127.0.0.1:{args.port}"
    key = RSAKey.generate_key(2048, parameters={"kid": "bench", "use": "sig", "alg": "RS256"})
    documents = {
        "/.well-known/openid-configuration": {"issuer": issuer, "jwks_uri": issuer + "/jwks"},
        "/jwks": {"keys": [key.as_dict(private=False)]},
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            document = documents.get(self.path)
            body = json.dumps(document).encode()
            self.send_response(200 if document else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    now = int(time.time())
    claims = {"iss": issuer, "aud": args.audience, "sub": "bench", "iat": now, "exp": now + 3600}
    header = {"alg": "RS256", "typ": "at+jwt", "kid": "bench"}
    token = jws.serialize_compact(header, json.dumps(claims), key, algorithms=["RS256"])
    args.token_file.write_text(token)  # once serving: the agent may ask at once
    server.serve_forever()


if __name__ == "__main__":
    main()
