"""Operations on a store, as an operator runs them: `python -m a2a_handoff db status` and
`db upgrade` (their output and exit codes), an agent refusing to start on a store behind its
code (saying the command to run), and an agent run with `--retain` deleting old finished
tasks while a new one stays. Real processes on 127.0.0.1; real SQLite, PostgreSQL and
Redis."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import asyncpg
import pytest

from a2a_handoff.__main__ import main as a2a_handoff_main
from a2a_handoff.protocol.models import StreamResponse
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores import SqliteTaskStore
from a2a_handoff.stores import _sqlite_schema as sqlite_schema
from a2a_handoff.stores._postgres_schema import MIGRATIONS, VERSION
from a2a_handoff.stores.base import Commit, TaskRecord
from a2a_handoff.stores.conformance.samples import create, moved, new_task, status
from a2a_handoff.stores.redis import RedisTaskStore
from tests.postgres_support import PostgresDatabase
from tests.redis_support import RedisServer
from tests.support import ROOT, AgentProcess

pytestmark = pytest.mark.anyio


def db(*args: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "a2a_handoff", "db", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout, done.stderr


def previous_sqlite(path: Path) -> str:
    """A SQLite file of the previous schema version; its store URL."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        sqlite_schema.apply(conn, upto=sqlite_schema.VERSION - 1)
    finally:
        conn.close()
    return f"sqlite:///{path}"


@pytest.mark.timeout(60)
def test_db_status_and_upgrade_report_and_apply_the_migrations(tmp_path: Path) -> None:
    url = previous_sqlite(tmp_path / "billing.db")
    code, out, _ = db("status", "--store", url)
    assert code == 1  # behind: an agent would refuse it
    assert f"SQLite file {tmp_path / 'billing.db'} is at version 1" in out
    assert "pending migrations:" in out
    assert "2  indexes retention deletes by" in out
    code, out, _ = db("status", "--store", url, "--json")
    report = json.loads(out)
    assert (code, report["current"], report["code"], report["upToDate"]) == (1, 1, 2, False)
    assert [m["version"] for m in report["pending"]] == [2]

    code, out, _ = db("upgrade", "--store", url)
    assert code == 0
    assert "upgraded from version 1 to 2" in out
    assert "applied 2  indexes retention deletes by" in out
    code, out, _ = db("upgrade", "--store", url)  # twice: nothing to do
    assert (code, "up to date" in out, "applied" in out) == (0, True, False)
    code, out, _ = db("status", "--store", url, "--json")
    assert (code, json.loads(out)["pending"], json.loads(out)["upToDate"]) == (0, [], True)


@pytest.mark.timeout(60)
def test_db_usage_errors_exit_64(tmp_path: Path) -> None:
    assert db("status")[0] == 64  # no --store
    code, _, err = db("status", "--store", "memory://")
    assert (code, "keeps no versioned schema" in err) == (64, True)
    code, _, err = db("upgrade", "--store", "nosuch://x")
    assert (code, "unknown store URL" in err) == (64, True)


@pytest.mark.timeout(60)
async def test_db_upgrade_on_postgres(postgres_database: PostgresDatabase) -> None:
    schema = f"v{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(postgres_database.url())
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        for step in MIGRATIONS[: VERSION - 1]:
            await conn.execute(step(f'"{schema}"'))
        await conn.execute(f'CREATE TABLE "{schema}".schema_version (version integer)')
        await conn.execute(f'INSERT INTO "{schema}".schema_version VALUES ({VERSION - 1})')
    finally:
        await conn.close()
    url = postgres_database.url(schema)
    code, out, _ = db("status", "--store", url, "--json")
    assert (code, json.loads(out)["current"]) == (1, VERSION - 1)
    code, out, _ = db("upgrade", "--store", url)
    assert (code, f"upgraded from version {VERSION - 1} to {VERSION}" in out) == (0, True)
    code, out, _ = db("upgrade", "--store", url)
    assert (code, "up to date" in out) == (0, True)


@pytest.mark.timeout(60)
def test_an_agent_on_a_store_behind_refuses_to_start_naming_the_command(tmp_path: Path) -> None:
    url = previous_sqlite(tmp_path / "echo.db")
    assert a2a_handoff_main(["keys", "init", "--store", url, "--agent", "echo"]) == 0
    agent = AgentProcess("echo", url)
    agent.start(wait=False)
    assert agent.proc is not None
    assert agent.proc.wait(30) == 64
    said = agent._log().read_text()
    agent.stop()
    assert f"python -m a2a_handoff db upgrade --store '{url}'" in said
    assert db("upgrade", "--store", url)[0] == 0
    agent.start()  # upgraded: it serves
    agent.stop()


@pytest.mark.timeout(60)
async def test_an_agent_on_postgres_behind_refuses_to_start(
    postgres_database: PostgresDatabase,
) -> None:
    schema = f"v{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(postgres_database.url())
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        for step in MIGRATIONS[: VERSION - 1]:
            await conn.execute(step(f'"{schema}"'))
        await conn.execute(f'CREATE TABLE "{schema}".schema_version (version integer)')
        await conn.execute(f'INSERT INTO "{schema}".schema_version VALUES ({VERSION - 1})')
    finally:
        await conn.close()
    url = postgres_database.url(schema)
    agent = AgentProcess("echo", url)
    agent.start(wait=False)
    assert agent.proc is not None
    assert agent.proc.wait(30) == 64
    said = agent._log().read_text()
    agent.stop()
    assert f"python -m a2a_handoff db upgrade --store '{url}'" in said


async def finished_long_ago(store: SqliteTaskStore) -> str:
    """A task that completed in 2020, as an agent without auth stores it (owner "")."""
    task = new_task()
    old = "2020-01-01T00:00:00.000Z"
    await store.commit(Commit(TaskRecord(task, "", 1, old, old), [StreamResponse(task=task)]))
    done = moved(task, TaskState.COMPLETED)
    record = TaskRecord(done, "", 2, old, old)
    await store.commit(Commit(record, [status(done)], expected_version=1))
    return task.id


async def finished_tasks(path: Path, count: int) -> list[str]:
    async with SqliteTaskStore(path) as store:
        return [await finished_long_ago(store) for _ in range(count)]


@pytest.mark.timeout(60)
def test_an_agent_with_retain_deletes_old_finished_tasks_and_keeps_a_new_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "echo.db"
    url = f"sqlite:///{path}"
    assert a2a_handoff_main(["keys", "init", "--store", url, "--agent", "echo"]) == 0
    old = asyncio.run(finished_tasks(path, 3))
    agent = AgentProcess("echo", url, extra=["--retain", "30s"]).start()
    try:
        message = {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": "hello"}],
        }
        sent = agent.rpc("SendMessage", {"message": message})
        new_id = sent["result"]["task"]["id"]  # type: ignore[index]
        deadline = time.monotonic() + 20
        gone: list[str] = []
        while time.monotonic() < deadline:
            answers = [agent.rpc("GetTask", {"id": task_id}) for task_id in old]
            gone = [a["error"]["code"] for a in answers if "error" in a]  # type: ignore[index]
            if len(gone) == len(old):
                break
            time.sleep(0.1)
        assert gone == [-32001] * len(old)  # TaskNotFound: deleted by the first sweep
        kept = agent.rpc("GetTask", {"id": new_id})
        assert kept["result"]["status"]["state"] == "TASK_STATE_COMPLETED"  # type: ignore[index]
    finally:
        agent.stop()
    with sqlite3.connect(path) as conn:
        left = {row[0] for row in conn.execute("SELECT DISTINCT task_id FROM task_events")}
    assert left == {new_id}


@pytest.mark.timeout(60)
async def test_db_reports_and_moves_a_redis_key_layout(redis_server: RedisServer) -> None:
    url = f"{redis_server.store_url()}&durability=none"
    async with RedisTaskStore.from_url(url) as store:
        await create(store)
        # As layout 1 left a prefix: no version kept.
        await store._redis.delete(f"{store.prefix}layout", f"{store.prefix}layout:compat")
    code, out, _ = db("status", "--store", url)
    assert code == 1
    assert "is at version 1; this code is at version 2" in out
    assert "2  pending handoffs by creation, the ledger by context (breaking)" in out
    code, out, _ = db("upgrade", "--store", url)
    assert (code, "upgraded from version 1 to 2" in out) == (0, True)
    code, out, _ = db("status", "--store", url, "--json")
    assert (code, json.loads(out)["current"], json.loads(out)["upToDate"]) == (0, 2, True)
