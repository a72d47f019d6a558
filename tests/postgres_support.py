"""Real PostgreSQL for the tests: a database of their own on the machine's server, or a
private server (`initdb`) on a free port that a test may kill, pause and restart."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tests.support import free_port

HOST = os.environ.get("A2A_TEST_PGHOST", "127.0.0.1")
PORT = int(os.environ.get("A2A_TEST_PGPORT", "5432"))
USER = os.environ.get("A2A_TEST_PGUSER", "postgres")  # trust auth on 127.0.0.1
BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def binary(name: str) -> str:
    found = shutil.which(name) or next(
        (str(d / name) for d in BIN_DIRS if (d / name).exists()), None
    )
    if found is None:
        raise RuntimeError(f"{name} not found: install PostgreSQL (apt-get install postgresql)")
    return found


def psql(sql: str, port: int = PORT, database: str = "postgres") -> str:
    done = subprocess.run(
        [
            binary("psql"),
            "-h",
            HOST,
            "-p",
            str(port),
            "-U",
            USER,
            "-d",
            database,
            "-v",
            "ON_ERROR_STOP=1",
            "-Atc",
            sql,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        raise RuntimeError(f"psql {sql!r}: {done.stderr.strip()}")
    return done.stdout.strip()


@dataclass
class PostgresDatabase:
    """A database of the tests' own with a unique name, dropped when done."""

    port: int = PORT
    name: str = field(default_factory=lambda: f"a2a_test_{uuid.uuid4().hex[:12]}")

    def create(self) -> PostgresDatabase:
        psql(f"CREATE DATABASE {self.name}", self.port)
        return self

    def drop(self) -> None:
        psql(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)", self.port)

    def url(self, schema: str | None = None) -> str:
        base = f"postgresql://{USER}@{HOST}:{self.port}/{self.name}"
        return f"{base}?schema={schema}" if schema else base

    def store_url(self) -> str:
        """A URL with a fresh schema: each user of it sees an empty store."""
        return self.url(f"t{uuid.uuid4().hex[:12]}")


@dataclass
class PostgresServer:
    """A private PostgreSQL server (initdb) on a free 127.0.0.1 port: killable, pausable,
    restartable. Run as the `postgres` user when the tests run as root (initdb refuses
    root)."""

    port: int = field(default_factory=free_port)
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="a2a-pg-")))
    proc: subprocess.Popen[bytes] | None = None
    options: tuple[str, ...] = ()  # more `-c name=value` settings for the server

    def _as_owner(self, cmd: list[str]) -> list[str]:
        if os.geteuid() != 0:
            return cmd
        return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", *cmd]

    def init(self) -> PostgresServer:
        os.chmod(self.dir, 0o700)
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        subprocess.run(
            self._as_owner(
                [
                    binary("initdb"),
                    "-D",
                    str(self.dir / "data"),
                    "-U",
                    USER,
                    "--auth=trust",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        return self

    def start(self, timeout: float = 30.0) -> PostgresServer:
        log = open(self.dir / "postgres.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            self._as_owner(
                [
                    binary("postgres"),
                    "-D",
                    str(self.dir / "data"),
                    "-p",
                    str(self.port),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-k",
                    str(self.dir),
                    "-c",
                    "max_connections=100",
                    *self.options,
                ]
            ),
            stdout=log,
            stderr=log,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.proc.returncode}")
            if self._ready():
                return self
            time.sleep(0.05)
        raise TimeoutError(f"postgres did not start on port {self.port}")

    def _ready(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
        except OSError:
            return False
        done = subprocess.run(
            [binary("pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER],
            capture_output=True,
            timeout=10,
        )
        return done.returncode == 0

    def database(self) -> PostgresDatabase:
        return PostgresDatabase(self.port).create()

    def send(self, signum: int) -> None:
        """A signal to the server and every backend of it (each backend is a session of its
        own: a process group signal would miss them)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        server = psutil.Process(self.proc.pid)
        for process in [server, *server.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.send_signal(signum)

    def kill(self) -> None:
        """kill -9 of the server and its backends at once, as a crash would: the next start
        recovers from the WAL."""
        if self.proc is not None and self.proc.poll() is None:
            self.send(signal.SIGKILL)
            self.proc.wait(10)
        (self.dir / "data" / "postmaster.pid").unlink(missing_ok=True)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.send(signal.SIGCONT)
            self.proc.send_signal(signal.SIGINT)  # fast shutdown (SIGTERM waits for clients)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
