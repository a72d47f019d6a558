"""The gateway's waits on escalations: capped per client, backed off, by subscription where the
human agent streams. Real processes: triage → billing → human, the gateway in front of triage,
plain JSON-RPC clients, the operator's CLI.

Each escalation a client's task waits on is one wait at the gateway. A client holds at most
`--max-waits` of them at once (beyond: its task pauses INPUT_REQUIRED saying so, and any later
message on it takes the wait up again); a human agent that does not stream is polled with
backoff, one that streams is followed by SubscribeToTask. The human agent's /metrics count the
requests it gets, by method: how hard the gateway leans on it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.handoff_support import message, result, wait_for
from tests.orchestrator.test_gateway import ALICE, BOB, gateway_process
from tests.support import AgentProcess, Cli, wire_trust

FAST = ("--recovery-interval", "0.3")
CAP = 3  # --max-waits of the gateway in front of the quiet desk
ESCALATED = "Escalated to a human operator"
TOO_MANY = "Too many waits"


@dataclass
class Desk:
    """triage → billing → human, and the gateway in front of triage."""

    triage: AgentProcess
    billing: AgentProcess
    human: AgentProcess
    gateway: AgentProcess
    operator: Cli

    def all(self) -> list[AgentProcess]:
        return [self.human, self.billing, self.triage, self.gateway]


def _desk(tmp: Path, human_module: str, *gateway_extra: str) -> Iterator[Desk]:
    def agent(name: str, *extra: str, module: str = "servers") -> AgentProcess:
        process = AgentProcess(name, f"sqlite:///{tmp / name}.db", extra=(*FAST, *extra))
        process.module = module
        process.log_path = tmp / f"{name}.log"
        return process

    human = agent("human", "--metrics-public", module=human_module)
    billing = agent("billing", f"--route=human={human.url}")
    triage = agent("triage", f"--route=billing={billing.url}")
    wire_trust([human, billing, triage])
    if human_module != "servers":  # wire_trust leaves test modules alone
        human.extra = (*human.extra, f"--trust=billing={billing.url}")
    gateway = gateway_process(tmp, triage.url, *gateway_extra)
    desk = Desk(triage, billing, human, gateway, Cli(tmp / "operator.json"))
    try:
        for process in desk.all():
            process.start()
        yield desk
    finally:
        for process in reversed(desk.all()):
            process.stop()


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desk]:
    """The human agent's card offers no streaming: the gateway can only poll it."""
    tmp = tmp_path_factory.mktemp("quiet-desk")
    yield from _desk(tmp, "tests.orchestrator.quiet_human", "--max-waits", str(CAP))


@pytest.fixture(scope="module")
def streaming(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desk]:
    """The example human agent as it is: its card offers streaming."""
    tmp = tmp_path_factory.mktemp("streaming-desk")
    yield from _desk(tmp, "servers")


_ORDERS = iter(range(5000, 6000))


def refund_request(desk: Desk, key: str) -> str:
    """A refund over billing's limit, sent to the gateway without waiting: the client's task."""
    text = f"I was charged twice, I want a refund of $750 for order {next(_ORDERS)}"
    reply = desk.gateway.rpc("SendMessage", message(text, returnImmediately=True), **auth(key))
    task: dict[str, Any] = result(reply)["task"]
    return str(task["id"])


def auth(key: str) -> dict[str, str]:
    return {"X-API-Key": key}


def at_gateway(desk: Desk, key: str, task_id: str) -> dict[str, Any]:
    task: dict[str, Any] = result(desk.gateway.rpc("GetTask", {"id": task_id}, **auth(key)))
    return task


def said(task: dict[str, Any]) -> str:
    parts = (task["status"].get("message") or {}).get("parts") or [{}]
    return str(parts[0].get("text", ""))


def escalated(task: dict[str, Any]) -> bool:
    return task["status"]["state"] == "TASK_STATE_WORKING" and said(task).startswith(ESCALATED)


def refused(task: dict[str, Any]) -> bool:
    return task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and TOO_MANY in said(task)


def requests(agent: AgentProcess, method: str) -> int:
    """The requests `agent` counted for `method` (every outcome), from its /metrics."""
    text = httpx.get(agent.url + "metrics", timeout=10).text
    pattern = rf'^a2a_requests_total\{{[^}}]*method="{method}"[^}}]*\}} ([0-9.e+]+)$'
    return int(sum(float(v) for v in re.findall(pattern, text, re.MULTILINE)))


def waiting_at_human(desk: Desk) -> list[dict[str, Any]]:
    code, items = desk.operator.events("inbox", "--agent", desk.human.url)
    assert code == 0, items
    return items


def approve_all(desk: Desk, count: int) -> None:
    """Approve the `count` escalations waiting at the human agent (once they are all there)."""
    items = wait_for(lambda: (w := waiting_at_human(desk)) and len(w) == count and w, 30)
    for item in items:
        code, out = desk.operator.run("approve", item["taskId"], "ok", "--agent", desk.human.url)
        assert code == 0, out


def completed(desk: Desk, key: str, task_ids: list[str], timeout: float = 30) -> None:
    def done() -> bool:
        states = [at_gateway(desk, key, t)["status"]["state"] for t in task_ids]
        return all(s == "TASK_STATE_COMPLETED" for s in states)

    wait_for(done, timeout)


def test_a_client_beyond_its_cap_of_waits_is_told_so_and_within_it_is_carried(
    quiet: Desk,
) -> None:
    alice = [refund_request(quiet, ALICE) for _ in range(CAP + 1)]
    bob = refund_request(quiet, BOB)  # another client: a cap of his own

    def settled() -> tuple[list[str], list[str]] | None:
        tasks = {t: at_gateway(quiet, ALICE, t) for t in alice}
        carried = [t for t, task in tasks.items() if escalated(task)]
        turned = [t for t, task in tasks.items() if refused(task)]
        return (carried, turned) if len(carried) == CAP and len(turned) == 1 else None

    carried, [turned] = wait_for(settled, 45)
    assert escalated(wait_for(lambda: escalated(t := at_gateway(quiet, BOB, bob)) and t, 30))
    text = said(at_gateway(quiet, ALICE, turned))
    assert f"already waits on {CAP} escalations for you" in text, text
    assert "send any message on this task" in text, text

    # Within the cap, each wait is carried to its end once the operator answers.
    approve_all(quiet, CAP + 2)
    completed(quiet, ALICE, carried)
    completed(quiet, BOB, [bob])
    # The refused one: its escalation was answered too; a message on the task takes it up.
    again = message("any news?")
    again["message"]["taskId"] = turned
    again["configuration"] = {"returnImmediately": True}
    result(quiet.gateway.rpc("SendMessage", again, **auth(ALICE)))
    completed(quiet, ALICE, [turned])
    assert "Refund of $750.00 issued" in said(at_gateway(quiet, ALICE, turned))


def test_waits_on_a_human_agent_that_does_not_stream_are_polled_with_backoff(
    quiet: Desk,
) -> None:
    pending = [refund_request(quiet, ALICE) for _ in range(CAP)]
    wait_for(lambda: all(escalated(at_gateway(quiet, ALICE, t)) for t in pending), 45)
    before = requests(quiet.human, "GetTask")
    window = 8.0  # a measure over a fixed time, not a wait for an event
    time.sleep(window)
    polled = requests(quiet.human, "GetTask") - before
    # Every 0.25 s (the old rate) would be 32 a wait in this window; backed off (0.25 s
    # doubling to 5 s) it is at most 5 a wait — and each wait does poll.
    assert CAP <= polled <= CAP * 6, polled
    approve_all(quiet, CAP)
    completed(quiet, ALICE, pending)


def test_a_wait_on_a_streaming_human_agent_follows_by_subscription(streaming: Desk) -> None:
    task_id = refund_request(streaming, ALICE)
    wait_for(lambda: escalated(at_gateway(streaming, ALICE, task_id)), 45)
    before = requests(streaming.human, "GetTask")
    time.sleep(3.0)  # a measure over a fixed time: polling would ask ~12 times
    assert requests(streaming.human, "GetTask") == before
    assert requests(streaming.human, "SubscribeToTask") >= 1  # the stream it follows
    approve_all(streaming, 1)
    approved = time.monotonic()
    completed(streaming, ALICE, [task_id])
    assert time.monotonic() - approved < 15
    assert "Refund of $750.00 issued" in said(at_gateway(streaming, ALICE, task_id))
