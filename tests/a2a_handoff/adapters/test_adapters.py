"""The framework adapters end to end: triage written with the OpenAI Agents SDK
(`servers triage --framework agents-sdk`) hands off to billing written with LangGraph
(`servers billing --framework langgraph`), real processes with the real frameworks; the SDK's
model is a chat-completions server on 127.0.0.1 with scripted answers (tests/llm)."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_handoff.failpoints import ENV_VAR, EXIT_CODE
from tests.integration.handoff_support import ext, message, result, tasks_in, wait_for
from tests.llm.chat_server import Call, ChatServer, Say
from tests.support import AgentProcess, Cli, wire_trust

FAST = ("--recovery-interval", "0.3")
TO_BILLING = Call(
    "transfer_to_billing",
    {"reason": "refund request", "summary": "Charged twice, wants a refund", "entities": {}},
)


@dataclass
class Shop:
    chat: ChatServer
    triage: AgentProcess
    billing: AgentProcess
    human: AgentProcess
    front: AgentProcess  # a LangGraph graph handing off with Command(goto="billing")
    tmp: Path


def _agent(tmp: Path, name: str, *extra: str, store: str | None = None) -> AgentProcess:
    agent = AgentProcess(name, store or f"sqlite:///{tmp / name}.db", extra=(*FAST, *extra))
    agent.log_path = tmp / f"{name}.log"
    return agent


def _sdk(chat: ChatServer, path: str) -> tuple[str, ...]:
    return (
        "--framework=agents-sdk",
        f"--llm-url={chat.url(path)}",
        "--llm-model=scripted",
        "--llm-timeout=10",
    )


def _pair(
    tmp: Path, chat: ChatServer, path: str, *triage_extra: str
) -> tuple[AgentProcess, AgentProcess, AgentProcess]:
    human = _agent(tmp, "human")
    billing = _agent(tmp, "billing", "--framework=langgraph", f"--route=human={human.url}")
    triage = _agent(
        tmp, "triage", f"--route=billing={billing.url}", *_sdk(chat, path), *triage_extra
    )
    wire_trust([human, billing, triage])
    return human, billing, triage


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    tmp = tmp_path_factory.mktemp("adapters")
    chat = ChatServer().start()
    human, billing, triage = _pair(
        tmp, chat, "triage", "--route=logistics=http://127.0.0.1:9/", "--scope=invoices,refunds"
    )
    front = AgentProcess(
        "front",
        f"sqlite:///{tmp / 'front'}.db",
        extra=(f"--route=billing={billing.url}",),
        module="tests.a2a_handoff.adapters.graph_front",
    )
    wire_trust([front, billing])
    agents = [human, billing, triage, front]
    for agent in agents:
        agent.start()
    try:
        yield Shop(chat, triage, billing, human, front, tmp)
    finally:
        for agent in agents:
            agent.stop()
        chat.stop()


def get(agent: AgentProcess, task_id: str) -> dict[str, Any]:
    task: dict[str, Any] = result(agent.rpc("GetTask", {"id": task_id}))
    return task


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def refunds(agent: AgentProcess, context_id: str) -> list[dict[str, Any]]:
    params = {"contextId": context_id, "includeArtifacts": True}
    tasks = result(agent.rpc("ListTasks", params))["tasks"]
    return [a for t in tasks for a in t.get("artifacts", []) if a.get("name") == "refund"]


def test_sdk_triage_hands_off_to_langgraph_billing_which_asks_and_refunds(shop: Shop) -> None:
    shop.chat.script("triage", TO_BILLING)
    cli = Cli(shop.tmp / "session.json")
    code, out = cli.run("send", "--entry", shop.triage.url, "I was charged twice, refund please")
    assert code == 2, out  # billing waits for input
    assert "[triage] transferred to billing" in out
    assert "[billing] input required: Which order is this about?" in out
    # The SDK's model saw the conversation, and billing's card in the transfer tool.
    asked = shop.chat.requests["triage"][-1]
    assert asked["messages"][-1] == {
        "role": "user",
        "content": "I was charged twice, refund please",
    }
    tools = {t["function"]["name"]: t["function"] for t in asked["tools"]}
    assert "Refunds and invoices for orders" in tools["transfer_to_billing"]["description"]
    # The graph started from the verified transfer context, and its interrupt() survives a
    # kill -9: the checkpoint is in billing's SQLite file.
    shop.billing.restart()
    code, out = cli.run("send", "order 12345")
    assert code == 0, out
    assert "Refund of $49.99 issued for order 12345." in out
    assert len(refunds(shop.billing, cli_context(cli))) == 1


def cli_context(cli: Cli) -> str:
    return str(json.loads(cli.session.read_text())["context_id"])


def test_a_gate_refusal_goes_back_to_the_sdk_model_which_chooses_again(shop: Shop) -> None:
    shop.chat.script(
        "triage",
        Call("transfer_to_logistics", {"reason": "where is it", "summary": "Refund status"}),
        TO_BILLING,
    )
    before = len(shop.chat.requests["triage"])
    task = send(shop.triage, "where is the refund for my order?")
    assert ext(task)["transfer"]["agentName"] == "billing"
    asked = shop.chat.requests["triage"][before:]
    assert len(asked) == 2
    refusal = tool_results(asked[1])[0]
    assert refusal.startswith("refused: ")
    assert "capability gate refused" in refusal
    assert "outside this agent's scope: shipping" in refusal


def test_a_target_s_refusal_goes_back_to_the_sdk_model_which_answers(
    shop: Shop, tmp_path: Path
) -> None:
    # A second triage that billing does not trust: billing refuses what it signs.
    stranger = _agent(
        tmp_path, "triage", f"--route=billing={shop.billing.url}", *_sdk(shop.chat, "stranger")
    )
    shop.chat.script(
        "stranger", TO_BILLING, Say("Billing cannot take this over now, sorry.", chunks=4)
    )
    stranger.start()
    try:
        task = send(stranger, "refund please, order 12345")
    finally:
        stop_and_keep_log(stranger)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "transfer" not in ext(task)
    assert ext(task)["refused"]  # the refusal is in the task's record
    refusal = tool_results(shop.chat.requests["stranger"][1])[0]
    assert refusal.startswith("refused: billing rejected the handoff")
    assert tasks_in(shop.billing, task["contextId"]) == []
    # The model's final text streamed as chunks of one artifact.
    (answer,) = [a for a in task["artifacts"] if a["name"] == "answer"]
    assert "".join(p.get("text", "") for p in answer["parts"]) == (
        "Billing cannot take this over now, sorry."
    )


def test_a_large_refund_is_escalated_by_the_graph_and_paid_once_when_approved(
    shop: Shop,
) -> None:
    shop.chat.script(
        "triage",
        Call(
            "transfer_to_billing",
            {
                "reason": "refund",
                "summary": "Refund $750 on order 4242",
                "entities": {"orderId": "4242", "amount": 750},
            },
        ),
    )
    task = send(shop.triage, "refund $750 on order 4242, it never arrived")
    context = task["contextId"]
    pointer = ext(task)["transfer"]
    escalated = wait_for(
        lambda: ext(t := get(shop.billing, pointer["taskId"])).get("transfer") and t
    )
    assert ext(escalated)["transfer"]["agentName"] == "human"  # nothing refunded yet
    assert refunds(shop.billing, context) == []
    operator = Cli(shop.tmp / "operator.json")

    def waiting() -> dict[str, Any] | None:
        code, items = operator.events("inbox", "--agent", shop.human.url)
        assert code == 0
        return next((i for i in items if i.get("sourceTaskId") == pointer["taskId"]), None)

    item = wait_for(waiting, timeout=20)
    assert item["trigger"] == "high_impact"
    code, out = operator.run("approve", item["taskId"], "ok", "--agent", shop.human.url)
    assert code == 0, out
    paid = wait_for(lambda: refunds(shop.billing, context), timeout=20)
    assert len(paid) == 1
    assert paid[0]["parts"][0]["data"] == {"orderId": "4242", "amount": 750.0, "status": "refunded"}


def follow_up(text: str, **more: Any) -> dict[str, Any]:
    params = message(text)
    params["message"].update(more)
    return params


def test_a_graph_s_command_goto_a_route_is_a_handoff_carrying_the_declared_fields(
    shop: Shop,
) -> None:
    task = send(shop.front, "I want a refund on order 31337")
    transfer = ext(task)["transfer"]
    assert transfer["agentName"] == "billing"
    done = "TASK_STATE_COMPLETED"
    successor = wait_for(
        lambda: (t := get(shop.billing, transfer["taskId"]))["status"]["state"] == done and t
    )
    envelope = successor["history"][0]["metadata"]
    context = next(v for v in envelope.values() if "transferContext" in v)["transferContext"]
    assert context == {
        "intent": "refund",
        "entities": {"orderId": "31337"},
        "summary": "Refund asked at the front desk: I want a refund on order 31337",
    }  # the declared fields only: the graph's scratch stayed home
    assert len(refunds(shop.billing, task["contextId"])) == 1
    answered = send(shop.front, "hello")
    assert answered["status"]["state"] == "TASK_STATE_COMPLETED"
    assert answered["status"]["message"]["parts"][0]["text"] == "I only know where refunds go."


def send(agent: AgentProcess, text: str, **more: Any) -> dict[str, Any]:
    task: dict[str, Any] = result(agent.rpc("SendMessage", follow_up(text, **more)))["task"]
    return task


def stop_and_keep_log(agent: AgentProcess) -> None:
    agent.stop()


def _crash_pair(tmp: Path, chat: ChatServer, path: str) -> tuple[AgentProcess, AgentProcess]:
    _, billing, triage = _pair(tmp, chat, path)
    return triage, billing


def died(agent: AgentProcess) -> int:
    assert agent.proc is not None
    return agent.proc.wait(60)


def one_successor_paid_once(triage: AgentProcess, billing: AgentProcess, ctx: str) -> None:
    """Triage's task TRANSFERRED to exactly one billing task, which asks (a billing that died
    before running it resumes it at its restart), then one refund is paid, once."""

    def transferred() -> dict[str, Any] | None:
        (task,) = tasks_in(triage, ctx)
        return task if ext(task).get("state") == "TRANSFERRED" else None

    source = wait_for(transferred, timeout=30)
    successors = tasks_in(billing, ctx)
    assert [t["id"] for t in successors] == [ext(source)["transfer"]["taskId"]]
    (first,) = successors
    state = "TASK_STATE_INPUT_REQUIRED"
    wait_for(lambda: get(billing, first["id"])["status"]["state"] == state)
    done = send(billing, "order 12345", taskId=first["id"], contextId=ctx)
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert len(refunds(billing, ctx)) == 1
    again = billing.rpc("SendMessage", follow_up("order 12345", taskId=done["id"], contextId=ctx))
    assert "error" in again  # a terminal task takes no second answer: nothing paid twice
    assert len(refunds(billing, ctx)) == 1


def test_the_sdk_triage_killed_mid_handoff_recovers_it_once(tmp_path: Path) -> None:
    chat = ChatServer().start()
    triage, billing = _crash_pair(tmp_path, chat, "triage")
    chat.script("triage", TO_BILLING)
    billing.start()
    triage.env = {ENV_VAR: "handoff.after_checkpoint"}
    triage.start()
    try:
        ctx = f"ctx-{uuid.uuid4()}"
        with contextlib.suppress(httpx.TransportError):  # it dies mid-request: the point
            triage.rpc("SendMessage", message("refund please", ctx))
        assert died(triage) == EXIT_CODE
        triage.env = {}
        triage.start()  # the outbox delivers the checkpointed handoff: no model call again
        one_successor_paid_once(triage, billing, ctx)
        assert len(chat.requests["triage"]) == 1
    finally:
        triage.stop()
        billing.stop()
        chat.stop()


def test_the_langgraph_billing_killed_mid_handoff_makes_one_successor(tmp_path: Path) -> None:
    chat = ChatServer().start()
    triage, billing = _crash_pair(tmp_path, chat, "triage")
    chat.script("triage", TO_BILLING, Say("Billing has it."))
    billing.env = {ENV_VAR: "receive.after_create"}
    billing.start()
    triage.start()
    try:
        ctx = f"ctx-{uuid.uuid4()}"
        message_ = message("refund please", ctx, returnImmediately=True)
        result(triage.rpc("SendMessage", message_))
        assert died(billing) == EXIT_CODE  # after creating the successor, before answering
        billing.env = {}
        billing.start()  # resumes the successor it created: the graph runs, and asks
        one_successor_paid_once(triage, billing, ctx)
        received = result(billing.rpc("ListHandoffs", {"contextId": ctx}))["received"]
        assert len({e["taskId"] for e in received}) == 1
    finally:
        triage.stop()
        billing.stop()
        chat.stop()
