"""Push notifications end to end: real agents, a real receiver, kill -9, every store."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from joserfc.jwk import OKPKey

from a2a_handoff.push import PUSH_TYP
from a2a_handoff.trust.signing import verify_detached
from tests.integration.handoff_support import wait_for
from tests.postgres_support import PostgresDatabase
from tests.push_receiver import received
from tests.redis_support import RedisServer
from tests.support import ROOT, AgentProcess, free_port

Json = dict[str, Any]
SECRET = "s3cret-for-the-hook"


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'echo.db'}"
    server: RedisServer | PostgresDatabase = request.getfixturevalue(
        "redis_server" if request.param == "redis" else "postgres_database"
    )
    return server.store_url()


class Receiver:
    """`tests.push_receiver` in a process of its own: down until started."""

    def __init__(self, log: Path, fail_first: bool = False) -> None:
        self.port = free_port()
        self.log = log
        self.fail_first = fail_first
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> None:
        cmd = [sys.executable, "-m", "tests.push_receiver", "--port", str(self.port),
               "--log", str(self.log)] + (["--fail-first"] if self.fail_first else [])  # fmt: skip
        self.proc = subprocess.Popen(cmd, cwd=ROOT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    hook = Receiver(tmp_path / "received.jsonl", fail_first=True)
    yield hook
    hook.stop()


def send(agent: AgentProcess, text: str, **extra: Any) -> Json:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    params: Json = {"message": {**message, **extra.pop("message", {})}, **extra}
    answer = agent.rpc("SendMessage", params)
    assert "result" in answer, answer
    task: Json = answer["result"]["task"]  # type: ignore[index]
    return task


def health(agent: AgentProcess) -> Json:
    report: Json = httpx.get(agent.url + "health", timeout=5).json()
    return report


def by_delivery(entries: list[Json]) -> dict[str, Json]:
    """The requests deduplicated by delivery id, as a receiver would."""
    return {e["headers"]["x-a2a-delivery-id"]: e for e in entries}


def state_of(body: bytes) -> str:
    item = json.loads(body)
    status = item.get("statusUpdate", item.get("task", {})).get("status", {})
    return str(status.get("state"))


def test_every_status_change_reaches_a_receiver_down_then_up_across_a_kill_9(
    store_url: str, receiver: Receiver, tmp_path: Path
) -> None:
    agent = AgentProcess(
        "echo", store_url, extra=["--push-allow", "127.0.0.1", "--push-retry-max", "0.3"],
        log_path=tmp_path / "echo.log",
    )  # fmt: skip
    agent.start()
    try:
        config = {
            "id": "hook",
            "url": receiver.url,
            "token": "tok-1",
            "authentication": {"scheme": "Bearer", "credentials": SECRET},
        }
        task = send(agent, "ask: your name?", configuration={"taskPushNotificationConfig": config})
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        wait_for(lambda: health(agent)["push"]["failedAttempts"] >= 2)  # the receiver is down
        agent.kill()
        agent.start()
        done = send(agent, "Ada", message={"taskId": task["id"], "contextId": task["contextId"]})
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        receiver.start()

        def finished() -> Json | None:
            answer = agent.rpc("ListPushDeliveries", {"taskId": task["id"]})
            result: Json = answer["result"]  # type: ignore[assignment]
            return result if result["configs"][0]["done"] else None

        history = wait_for(finished, timeout=60)
        jwks = httpx.get(agent.url + ".well-known/jwks.json", timeout=5).json()
    finally:
        agent.stop()

    entries = received(receiver.log)
    unique = by_delivery(entries)
    assert len(entries) > len(unique)  # the receiver saw duplicates (it failed each first try)
    seqs = sorted(int(did.rsplit(":", 1)[1]) for did in unique)
    delivered = [d for d in history["deliveries"] if d["outcome"] == "delivered"]
    assert seqs == [d["seq"] for d in delivered]  # none lost, none given up
    assert len(delivered) == len(history["deliveries"])
    states = [state_of(unique[f"{task['id']}:hook:{seq}"]["body"]) for seq in seqs]
    assert states == [
        "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_WORKING", "TASK_STATE_COMPLETED",
    ]  # fmt: skip
    keys = {k["kid"]: OKPKey.import_key(k) for k in jwks["keys"]}
    for entry in entries:
        headers = entry["headers"]
        assert headers["authorization"] == f"Bearer {SECRET}"
        assert headers["x-a2a-notification-token"] == "tok-1"
        assert headers["content-type"] == "application/json"
        verify_detached(headers["x-a2a-signature"], entry["body"], keys, PUSH_TYP)


def test_a_receiver_failing_past_the_bound_is_given_up_and_reported(
    tmp_path: Path,
) -> None:
    hook = Receiver(tmp_path / "never.jsonl")  # never started
    agent = AgentProcess(
        "echo", f"sqlite:///{tmp_path / 'echo.db'}", log_path=tmp_path / "echo.log",
        extra=["--push-allow", "127.0.0.1", "--push-give-up", "1", "--push-retry-max", "0.2"],
    )  # fmt: skip
    agent.start()
    try:
        config = {"url": hook.url}
        task = send(agent, "hello", configuration={"taskPushNotificationConfig": config})
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"

        def given_up() -> Json | None:
            answer = agent.rpc("ListPushDeliveries", {"taskId": task["id"]})
            result: Json = answer["result"]  # type: ignore[assignment]
            return result if result["configs"][0]["done"] else None

        history = wait_for(given_up, timeout=30)
        report = health(agent)["push"]
        metrics = httpx.get(agent.url + "metrics", timeout=5).text
    finally:
        agent.stop()
    outcomes = {d["outcome"] for d in history["deliveries"]}
    assert outcomes == {"given_up"}
    assert all("ConnectError" in d["error"] for d in history["deliveries"])
    assert report["givenUp"] == len(history["deliveries"]) >= 3
    assert report["lastGivenUp"]["deliveryId"].startswith(task["id"])
    assert f'a2a_push_deliveries_total{{outcome="given_up"}} {report["givenUp"]}.0' in metrics


PRIVATE = (
    "https://10.1.2.3/hook",
    "https://127.0.0.1/hook",
    "https://localhost/h",
    "https://169.254.169.254/latest",
    "https://[::1]/h",
    "https://[fe80::1]/h",
    "https://100.64.0.1/h",
    "https://224.0.0.1/h",
    "https://0.0.0.0/h",
    "https://[::ffff:10.0.0.1]/h",
    "http://example.com/h",
    "https://user:pw@example.com/h",
)


def test_a_webhook_at_a_private_address_is_refused(tmp_path: Path) -> None:
    agent = AgentProcess("echo", f"sqlite:///{tmp_path / 'echo.db'}")
    agent.start()
    try:
        card = httpx.get(agent.url + ".well-known/agent-card.json", timeout=5).json()
        assert card["capabilities"]["pushNotifications"] is True
        task = send(agent, "hello")
        for url in PRIVATE:
            params = {"taskId": task["id"], "url": url}
            answer = agent.rpc("CreateTaskPushNotificationConfig", params)
            assert answer["error"]["code"] == -32602, (url, answer)  # type: ignore[index]
        config = {"taskPushNotificationConfig": {"url": "https://192.168.1.1/"}}
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "x"}]}
        answer = agent.rpc("SendMessage", {"message": message, "configuration": config})
        assert answer["error"]["code"] == -32602  # type: ignore[index]
        listed = agent.rpc("ListTaskPushNotificationConfigs", {"taskId": task["id"]})
        assert listed["result"] == {"configs": [], "nextPageToken": ""}
    finally:
        agent.stop()
