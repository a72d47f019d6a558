"""The delegation tests' agents (`tests.integration.delegating_agent` processes) and helpers:
triage delegates to billing (which trusts triage and logs every step of work it does), on
SQLite files of their own or a shared store."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from a2a_handoff.failpoints import ENV_VAR, EXIT_CODE
from tests.integration.handoff_support import message, result, sqlite_stores, tasks_in, wait_for
from tests.support import ROOT, AgentProcess

MODULE = "tests.integration.delegating_agent"
POINTS = [
    "delegate.after_checkpoint",
    "delegate.after_send",
    "delegate.after_answer",
    "delegate.after_record",
]


@dataclass
class Agents:
    triage: AgentProcess
    billing: AgentProcess
    work_log: Path
    hold_file: Path  # while it exists, billing answers no request that made a task
    stranger: AgentProcess | None = None
    others: list[AgentProcess] = field(default_factory=list)  # more replicas of triage

    def work(self, context_id: str) -> list[str]:
        """The steps of work billing did in the conversation: "CONTEXT TASK TEXT" each."""
        lines = self.work_log.read_text().splitlines() if self.work_log.exists() else []
        mine = [line for line in lines if line.startswith(context_id + " ")]
        return [line.rsplit(" key=", 1)[0] for line in mine]

    def calls(self, task_id: str) -> list[str]:
        """Every call of billing's work in the task (once per key, unless cut by a crash)."""
        calls = self.work_log.with_name(self.work_log.name + ".calls")
        lines = calls.read_text().splitlines() if calls.exists() else []
        return [line for line in lines if line.startswith(task_id + "/")]

    def all(self) -> list[AgentProcess]:
        return [a for a in (self.billing, self.stranger, self.triage, *self.others) if a]

    def start(self) -> Agents:
        for agent in self.all():
            agent.start()
        return self

    def stop(self) -> None:
        for agent in reversed(self.all()):
            agent.stop()


def _agent(tmp: Path, name: str, store: str, log: str, *extra: str) -> AgentProcess:
    agent = AgentProcess(name, store, extra=extra)
    agent.module = MODULE
    agent.log_path = tmp / f"{log}.log"
    return agent


def make_agents(
    tmp: Path,
    stores: Callable[[str], str] | None = None,
    *,
    stranger: bool = False,
    replicas: int = 1,
) -> Agents:
    """Triage (with the example contracts) routed to billing, and, with `stranger`, to a second
    "billing" that trusts nobody; not started. `stores` gives each agent's store URL (default:
    a SQLite file each); the `replicas` of triage share its store."""
    store = stores or sqlite_stores(tmp)
    work_log, hold_file = tmp / "work.log", tmp / "hold"
    triages = [_agent(tmp, "triage", store("triage"), f"triage-{i}") for i in range(replicas)]
    trusted = [f"--trust=triage={t.url}" for t in triages]
    billing = _agent(
        tmp,
        "billing",
        store("billing"),
        "billing",
        *trusted,
        f"--work-log={work_log}",
        f"--hold-file={hold_file}",
    )
    other = _agent(tmp, "billing", store("stranger"), "stranger") if stranger else None
    routes = [f"--route=billing={billing.url}", f"--contracts={ROOT / 'contracts'}"]
    if other is not None:
        routes.append(f"--route=stranger={other.url}")
    for triage in triages:
        triage.extra = tuple(routes)
    return Agents(triages[0], billing, work_log, hold_file, other, triages[1:])


def ask(agent: AgentProcess, text: str, context_id: str, **config: Any) -> dict[str, Any]:
    task: dict[str, Any] = result(agent.rpc("SendMessage", message(text, context_id, **config)))[
        "task"
    ]
    return task


def reply(agent: AgentProcess, task: dict[str, Any], text: str, **config: Any) -> dict[str, Any]:
    """The user's answer to `task` (input-required at `agent`)."""
    sent = message(text, task["contextId"], **config)
    sent["message"]["taskId"] = task["id"]
    answered: dict[str, Any] = result(agent.rpc("SendMessage", sent))["task"]
    return answered


def settled(agent: AgentProcess, context_id: str) -> dict[str, Any]:
    """The one task of the conversation at `agent`, once it no longer works."""

    def check() -> dict[str, Any] | None:
        tasks = tasks_in(agent, context_id)
        assert len(tasks) <= 1, tasks
        working = ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
        return tasks[0] if tasks and tasks[0]["status"]["state"] not in working else None

    found = wait_for(check, timeout=20)
    task: dict[str, Any] = result(agent.rpc("GetTask", {"id": found["id"]}))  # with artifacts
    return task


def delegated(task: dict[str, Any]) -> dict[str, Any]:
    """What triage published of billing's outcome (its artifact `delegated`)."""
    [artifact] = [a for a in task["artifacts"] if a.get("name") == "delegated"]
    data: dict[str, Any] = artifact["parts"][0]["data"]
    return data


@contextlib.contextmanager
def dies_at(agent: AgentProcess, point: str) -> Iterator[None]:
    """Restart `agent` with the failpoint `point` armed, run the block (a request it dies
    answering, or before), check that it died there, and start it again unarmed — started
    again whatever happened, for the tests that follow."""
    agent.env = {ENV_VAR: point}
    agent.restart()
    try:
        with contextlib.suppress(httpx.HTTPError, ValueError):  # it may die before answering
            yield
        assert agent.proc is not None
        assert agent.proc.wait(20) == EXIT_CODE
    finally:
        agent.env = {}
        agent.kill()
        agent.start()
