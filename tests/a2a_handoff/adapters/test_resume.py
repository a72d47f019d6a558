"""Adapters resume: a LangGraph agent killed -9 in the middle of a step goes on from the
graph's checkpoint (the node that finished is not run again); an Agents SDK agent from the
run's state kept after its tool's result (the tool is not called again)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tests.integration.handoff_support import ext, message, result, wait_for
from tests.llm.chat_server import Call, ChatServer, Hang, Say
from tests.support import AgentProcess


def test_a_graph_cut_mid_step_goes_on_from_its_checkpoint(tmp_path: Path) -> None:
    work_log, hold = tmp_path / "work.log", tmp_path / "hold"
    agent = AgentProcess(
        "worker",
        f"sqlite:///{tmp_path / 'worker.db'}",
        extra=(f"--work-log={work_log}", f"--hold={hold}"),
    )
    agent.module = "tests.a2a_handoff.adapters.graph_worker"
    agent.log_path = tmp_path / "worker.log"
    hold.touch()
    agent.start()
    try:
        task = result(agent.rpc("SendMessage", message("order 42", returnImmediately=True)))
        task_id = task["task"]["id"]

        def get() -> dict[str, Any]:
            found: dict[str, Any] = result(agent.rpc("GetTask", {"id": task_id}))
            return found

        said = "settling"  # `pay` is done and checkpointed; `settle` waits
        wait_for(  # a bound, not a pace: a loaded machine starts LangGraph slowly
            lambda: get()["status"].get("message", {}).get("parts", [{}])[0].get("text") == said,
            timeout=60,
        )
        agent.kill()
        hold.unlink()
        agent.start()  # resumes the task: the graph goes on at `settle`
        done = wait_for(
            lambda: (t := get())["status"]["state"] == "TASK_STATE_COMPLETED" and t, timeout=60
        )
        assert done["status"]["message"]["parts"][0]["text"] == "paid: yes"
        assert work_log.read_text().splitlines() == [f"{task_id} order 42"]  # paid once
    finally:
        agent.stop()


def test_an_agents_sdk_run_cut_after_its_tool_goes_on_without_calling_it_again(
    tmp_path: Path,
) -> None:
    chat = ChatServer().start()
    held = threading.Event()
    chat.script("worker", Call("pay", {"order": "77"}), Hang(held), Say("Paid order 77."))
    work_log = tmp_path / "work.log"
    agent = AgentProcess(
        "worker",
        f"sqlite:///{tmp_path / 'worker.db'}",
        extra=(f"--llm-url={chat.url('worker')}", f"--work-log={work_log}"),
    )
    agent.module = "tests.a2a_handoff.adapters.sdk_worker"
    agent.log_path = tmp_path / "worker.log"
    agent.start()
    try:
        task = result(agent.rpc("SendMessage", message("refund 77", returnImmediately=True)))
        task_id = task["task"]["id"]

        def checkpointed() -> bool:  # the tool ran, the run's state kept; the next turn hangs
            found = result(agent.rpc("GetTask", {"id": task_id}))
            return "checkpoint" in ext(found)

        wait_for(checkpointed, timeout=30)
        agent.kill()
        held.set()
        agent.start()  # resumes: the run goes on from its state, the model asked again
        done = wait_for(
            lambda: (
                (t := result(agent.rpc("GetTask", {"id": task_id})))["status"]["state"]
                == "TASK_STATE_COMPLETED"
                and t
            ),
            timeout=30,
        )
        assert done["status"]["message"]["parts"][0]["text"] == "Paid order 77."
        assert work_log.read_text().splitlines() == ["77"]  # the tool ran once
        assert len(chat.requests["worker"]) == 3  # the turn in flight was asked again
    finally:
        agent.stop()
        chat.stop()
