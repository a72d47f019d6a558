"""`python -m a2a_handoff serve MODULE:OBJECT`: any agent object served as a real process with
the example agents' flags, its card, a handoff to an example agent, and the usage errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_handoff.client.grpc_transport import Endpoint, GrpcTransport
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from tests.integration.handoff_support import ext, message, result, wait_for
from tests.llm.chat_server import ChatServer, Say
from tests.support import ROOT, AgentProcess, free_port


def served(tmp_path: Path, obj: str, *extra: str) -> AgentProcess:
    """`python -m a2a_handoff serve OBJ --port P --store …` (not started)."""
    process = AgentProcess("serve", f"sqlite:///{tmp_path / 'served'}.db", module="a2a_handoff")
    process.extra = (obj, "--recovery-interval", "0.3", *extra)
    process.log_path = tmp_path / "served.log"
    return process


def test_a_handler_instance_answers_with_a_card_built_for_it(tmp_path: Path) -> None:
    agent = served(tmp_path, "tests.servers.served_agent:agent").start()
    try:
        card = httpx.get(agent.url + ".well-known/agent-card.json").json()
        assert card["name"] == "agent"  # the OBJECT's name: the instance has no name
        assert card["description"] == "Greets whoever writes; hands a task to echo when asked to."
        assert card["supportedInterfaces"][0]["url"] == agent.url
        task = result(agent.rpc("SendMessage", message("Ada")))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"][0]["text"] == "hello, Ada"
    finally:
        agent.stop()


def test_a_class_is_made_and_an_object_s_own_card_is_served(tmp_path: Path) -> None:
    agent = served(tmp_path, "tests.servers.served_agent:Greeter", "--name", "greeter").start()
    try:
        assert httpx.get(agent.url + ".well-known/agent-card.json").json()["name"] == "greeter"
        task = result(agent.rpc("SendMessage", message("Bob")))["task"]
        assert task["artifacts"][0]["parts"][0]["text"] == "hello, Bob"
    finally:
        agent.stop()
    (tmp_path / "c").mkdir()
    carded = served(tmp_path / "c", "tests.servers.served_agent:carded").start()
    try:
        card = httpx.get(carded.url + ".well-known/agent-card.json").json()
        assert (card["name"], card["description"]) == ("carded", "a card of its own")
        assert [s["id"] for s in card["skills"]] == ["greet"]
    finally:
        carded.stop()


def test_a_served_agent_hands_off_to_an_example_agent(tmp_path: Path) -> None:
    echo = AgentProcess("echo", f"sqlite:///{tmp_path / 'echo'}.db")
    agent = served(tmp_path, "tests.servers.served_agent:agent", f"--route=echo={echo.url}")
    echo.extra = (f"--trust=agent={agent.url}", "--recovery-interval", "0.3")
    echo.log_path = tmp_path / "echo.log"
    echo.start()
    agent.start()
    try:
        source = result(agent.rpc("SendMessage", message("hand over: the parcel")))["task"]
        transfer = ext(source)["transfer"]
        assert transfer["agentUrl"] == echo.url

        def done() -> dict[str, Any] | None:
            task: dict[str, Any] = result(echo.rpc("GetTask", {"id": transfer["taskId"]}))
            return task if task["status"]["state"] == "TASK_STATE_COMPLETED" else None

        target = wait_for(done)
        assert target["artifacts"][0]["parts"][0]["text"] == "asked to hand over"  # the reason
        carried = target["history"][0]["metadata"][URI]["transferContext"]
        assert carried == {"said": "the parcel"}
        assert target["history"][0]["referenceTaskIds"] == [source["id"]]
    finally:
        agent.stop()
        echo.stop()


@pytest.mark.anyio
async def test_grpc_port_serves_the_object_over_grpc_too(tmp_path: Path) -> None:
    port = free_port()
    agent = served(tmp_path, "tests.servers.served_agent:agent", f"--grpc-port={port}").start()
    transport = GrpcTransport()
    try:
        async with httpx.AsyncClient(timeout=10.0) as http:
            card = (await http.get(agent.url + ".well-known/agent-card.json")).json()
        assert card["supportedInterfaces"][-1] == {
            "url": f"127.0.0.1:{port}",
            "protocolBinding": "GRPC",
            "protocolVersion": "1.0",
        }
        params = json.dumps(message("Grace"))
        version = [("a2a-version", "1.0")]
        limits = httpx.Timeout(10.0)
        endpoint = Endpoint(f"127.0.0.1:{port}", secure=False)
        status, body = await transport.call(endpoint, "SendMessage", params, version, limits)
        assert status == 200, body
        task = json.loads(body)["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"][0]["text"] == "hello, Grace"
        # the same task over gRPC's GetTask
        asked = json.dumps({"id": task["id"]})
        status, body = await transport.call(endpoint, "GetTask", asked, version, limits)
        assert json.loads(body)["result"]["artifacts"] == task["artifacts"]
    finally:
        await transport.aclose()
        agent.stop()


@pytest.mark.parametrize(
    ("obj", "said"),
    [
        ("tests.servers.served_agent", "MODULE:OBJECT names an agent object"),
        ("tests.servers.no_such_module:agent", "cannot import tests.servers.no_such_module"),
        ("tests.servers.served_agent:nobody", "tests.servers.served_agent has no 'nobody'"),
        ("tests.servers.served_agent:not_an_agent", "is a function, not an agent"),
        ("tests.servers.served_agent:Needy", "a class is made with no arguments"),
    ],
)
def test_a_bad_object_is_one_line_and_exit_64(obj: str, said: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "a2a_handoff", "serve", obj, "--port", "1", "--store", "memory://"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 64, done.stderr
    assert said in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr  # one line, no traceback


def test_the_readme_greeter_is_served_as_the_readme_says(tmp_path: Path) -> None:
    """README: saved as greeter.py, `python -m a2a_handoff serve greeter:Greeter --port 8000`
    serves it (MODULE from the current directory)."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## An agent in a few lines\n\n```python\n", 1)[1].split("```", 1)[0]
    assert "python -m a2a_handoff serve greeter:Greeter --port 8000" in " ".join(readme.split())
    (tmp_path / "greeter.py").write_text(block)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    with (tmp_path / "greeter.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "a2a_handoff", "serve", "greeter:Greeter", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=log,
        )
    agent = AgentProcess("greeter", "unused", port=port)
    agent.proc = proc
    agent.log_path = tmp_path / "greeter.log"
    try:
        agent.wait_ready()
        task = result(agent.rpc("SendMessage", message("Ada")))["task"]
        assert task["artifacts"][0]["parts"][0]["text"] == "Hello, Ada!"
        assert (tmp_path / "data" / "Greeter.db").exists()  # its default store
    finally:
        agent.stop()


def test_a_langgraph_graph_is_served_through_the_adapter(tmp_path: Path) -> None:
    agent = served(tmp_path, "tests.servers.served_graph:graph", "--name", "shouter").start()
    try:
        assert httpx.get(agent.url + ".well-known/agent-card.json").json()["name"] == "shouter"
        task = result(agent.rpc("SendMessage", message("quiet please")))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        said = [p.get("text") for a in task.get("artifacts", []) for p in a["parts"]]
        message_text = (task["status"].get("message") or {}).get("parts", [{}])[0].get("text")
        assert "QUIET PLEASE" in [*said, message_text]
        assert (tmp_path / "served-graph.db").exists()  # its checkpoints beside the store
    finally:
        agent.stop()


def test_an_llm_agent_is_served_under_its_own_name(tmp_path: Path) -> None:
    chat = ChatServer().start()
    agent = served(tmp_path, "tests.servers.served_llm:assistant")
    agent.env = {"SERVED_LLM_URL": chat.url("assistant")}
    agent.start()
    try:
        assert httpx.get(agent.url + ".well-known/agent-card.json").json()["name"] == "assistant"
        chat.script("assistant", Say("Hello from the model."))
        task = result(agent.rpc("SendMessage", message("hi")))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        assert "Hello from the model." in json.dumps(task)
    finally:
        agent.stop()
        chat.stop()


def test_an_agents_sdk_agent_is_served_through_the_adapter(tmp_path: Path) -> None:
    chat = ChatServer().start()
    agent = served(tmp_path, "tests.servers.served_sdk:helper")
    agent.env = {"SERVED_LLM_URL": chat.url("helper"), "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    agent.start()
    try:
        assert httpx.get(agent.url + ".well-known/agent-card.json").json()["name"] == "helper"
        chat.script("helper", Say("Hello from the SDK."))
        task = result(agent.rpc("SendMessage", message("hi")))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        assert "Hello from the SDK." in json.dumps(task)
    finally:
        agent.stop()
        chat.stop()
