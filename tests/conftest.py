from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.postgres_support import PostgresDatabase
from tests.redis_support import RedisServer
from tests.support import AgentProcess

# Every test runs under a watchdog that ends the run when a test outlives its timeout; the
# suite spreads over its workers as tests.scheduling says.
pytest_plugins = ["tests.timeouts", "tests.scheduling"]

# Files the tests write (API keys, keys files, secrets) are their user's alone, as the docs
# ask of an operator: an agent refuses files of secrets that other users can read (the tests
# that show it make such a file on purpose).
os.umask(0o077)


@pytest.fixture
def anyio_backend() -> str:
    # aiosqlite and redis.asyncio run on asyncio only.
    return "asyncio"


@pytest.fixture
def echo_agent(tmp_path: Path) -> Iterator[AgentProcess]:
    """A real echo agent process on a fresh SQLite file."""
    agent = AgentProcess("echo", f"sqlite:///{tmp_path / 'echo.db'}")
    agent.log_path = tmp_path / "echo.log"
    agent.start()
    try:
        yield agent
    finally:
        agent.stop()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for the session; tests keep apart by key prefix (`store_url()`)."""
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[PostgresDatabase]:
    """One database of the session's own on the machine's PostgreSQL (127.0.0.1:5432), dropped
    at the end; tests keep apart by schema (`store_url()`)."""
    database = PostgresDatabase().create()
    try:
        yield database
    finally:
        database.drop()
