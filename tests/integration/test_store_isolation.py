"""One caller's expensive queries fail no one else's work, and one store serves one agent.

- A principal running ListTasks (statusTimestampAfter) from six clients at once over tasks of
  a megabyte each, on a PostgreSQL whose statements may take half a second: /health stays
  healthy, another principal is served, and that principal's running task completes.
- Two agents of different names on one explicit PostgreSQL schema or Redis prefix: the second
  is refused at start, naming both; a replica of the first starts.
- Without an explicit schema or prefix, each agent name gets its own.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
import pytest

from a2a_handoff.protocol.models import Task
from tests.integration.handoff_support import message, result
from tests.integration.test_replicas import FAST, running
from tests.postgres_support import PostgresDatabase, psql
from tests.redis_support import RedisServer
from tests.support import A2A_HEADERS, AgentProcess

KEYS = "alice=alice-key-0123456789abcdef\nbob=bob-key-0123456789abcdef\n"
ALICE = {"X-API-Key": "alice-key-0123456789abcdef"}
BOB = {"X-API-Key": "bob-key-0123456789abcdef"}


def _big_task(size: int) -> str:
    """A finished task's JSON with an artifact of `size` characters; `@ID@` for its id."""
    text = "".join(uuid.uuid4().hex for _ in range(size // 32))  # not compressible away
    task = Task.model_validate(
        {
            "id": "@ID@",
            "contextId": "ctx-big",
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-01T00:00:00.000Z"},
            "artifacts": [{"artifactId": "a", "parts": [{"text": text}]}],
        }
    )
    return task.dump_json()


async def _fill(database: PostgresDatabase, schema: str, owner: str, count: int) -> None:
    """`count` finished tasks of `owner`, a megabyte each, written straight into the schema."""
    conn = await asyncpg.connect(database.url())
    try:
        columns = {
            row[0]
            for row in await conn.fetch(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_schema = $1 AND table_name = 'tasks'",
                schema,
            )
        }
        status = ", status_at" if "status_at" in columns else ""
        status_value = ", '2026-01-01T00:00:00.000Z'" if status else ""
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        await conn.execute(
            f'INSERT INTO "{schema}".tasks (id, context_id, owner, delegate, state, version,'
            f" created_at, updated_at, body{status})"
            f" SELECT 'big-' || g, 'ctx-big', $2, '', 'TASK_STATE_COMPLETED', 1, $3, $3,"
            f" replace($1, '@ID@', 'big-' || g){status_value}"
            " FROM generate_series(1, $4) AS g",
            _big_task(1_000_000),
            owner,
            now,
            count,
        )
    finally:
        await conn.close()


@pytest.mark.timeout(150)
def test_one_principals_expensive_list_queries_fail_no_one_elses_work(
    postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    schema = f"listing_{uuid.uuid4().hex[:8]}"
    store = f"{postgres_database.url(schema)}&command_timeout=0.5"
    keys = tmp_path / "keys"
    keys.write_text(KEYS)
    echo = AgentProcess("echo", store, extra=(*FAST, f"--auth-keys={keys}"))
    echo.log_path = tmp_path / "echo.log"
    with running(echo):
        asyncio.run(_fill(postgres_database, schema, "alice", 110))
        stop = threading.Event()
        alice_errors: list[tuple[int, dict[str, object]]] = []
        listed = [0]

        def alice() -> None:
            params = {"statusTimestampAfter": "2000-01-01T00:00:00Z", "pageSize": 100}
            body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": params}
            with httpx.Client(timeout=60) as http:
                while not stop.is_set():
                    reply = http.post(echo.url, json=body, headers={**A2A_HEADERS, **ALICE})
                    answer = reply.json()
                    if "error" in answer:
                        alice_errors.append((reply.status_code, answer["error"]))
                    else:
                        listed[0] += 1

        threads = [threading.Thread(target=alice) for _ in range(6)]
        for thread in threads:
            thread.start()
        try:
            # Bob's task runs through the attack: a status update a second, then done.
            sleeping = echo.rpc("SendMessage", message("sleep:4", returnImmediately=True), **BOB)
            task_id = result(sleeping)["task"]["id"]
            health: list[int] = []
            bob_answers: list[dict[str, object]] = []
            deadline = time.monotonic() + 8
            with httpx.Client(timeout=30) as http:
                while time.monotonic() < deadline:
                    health.append(http.get(echo.url + "health").status_code)
                    bob_answers.append(echo.rpc("SendMessage", message("hello"), **BOB))
                    bob_answers.append(echo.rpc("GetTask", {"id": task_id}, **BOB))
        finally:
            stop.set()
            for thread in threads:
                thread.join(60)
        assert alice_errors or listed[0], "the attack never ran"
        assert set(health) == {200}, health
        refused = [a for a in bob_answers if "error" in a]
        assert refused == [], refused[:3]
        task = result(echo.rpc("GetTask", {"id": task_id}, **BOB))
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
        # Alice's own failures, if any, are hers: a slow query or a limit, never "the store
        # is unavailable".
        assert all(status != 503 for status, _ in alice_errors), alice_errors[:3]
        codes = {error["code"] for _, error in alice_errors}
        assert -32105 not in codes, alice_errors[:3]
        assert echo.proc is not None
        assert echo.proc.poll() is None


def _refused(agent: AgentProcess) -> str:
    """The log of an agent that must not start: what it said (a usage error, exit 64, in one
    line: no traceback)."""
    with pytest.raises(RuntimeError, match="exited with 64") as refused:
        agent.start()
    said = str(refused.value)
    assert "Traceback" not in said, said
    return said


@pytest.mark.timeout(90)
@pytest.mark.parametrize("backend", ["postgres", "redis"])
def test_a_second_agent_on_one_schema_or_prefix_is_refused_and_a_replica_is_not(
    backend: str,
    postgres_database: PostgresDatabase,
    redis_server: RedisServer,
    tmp_path: Path,
) -> None:
    if backend == "postgres":
        store = postgres_database.url(f"shared_{uuid.uuid4().hex[:8]}")
    else:
        store = f"{redis_server.url()}?prefix=shared-{uuid.uuid4().hex[:8]}:"
    billing = AgentProcess("billing", store, extra=FAST)
    billing.log_path = tmp_path / "billing.log"
    replica = AgentProcess("billing", store, extra=FAST)
    replica.log_path = tmp_path / "billing-2.log"
    logistics = AgentProcess("logistics", store, extra=FAST)
    logistics.log_path = tmp_path / "logistics.log"
    with running(billing, replica):
        said = _refused(logistics)
        assert "billing" in said, said
        assert "logistics" in said, said
        assert "schema" in said if backend == "postgres" else "prefix" in said, said
        # The replica serves billing's tasks; nothing of logistics was written.
        task = result(billing.rpc("SendMessage", message("hello")))["task"]
        assert result(replica.rpc("GetTask", {"id": task["id"]}))["id"] == task["id"]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("backend", ["postgres", "redis"])
def test_each_agent_name_gets_its_own_default_schema_or_prefix(
    backend: str, redis_server: RedisServer, tmp_path: Path
) -> None:
    database = PostgresDatabase().create() if backend == "postgres" else None
    try:
        store = database.url() if database is not None else redis_server.url(db=11)
        echo = AgentProcess("echo", store, extra=FAST)
        echo.log_path = tmp_path / "echo.log"
        triage = AgentProcess("triage", store, extra=FAST)
        triage.log_path = tmp_path / "triage.log"
        with running(echo, triage):
            task = result(echo.rpc("SendMessage", message("hello")))["task"]
            assert result(echo.rpc("ListTasks", {}))["tasks"][0]["id"] == task["id"]
            assert result(triage.rpc("ListTasks", {}))["tasks"] == []
            if database is not None:
                schemas = psql(
                    "SELECT string_agg(schema_name, ',' ORDER BY schema_name)"
                    " FROM information_schema.schemata WHERE schema_name LIKE 'a2a%'",
                    database=database.name,
                )
                assert schemas.split(",") == ["a2a_echo", "a2a_triage"], schemas
            else:
                import redis as redis_client

                client = redis_client.Redis(port=redis_server.port, db=11)
                try:
                    keys = {k.decode() for k in client.keys("*")}
                finally:
                    client.close()
                assert f"a2a:echo:t:{task['id']}" in keys, sorted(keys)[:10]
                assert any(k.startswith("a2a:triage:") for k in keys), sorted(keys)[:10]
    finally:
        if database is not None:
            database.drop()
