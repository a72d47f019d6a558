"""A real OpenID provider for the tests: `oidc-provider` (OpenID Certified, from the npm
registry) run by node as a process on 127.0.0.1 (tests/oidc/provider.mjs), issuing RFC 9068
access tokens by the client-credentials grant. Its signing keys are made here and written to
a file it reads, so a test can rotate them (restart it with a new key) and sign tokens with
them the provider would never issue (expired, for another issuer)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
from joserfc import jws
from joserfc.jwk import RSAKey

from tests.support import ROOT, free_port

HERE = ROOT / "tests" / "oidc"


def install() -> None:
    """oidc-provider in tests/oidc/node_modules (scripts/bootstrap installs it; done here
    when missing, once across the test workers)."""
    if (HERE / "node_modules" / "oidc-provider").is_dir():
        return
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise RuntimeError("the OIDC tests need node and npm (scripts/bootstrap installs them)")
    with open(HERE / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (HERE / "node_modules" / "oidc-provider").is_dir():
            subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--silent"],
                cwd=HERE,
                check=True,
                timeout=300,
            )


def new_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})


class OidcProvider:
    """One oidc-provider process; `clients` get tokens (secret: "<id>-secret")."""

    def __init__(
        self, workdir: Path, audience: str, clients: Sequence[str], port: int | None = None
    ) -> None:
        install()
        self.workdir = workdir
        self.audience = audience
        self.clients = list(clients)
        self.port = port or free_port()
        self.keys = [new_key("key-1")]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> OidcProvider:
        keys_file = self.workdir / "provider-keys.json"
        keys_file.write_text(json.dumps({"keys": [k.as_dict(private=True) for k in self.keys]}))
        env = {
            **os.environ,
            "OIDC_PORT": str(self.port),
            "OIDC_KEYS": str(keys_file),
            "OIDC_AUDIENCE": self.audience,
            "OIDC_CLIENTS": json.dumps(self.clients),
        }
        with open(self.workdir / "provider.log", "ab") as log:
            self.proc = subprocess.Popen(
                ["node", str(HERE / "provider.mjs")], cwd=HERE, env=env, stdout=log, stderr=log
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"oidc-provider exited: {self.log_tail()}")
            try:
                if httpx.get(self.issuer + "/.well-known/openid-configuration").status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"oidc-provider did not start: {self.log_tail()}")

    def log_tail(self) -> str:
        path = self.workdir / "provider.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def rotate(self) -> None:
        """A new signing key, the old one withdrawn: the provider restarted with it."""
        self.stop()
        self.keys = [new_key(f"key-{len(self.keys) + 1}-{os.urandom(4).hex()}")]
        self.start()

    def token(self, client: str, resource: str | None = None) -> str:
        """An access token for `client` by the client-credentials grant."""
        form = {
            "grant_type": "client_credentials",
            "client_id": client,
            "client_secret": f"{client}-secret",
        }
        if resource is not None:
            form["resource"] = resource
        response = httpx.post(self.issuer + "/token", data=form, timeout=10)
        response.raise_for_status()
        token: str = response.json()["access_token"]
        return token

    def sign(
        self,
        claims: Mapping[str, Any],
        *,
        key: RSAKey | None = None,
        header: Mapping[str, Any] | None = None,
    ) -> str:
        """A token signed RS256 with `key` (default: the provider's own signing key)."""
        key = key or self.keys[0]
        head = {"alg": "RS256", "typ": "at+jwt", "kid": key.kid, **(header or {})}
        return jws.serialize_compact(head, json.dumps(claims), key, algorithms=["RS256"])

    def claims(self, subject: str, **changes: Any) -> dict[str, Any]:
        """The claims the provider would issue to `subject` now, with `changes`."""
        now = int(time.time())
        return {
            "sub": subject,
            "iss": self.issuer,
            "aud": self.audience,
            "iat": now,
            "exp": now + 300,
            "client_id": subject,
            **changes,
        }
