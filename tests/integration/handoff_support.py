"""Real triage → billing / logistics processes for the handoff tests."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from tests.support import AgentProcess
from tests.trust_support import Signer

REFUND = "I was charged twice for order 12345, I want a refund"
TESTS = Signer()  # the tests' own identity: trusted (pinned) by billing and logistics


@dataclass
class Agents:
    triage: AgentProcess
    billing: AgentProcess
    logistics: AgentProcess

    def all(self) -> list[AgentProcess]:
        return [self.billing, self.logistics, self.triage]

    def stop(self) -> None:
        for agent in self.all():
            agent.stop()


def sqlite_stores(tmp_path: Path) -> Callable[[str], str]:
    """Each agent its own SQLite file in `tmp_path`."""
    return lambda name: f"sqlite:///{tmp_path / name}.db"


def make_agents(
    tmp_path: Path, *triage_extra: str, stores: Callable[[str], str] | None = None
) -> Agents:
    """Billing and logistics first, then triage routed to them (not started).

    `stores` gives each agent's store URL (default: its own SQLite file).
    """
    store = stores or sqlite_stores(tmp_path)
    common = ("--recovery-interval", "0.3")
    trust_file = TESTS.trust_file(tmp_path / "trust-tests.json")
    triage = AgentProcess("triage", store("triage"))
    trusted = (f"--trust=triage={triage.url}", f"--trust-file={trust_file}", *common)
    billing = AgentProcess("billing", store("billing"), extra=trusted)
    logistics = AgentProcess("logistics", store("logistics"), extra=trusted)
    triage.extra = (
        f"--route=billing={billing.url}",
        f"--route=logistics={logistics.url}",
        *common,
        *triage_extra,
    )
    for agent in (billing, logistics, triage):
        agent.log_path = tmp_path / f"{agent.name}.log"
    return Agents(triage, billing, logistics)


@contextmanager
def running(tmp_path: Path) -> Iterator[Agents]:
    """Billing, logistics and triage started, stopped on exit."""
    agents = make_agents(tmp_path)
    for agent in agents.all():
        agent.start()
    try:
        yield agents
    finally:
        agents.stop()


def message(text: str, context_id: str | None = None, **config: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    if context_id:
        msg["contextId"] = context_id
    params: dict[str, Any] = {"message": msg}
    if config:
        params["configuration"] = config
    return params


def result(reply: dict[str, Any]) -> Any:
    assert "result" in reply, reply
    return reply["result"]


def tasks_in(agent: AgentProcess, context_id: str) -> list[dict[str, Any]]:
    params = {"contextId": context_id, "historyLength": 10}
    for _ in range(100):  # -32105 (store busy or unavailable) is the caller's to retry: ≤ 20 s
        answer = agent.rpc("ListTasks", params)
        if answer.get("error", {}).get("code") != -32105:
            break
        time.sleep(0.2)
    page = result(answer)
    tasks: list[dict[str, Any]] = page["tasks"]
    return tasks


def ext(task: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = (task.get("metadata") or {}).get(URI, {})
    return value


def wait_for(check: Callable[[], Any], timeout: float = 15.0, every: float = 0.1) -> Any:
    """Poll until `check()` returns something truthy."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as exc:  # a restarting agent refuses connections for a moment
            last = exc
        else:
            if last:
                return last
        time.sleep(every)
    raise AssertionError(f"condition not met in {timeout} s; last value: {last!r}")
