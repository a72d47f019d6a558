"""Push notifications through the gateway: a client that only listens on its webhook is carried
across handoffs and escalations like one that streams.

Real processes: triage → billing → human (the example agents), the gateway in front of triage
with push on (`--push-allow 127.0.0.1`), a real webhook receiver (`tests.push_receiver`), the
operator's CLI. The client registers its webhook at the gateway — on SendMessage, or with
CreateTaskPushNotificationConfig — and the receiver gets every status and artifact of the
conversation, in order, with no status twice, whoever owns the conversation at the agents.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_handoff.server._card_route import CARD_PATH
from tests.integration.handoff_support import message, result, wait_for
from tests.integration.test_push import Receiver
from tests.orchestrator.test_gateway import ALICE
from tests.orchestrator.test_gateway_waits import Desk, _desk, approve_all, auth, requests
from tests.push_receiver import received

Pushed = tuple[str, str]  # ("status", "STATE text") or ("artifact", name)
WAIT = 1.0  # the gateway's --wait: a wait on an operator runs in rounds this long


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desk]:
    tmp = tmp_path_factory.mktemp("push-desk")
    extra = ("--wait", str(WAIT), "--push-allow", "127.0.0.1", "--push-retry-max", "0.3")
    yield from _desk(tmp, "servers", *extra)


@pytest.fixture(scope="module")
def hook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Receiver]:
    receiver = Receiver(tmp_path_factory.mktemp("hook") / "received.jsonl")
    receiver.start()
    yield receiver
    receiver.stop()


def config(hook: Receiver, path: str) -> dict[str, Any]:
    """A webhook at `path` of the receiver, artifacts included."""
    return {
        "url": hook.url.replace("/hook", path),
        "token": "t-" + path.strip("/"),
        "artifactUpdates": True,
    }


def pushed(hook: Receiver, path: str) -> list[Pushed]:
    """What the receiver got at `path`, one entry per delivery (a retried one counted once),
    in the task's event order."""
    deliveries: dict[int, Pushed] = {}
    for entry in received(hook.log):
        if entry["path"] != path:
            continue
        seq = int(entry["headers"]["x-a2a-delivery-id"].rsplit(":", 1)[1])
        deliveries[seq] = _shown(json.loads(entry["body"]))
    return [deliveries[seq] for seq in sorted(deliveries)]


def _shown(item: dict[str, Any]) -> Pushed:
    if "artifactUpdate" in item:
        return "artifact", str(item["artifactUpdate"]["artifact"].get("name", ""))
    status = item.get("statusUpdate", item.get("task", {}))["status"]
    parts = (status.get("message") or {}).get("parts") or [{}]
    state = str(status["state"]).removeprefix("TASK_STATE_")
    return "status", f"{state} {parts[0].get('text', '')}".rstrip()


def until(hook: Receiver, path: str, last: str, timeout: float = 45) -> list[Pushed]:
    """The deliveries at `path` once one status starts with `last` (bounded)."""

    def arrived() -> list[Pushed] | None:
        seen = pushed(hook, path)
        return seen if any(e[1].startswith(last) for e in seen if e[0] == "status") else None

    found: list[Pushed] = wait_for(arrived, timeout)
    return found


def statuses(events: list[Pushed]) -> list[str]:
    return [text for kind, text in events if kind == "status"]


def matches(events: list[Pushed], expected: list[Pushed]) -> bool:
    """Each event starts with what `expected` says at its place (texts are prefixes)."""
    return len(events) == len(expected) and all(
        kind == want_kind and text.startswith(want)
        for (kind, text), (want_kind, want) in zip(events, expected, strict=True)
    )


def send(desk: Desk, params: dict[str, Any]) -> dict[str, Any]:
    task: dict[str, Any] = result(desk.gateway.rpc("SendMessage", params, **auth(ALICE)))["task"]
    return task


def answer(task: dict[str, Any], text: str) -> dict[str, Any]:
    params = message(text, task["contextId"], returnImmediately=True)
    params["message"]["taskId"] = task["id"]
    return params


def test_a_webhook_given_on_send_gets_the_whole_conversation_across_the_handoff(
    desk: Desk, hook: Receiver
) -> None:
    card = httpx.get(desk.gateway.url + CARD_PATH.lstrip("/"), timeout=10).json()
    assert card["capabilities"]["pushNotifications"] is True
    ask = "I was charged twice for my order, I want a refund"
    asked = send(desk, message(ask, taskPushNotificationConfig=config(hook, "/handoff")))
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    send(desk, answer(asked, "order 12345"))
    events = until(hook, "/handoff", "COMPLETED")
    expected = [
        ("status", "SUBMITTED"),
        ("status", "WORKING"),
        ("status", "WORKING Routing to billing: refund request"),
        ("status", "WORKING Handing off to billing: refund request"),
        ("status", "WORKING Transferred to billing: refund request"),
        ("status", "INPUT_REQUIRED Which order is this about?"),
        ("status", "WORKING"),  # the answer, at the gateway and on to billing
        ("artifact", "refund"),
        ("status", "COMPLETED Refund of $49.99 issued for order 12345."),
    ]
    assert matches(events, expected), "\n".join(map(str, events))


def test_a_webhook_added_at_the_gateway_follows_an_escalation_to_its_end_saying_each_once(
    desk: Desk, hook: Receiver
) -> None:
    first = config(hook, "/given")
    asked = send(desk, message("I want a refund of $750", taskPushNotificationConfig=first))
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    added = {"taskId": asked["id"], **config(hook, "/added")}
    created = result(desk.gateway.rpc("CreateTaskPushNotificationConfig", added, **auth(ALICE)))
    assert created["url"].endswith("/added")
    listed = desk.gateway.rpc(
        "ListTaskPushNotificationConfigs", {"taskId": asked["id"]}, **auth(ALICE)
    )
    assert sorted(c["url"].rsplit("/", 1)[1] for c in result(listed)["configs"]) == [
        "added",
        "given",
    ]

    send(desk, answer(asked, "order 5123"))
    until(hook, "/added", "WORKING Escalated to a human operator")
    # The gateway follows the escalation in rounds of --wait seconds (a subscription at the
    # human agent each): two more rounds, and nothing said again.
    before = requests(desk.human, "SubscribeToTask")
    wait_for(lambda: requests(desk.human, "SubscribeToTask") >= before + 2, 30)
    approve_all(desk, 1)
    given = until(hook, "/given", "COMPLETED")
    added_events = until(hook, "/added", "COMPLETED")

    escalated = [s for s in statuses(given) if s.startswith("WORKING Escalated")]
    assert len(escalated) == 1, "\n".join(map(str, given))
    expected_tail = [
        ("status", "WORKING"),
        ("status", "WORKING Handing off to human: escalated (high_impact)"),
        ("status", "WORKING Transferred to human: escalated (high_impact)"),
        ("status", "WORKING Escalated to a human operator: permission to refund $750.00"),
        ("status", "WORKING Handing off to billing: operator approved: ok"),
        ("status", "WORKING Transferred to billing: operator approved: ok"),
        ("artifact", "refund"),
        ("status", "COMPLETED Refund of $750.00 issued for order 5123."),
    ]
    assert matches(added_events, expected_tail), "\n".join(map(str, added_events))
    assert matches(
        given,
        [
            ("status", "SUBMITTED"),
            ("status", "WORKING"),
            ("status", "WORKING Routing to billing: refund request"),
            ("status", "WORKING Handing off to billing: refund request"),
            ("status", "WORKING Transferred to billing: refund request"),
            ("status", "INPUT_REQUIRED Which order is this about?"),
            *expected_tail,
        ],
    ), "\n".join(map(str, given))
    texts = statuses(given)
    assert all(a != b for a, b in itertools.pairwise(texts)), texts


def test_a_gateway_killed_during_a_wait_says_nothing_twice_after_its_restart(
    tmp_path: Path, hook: Receiver
) -> None:
    extra = ("--wait", str(WAIT), "--push-allow", "127.0.0.1", "--push-retry-max", "0.3")
    for crashed in _desk(tmp_path, "servers", *extra):
        asked = send(
            crashed,
            message("I want a refund of $750", taskPushNotificationConfig=config(hook, "/crash")),
        )
        send(crashed, answer(asked, "order 5777"))
        until(hook, "/crash", "WORKING Escalated to a human operator")
        crashed.gateway.kill()  # kill -9 in the middle of the step: it is run again
        crashed.gateway.start()
        approve_all(crashed, 1)
        events = until(hook, "/crash", "COMPLETED")
        said = [s for s in statuses(events) if s != "WORKING"]
        assert len(said) == len(set(said)), "\n".join(map(str, events))
        assert matches(
            events[-2:], [("artifact", "refund"), ("status", "COMPLETED Refund of $750.00")]
        )
        assert [e for e in events if e[0] == "artifact"] == [("artifact", "refund")]
