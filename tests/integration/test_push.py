"""Push notifications end to end: real agents, a real receiver, kill -9, every store."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from joserfc.jwk import OKPKey

from a2a_handoff.errors import SignatureError
from a2a_handoff.push import PUSH_TYP
from a2a_handoff.trust.signing import verify_detached
from tests.integration.handoff_support import wait_for
from tests.postgres_support import PostgresDatabase
from tests.push_receiver import SlowReceiver, received
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
        cmd = [
            sys.executable,
            "-m",
            "tests.push_receiver",
            "--port",
            str(self.port),
            "--log",
            str(self.log),
        ] + (["--fail-first"] if self.fail_first else [])
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


def send(agent: AgentProcess, text: str, key: str | None = None, **extra: Any) -> Json:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    params: Json = {"message": {**message, **extra.pop("message", {})}, **extra}
    answer = agent.rpc("SendMessage", params, **as_caller(key))
    assert "result" in answer, answer
    task: Json = answer["result"]["task"]  # type: ignore[index]
    return task


def as_caller(key: str | None) -> dict[str, str]:
    return {} if key is None else {"X-API-Key": key}


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
        "echo",
        store_url,
        extra=["--push-allow", "127.0.0.1", "--push-retry-max", "0.3"],
        log_path=tmp_path / "echo.log",
    )
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
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_WORKING",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
    ]
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
        "echo",
        f"sqlite:///{tmp_path / 'echo.db'}",
        log_path=tmp_path / "echo.log",
        extra=["--push-allow", "127.0.0.1", "--push-give-up", "1", "--push-retry-max", "0.2"],
    )
    agent.start()
    try:
        config = {"id": "config-of-a-caller", "url": hook.url}
        task = send(agent, "hello", configuration={"taskPushNotificationConfig": config})
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"

        def given_up() -> Json | None:
            answer = agent.rpc("ListPushDeliveries", {"taskId": task["id"]})
            result: Json = answer["result"]  # type: ignore[assignment]
            return result if result["configs"][0]["done"] else None

        history = wait_for(given_up, timeout=30)
        whole = health(agent)
        report = whole["push"]
        metrics = httpx.get(agent.url + "metrics", timeout=5).text
    finally:
        agent.stop()
    outcomes = {d["outcome"] for d in history["deliveries"]}
    assert outcomes == {"given_up"}
    assert all("ConnectError" in d["error"] for d in history["deliveries"])
    assert report["givenUp"] == len(history["deliveries"]) >= 3
    # /health is anyone's to read: it counts, and names no task and no config of anyone.
    assert task["id"] not in json.dumps(whole)
    assert "config-of-a-caller" not in json.dumps(whole)
    assert report["lastGivenUpAt"] >= history["deliveries"][0]["at"]
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


# -- fair, bounded and bound to their receiver ------------------------------------------------

MALLORY = "key-of-mallory-000001"
ALICE = "key-of-alice-00000001"
PER_TASK, PER_PRINCIPAL, PER_RECEIVER = 10, 100, 4  # PushSettings' defaults


def two_principals(tmp_path: Path, store_url: str, *extra: str) -> AgentProcess:
    keys = tmp_path / "keys"
    keys.write_text(f"mallory={MALLORY}\nalice={ALICE}\n")
    flags = ["--auth-keys", str(keys), "--push-allow", "127.0.0.1", "--push-retry-max", "0.3"]
    return AgentProcess("echo", store_url, extra=[*flags, *extra], log_path=tmp_path / "echo.log")


def create(agent: AgentProcess, key: str, task_id: str, config: Json) -> Json:
    return agent.rpc(
        "CreateTaskPushNotificationConfig", {"taskId": task_id, **config}, **as_caller(key)
    )


def listed(agent: AgentProcess, key: str, task_id: str) -> list[str]:
    answer = agent.rpc("ListTaskPushNotificationConfigs", {"taskId": task_id}, **as_caller(key))
    return [c["id"] for c in answer["result"]["configs"]]  # type: ignore[index]


def completed_at(log: Path) -> list[Json]:
    """The deliveries a receiver got that report a completed task."""
    return [e for e in received(log) if state_of(e["body"]) == "TASK_STATE_COMPLETED"]


def test_a_slow_receiver_delays_only_its_own_deliveries(tmp_path: Path) -> None:
    slow = SlowReceiver(interval=3.0).start()  # an answer of 45 bytes: over two minutes
    hook = Receiver(tmp_path / "alice.jsonl")
    hook.start()
    agent = two_principals(tmp_path, f"sqlite:///{tmp_path / 'echo.db'}")
    agent.start()
    try:
        # Mallory: as many webhooks as she may have, all on her own tasks, all at the slow one.
        tasks = [send(agent, "ask: your name?", MALLORY) for _ in range(PER_PRINCIPAL // PER_TASK)]
        for task in tasks:
            for n in range(PER_TASK):
                made = create(agent, MALLORY, task["id"], {"id": f"slow-{n}", "url": slow.url})
                assert "result" in made, made
        for task in tasks:  # each config has two status changes to deliver
            send(agent, "Mallory", MALLORY, message={"taskId": task["id"]})
        slow.wait_requests(PER_RECEIVER, timeout=20)  # the slow receiver holds its connections

        # Alice's notification, to a receiver of her own, is delivered meanwhile.
        config = {"taskPushNotificationConfig": {"url": hook.url}}
        alice = send(agent, "hello", ALICE, configuration=config)
        assert alice["status"]["state"] == "TASK_STATE_COMPLETED"
        wait_for(lambda: completed_at(hook.log), timeout=10)
        with slow.changed:
            assert slow.answered == 0  # every slow answer is still trickling
            assert slow.peak <= PER_RECEIVER  # and it never had more connections than that
    finally:
        agent.stop()
        hook.stop()
        slow.close()


def test_configs_beyond_the_caps_are_refused_and_not_stored(store_url: str, tmp_path: Path) -> None:
    agent = two_principals(tmp_path, store_url)
    agent.start()
    url = "http://127.0.0.1:9/hook"  # never called: the tasks wait for input, nothing to deliver
    try:
        tasks = [send(agent, "ask: ?", MALLORY)["id"] for _ in range(PER_PRINCIPAL // PER_TASK + 1)]
        for n in range(PER_TASK):
            assert "result" in create(agent, MALLORY, tasks[0], {"id": f"c{n}", "url": url})
        refused = create(agent, MALLORY, tasks[0], {"id": "one-more", "url": url})
        assert refused["error"]["code"] == -32602, refused  # type: ignore[index]
        assert "per task" in refused["error"]["message"]  # type: ignore[index]
        assert listed(agent, MALLORY, tasks[0]) == [f"c{n}" for n in range(PER_TASK)]
        changed = create(agent, MALLORY, tasks[0], {"id": "c0", "url": url, "token": "t"})
        assert "result" in changed, changed  # replacing a config adds none

        # A follow-up message bringing one more config is refused before it runs.
        config = {"taskPushNotificationConfig": {"id": "on-send", "url": url}}
        message = {
            "taskId": tasks[0],
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": "Mallory"}],
        }
        answer = agent.rpc(
            "SendMessage", {"message": message, "configuration": config}, **as_caller(MALLORY)
        )
        assert answer["error"]["code"] == -32602, answer  # type: ignore[index]
        task = agent.rpc("GetTask", {"id": tasks[0]}, **as_caller(MALLORY))["result"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"  # type: ignore[index]

        for task_id in tasks[1:-1]:
            for n in range(PER_TASK):
                assert "result" in create(agent, MALLORY, task_id, {"id": f"c{n}", "url": url})
        refused = create(agent, MALLORY, tasks[-1], {"id": "c0", "url": url})
        assert refused["error"]["code"] == -32602, refused  # type: ignore[index]
        assert "per caller" in refused["error"]["message"]  # type: ignore[index]
        assert listed(agent, MALLORY, tasks[-1]) == []
        # A new task's message bringing one is refused before the task is made.
        config = {"taskPushNotificationConfig": {"url": url}}
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "x"}]}
        answer = agent.rpc(
            "SendMessage", {"message": message, "configuration": config}, **as_caller(MALLORY)
        )
        assert answer["error"]["code"] == -32602, answer  # type: ignore[index]
        made = agent.rpc("ListTasks", {}, **as_caller(MALLORY))["result"]["tasks"]  # type: ignore[index]
        assert len(made) == len(tasks)

        # The cap is Mallory's: Alice's configs are not refused for hers.
        own = send(agent, "ask: ?", ALICE)["id"]
        assert "result" in create(agent, ALICE, own, {"id": "c0", "url": url})
        # A config deleted makes room for another.
        agent.rpc(
            "DeleteTaskPushNotificationConfig",
            {"taskId": tasks[1], "id": "c0"},
            **as_caller(MALLORY),
        )
        assert "result" in create(agent, MALLORY, tasks[-1], {"id": "c0", "url": url})
    finally:
        agent.stop()


def docs_receiver() -> dict[str, Any]:
    """A fresh receiver from docs/push.md's example: the block defining `accept_push`, run."""
    text = (ROOT / "docs" / "push.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
    (block,) = [b for b in blocks if "def accept_push" in b]
    namespace: dict[str, Any] = {"__name__": "receiver"}
    exec(compile(block, "docs/push.md", "exec"), namespace)
    return namespace


def test_a_delivery_replayed_to_another_receiver_or_again_is_refused(tmp_path: Path) -> None:
    hook_a, hook_b = Receiver(tmp_path / "a.jsonl"), Receiver(tmp_path / "b.jsonl")
    for hook in (hook_a, hook_b):
        hook.start()
    agent = two_principals(tmp_path, f"sqlite:///{tmp_path / 'echo.db'}")
    agent.start()
    try:
        for key, hook in ((MALLORY, hook_a), (ALICE, hook_b)):
            config = {"taskPushNotificationConfig": {"id": "mine", "url": hook.url}}
            send(agent, "hello", key, configuration=config)
            wait_for(lambda hook=hook: completed_at(hook.log), timeout=15)  # type: ignore[misc]
        jwks = httpx.get(agent.url + ".well-known/jwks.json", timeout=5).json()
    finally:
        agent.stop()
        hook_a.stop()
        hook_b.stop()
    at_a, at_b = completed_at(hook_a.log)[0], completed_at(hook_b.log)[0]
    receiver_a, receiver_b = docs_receiver(), docs_receiver()

    def accept(receiver: Json, hook: Receiver, entry: Json) -> Json | None:
        update: Json | None = receiver["accept_push"](
            entry["headers"], entry["body"], jwks, hook.url
        )
        return update

    # Each receiver takes what was delivered to it, once.
    assert accept(receiver_b, hook_b, at_b) == json.loads(at_b["body"])
    assert accept(receiver_a, hook_a, at_a) == json.loads(at_a["body"])
    assert accept(receiver_a, hook_a, at_a) is None  # the same delivery id again: dropped
    # Mallory's delivery, signed by the agent, replayed to Alice's receiver: refused.
    with pytest.raises(SignatureError):
        accept(receiver_b, hook_b, at_a)
    # ... nor with its delivery id changed, nor with Alice's body under Mallory's signature.
    renamed = {**at_a["headers"], "x-a2a-delivery-id": at_b["headers"]["x-a2a-delivery-id"]}
    with pytest.raises(SignatureError):
        accept(receiver_a, hook_a, {**at_a, "headers": renamed})
    with pytest.raises(SignatureError):
        accept(receiver_a, hook_a, {**at_a, "body": at_b["body"]})
    # The signature that covers the body alone is still sent, for receivers that check it.
    keys = {k["kid"]: OKPKey.import_key(k) for k in jwks["keys"]}
    verify_detached(at_a["headers"]["x-a2a-signature"], at_a["body"], keys, PUSH_TYP)
