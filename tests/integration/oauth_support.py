"""A real OAuth2 token endpoint (`tests.oauth_token_server`) and the files that name its
client, for the tests of outbound tokens."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support import ROOT, free_port

CLIENT_ID = "triage-client"
CLIENT_SECRET = "s3cret-of-the-test-client"


@dataclass
class TokenServer:
    """The token endpoint's process and address."""

    port: int
    proc: subprocess.Popen[bytes]

    @property
    def token_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/token"

    def reset(self, prefix: str, expires_in: int = 3600) -> None:
        """Forget what it was asked; issue `PREFIXtoken-1`, `PREFIXtoken-2`, … from now on."""
        body = {"prefix": prefix, "expires_in": expires_in}
        httpx.post(f"http://127.0.0.1:{self.port}/reset", json=body, timeout=5)

    def requests(self) -> list[dict[str, Any]]:
        """Every token request made to it so far (issued or refused)."""
        answer = httpx.get(f"http://127.0.0.1:{self.port}/requests", timeout=5)
        asked: list[dict[str, Any]] = answer.json()["requests"]
        return asked


@contextmanager
def token_server() -> Iterator[TokenServer]:
    """The token endpoint on 127.0.0.1, started and stopped: tokens `token-1`, `token-2`, …"""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "tests.oauth_token_server",
        f"--port={port}",
        f"--client-id={CLIENT_ID}",
        f"--client-secret={CLIENT_SECRET}",
    ]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=log)
        try:
            _wait_ready(port, proc, log)
            yield TokenServer(port, proc)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def _wait_ready(port: int, proc: subprocess.Popen[bytes], log: Any) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"the token server exited: {log.read().decode()[-2000:]}")
        try:
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise TimeoutError("the token server did not start")


def client_file(
    path: Path,
    token_url: str,
    audience: str,
    *,
    secret: str = CLIENT_SECRET,
    mode: int = 0o600,
) -> Path:
    """The JSON file naming the OAuth2 client (`--credential NAME=oauth2:@FILE`)."""
    document = {
        "token_url": token_url,
        "client_id": CLIENT_ID,
        "client_secret": secret,
        "audience": audience,
    }
    path.write_text(json.dumps(document))
    os.chmod(path, mode)
    return path


def auth_keys(path: Path, **principals: str) -> Path:
    """An `--auth-keys` file: `principal=token` lines (the tokens the peer accepts)."""
    path.write_text("".join(f"{p}={k}\n" for p, k in principals.items()))
    os.chmod(path, 0o600)
    return path
