"""Fixtures the integration tests share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.handoff_support import sqlite_stores
from tests.postgres_support import PostgresDatabase
from tests.redis_support import RedisServer


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], str]:
    """Where the agents keep their state: their own SQLite files, one Redis, or one
    PostgreSQL database (a key prefix or a schema each)."""
    if request.param == "sqlite":
        return sqlite_stores(tmp_path)
    server: RedisServer | PostgresDatabase = request.getfixturevalue(
        "redis_server" if request.param == "redis" else "postgres_database"
    )
    urls: dict[str, str] = {}
    return lambda name: urls.setdefault(name, server.store_url())
