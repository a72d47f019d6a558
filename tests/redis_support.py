"""A real redis-server for the tests, on a free 127.0.0.1 port (never the machine's own)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import free_port


@dataclass
class RedisServer:
    """`redis-server` with its append-only file fsync'd on every write; killable, restartable.
    `extra`: more options, after those (`--appendonly no` makes one that loses writes)."""

    dir: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    extra: tuple[str, ...] = ()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def store_url(self) -> str:
        """A URL with a fresh key prefix: each user of it sees an empty store."""
        return f"{self.url()}?prefix=t{uuid.uuid4().hex[:12]}:"

    def start(self, timeout: float = 10.0) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError(
                "redis-server is not installed: run scripts/bootstrap (it installs it with apt)"
            )
        self.dir.mkdir(parents=True, exist_ok=True)
        cmd = [
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--dir",
            str(self.dir),
            "--daemonize",
            "no",
            "--protected-mode",
            "no",
            *self.extra,
        ]
        log = open(self.dir / "redis.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            if self._ping():
                return self
            time.sleep(0.02)
        raise TimeoutError(f"redis-server did not start on port {self.port}")

    def _ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL: Redis gets no chance to flush anything more."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
