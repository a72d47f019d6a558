"""Language-model agents end to end: real agent processes (`python -m servers … --llm`) whose
model is a real chat-completions server on 127.0.0.1 with scripted answers."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_handoff.runtime.orphans import RESTART_REASON
from tests.integration.handoff_support import ext, message, result, wait_for
from tests.llm.chat_server import Call, ChatServer, Garbage, Hang, Say
from tests.support import A2A_HEADERS, ROOT, AgentProcess, Cli, free_port, wire_trust

FAST = ("--recovery-interval", "0.3")
REFUND = {"intent": "refund", "summary": "Refund on order 12345", "entities": {"orderId": "12345"}}


@dataclass
class Shop:
    chat: ChatServer
    triage: AgentProcess
    billing: AgentProcess
    human: AgentProcess
    tmp: Path


def _agent(tmp: Path, name: str, *extra: str) -> AgentProcess:
    agent = AgentProcess(name, f"sqlite:///{tmp / name}.db", extra=(*FAST, *extra))
    agent.log_path = tmp / f"{name}.log"
    return agent


def _llm(chat: ChatServer, name: str) -> tuple[str, ...]:
    return ("--llm", f"--llm-url={chat.url(name)}", "--llm-model=scripted", "--llm-timeout=10")


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    tmp = tmp_path_factory.mktemp("llm")
    chat = ChatServer().start()
    human = _agent(tmp, "human")
    billing = _agent(tmp, "billing", f"--route=human={human.url}", *_llm(chat, "billing"))
    triage = _agent(
        tmp,
        "triage",
        f"--route=billing={billing.url}",
        f"--route=logistics=http://127.0.0.1:{free_port()}/",  # never reached: outside scope
        "--scope=invoices,refunds",
        f"--contracts={ROOT / 'contracts'}",
        *_llm(chat, "triage"),
    )
    agents = [human, billing, triage]
    wire_trust(agents)
    for agent in agents:
        agent.start()
    try:
        yield Shop(chat, triage, billing, human, tmp)
    finally:
        for agent in agents:
            agent.stop()
        chat.stop()


def send(agent: AgentProcess, text: str, **more: Any) -> dict[str, Any]:
    params = message(text)
    params["message"].update(more)
    task: dict[str, Any] = result(agent.rpc("SendMessage", params))["task"]
    return task


def get(agent: AgentProcess, task_id: str) -> dict[str, Any]:
    task: dict[str, Any] = result(agent.rpc("GetTask", {"id": task_id}))
    return task


def state(task: dict[str, Any]) -> str:
    return str(task["status"]["state"])


def status_text(task: dict[str, Any]) -> str:
    return " ".join(p.get("text", "") for p in task["status"]["message"]["parts"])


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def contents(request: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in request["messages"]]


def test_the_model_transfers_to_billing_after_correcting_a_contract_violation(
    shop: Shop,
) -> None:
    shop.chat.script(
        "triage",
        Call("transfer_to_billing", {"intent": "money back", "summary": "Refund, order 12345"}),
        Call("transfer_to_billing", REFUND),
    )
    shop.chat.script(
        "billing",
        Call("lookup_order", {"order_id": "12345"}),
        Say("Order 12345 was charged $49.99. Shall I refund it?"),
        Call("issue_refund", {"order_id": "12345", "amount": 49.99}),
        Say("Done: $49.99 refunded on order 12345."),
    )
    before = len(shop.chat.requests["triage"])
    task = send(shop.triage, "I was charged for order 12345 and want my money back")
    assert state(task) == "TASK_STATE_COMPLETED"  # TRANSFERRED, rendered for plain clients
    transfer = ext(task)["transfer"]
    assert transfer["agentName"] == "billing"
    # The tool's handoff (`ctx.handoffs.hand_off`) was checkpointed as a returned one is.
    checkpointed = f"handoff {transfer['handoffId']} triage -> billing: checkpointed"
    assert checkpointed in (shop.tmp / "triage.log").read_text()

    # The first call broke the contract (intent must be refund or invoice): the model was
    # told why, as the tool's result, and called again with what the contract wants.
    asked = shop.chat.requests["triage"][before:]
    assert len(asked) == 2
    tools = {t["function"]["name"]: t["function"] for t in asked[0]["tools"]}
    assert tools["transfer_to_billing"]["parameters"]["required"] == ["intent", "summary"]
    assert "Refunds and invoices for orders" in tools["transfer_to_billing"]["description"]
    refusal = tool_results(asked[1])[0]
    assert "contract triage-to-billing refused" in refusal
    assert "intent" in refusal

    # Billing's model saw the transfer context, called the function tool and used its
    # result; its question left the task waiting for the user.
    billing_task = wait_for(
        lambda: (
            state(t := get(shop.billing, transfer["taskId"])) == "TASK_STATE_INPUT_REQUIRED" and t
        )
    )
    first, second = shop.chat.requests["billing"][-2:]
    handed = " ".join(c for role, c in contents(first) if role == "system")
    assert "handed over to you by triage" in handed
    assert "Refund on order 12345" in handed
    assert json.loads(tool_results(second)[0])["charged"] == 49.99
    assert "Shall I refund it?" in status_text(billing_task)

    # The user's answer continues the same chat there, rebuilt from the stored task.
    done = send(
        shop.billing, "yes please", taskId=billing_task["id"], contextId=billing_task["contextId"]
    )
    assert state(done) == "TASK_STATE_COMPLETED", done
    third = shop.chat.requests["billing"][-2]
    said = contents(third)
    assert ("assistant", "Order 12345 was charged $49.99. Shall I refund it?") in said
    assert said[-1] == ("user", "yes please")
    full = get(shop.billing, billing_task["id"])
    refunds = [a for a in full.get("artifacts", []) if a.get("name") == "refund"]
    assert len(refunds) == 1
    assert "$49.99 refunded" in status_text(full)


def test_the_model_asks_billing_and_goes_on_with_the_answer(shop: Shop) -> None:
    shop.chat.script("triage", Call("ask_billing", REFUND), Say("Billing noted your refund."))
    shop.chat.script("billing", Say("Refund noted for order 12345."))
    before = len(shop.chat.requests["triage"])
    task = send(shop.triage, "has my refund for order 12345 been noted?")
    assert state(task) == "TASK_STATE_COMPLETED"
    assert "transfer" not in ext(task)  # triage kept the conversation
    assert status_text(task) == "Billing noted your refund."
    asked = shop.chat.requests["triage"][before:]
    tools = {t["function"]["name"]: t["function"] for t in asked[0]["tools"]}
    assert "transfer_to_billing" in tools
    assert "the conversation stays with you" in tools["ask_billing"]["description"]
    assert tools["ask_billing"]["parameters"] == tools["transfer_to_billing"]["parameters"]
    answer = json.loads(tool_results(asked[1])[0])
    assert answer == {"state": "COMPLETED", "text": "Refund noted for order 12345."}
    [record] = ext(task)["delegations"].values()
    assert record["agent"] == "billing"


def test_a_gate_refusal_goes_back_to_the_model_which_chooses_again(shop: Shop) -> None:
    shop.chat.script(
        "triage",
        Call("transfer_to_logistics", {"intent": "shipping", "summary": "Where is my refund?"}),
        Call("transfer_to_billing", REFUND),
    )
    shop.chat.script("billing", Say("Refund noted for order 12345."))
    before = len(shop.chat.requests["triage"])
    task = send(shop.triage, "where is the refund for order 12345")
    assert ext(task)["transfer"]["agentName"] == "billing"
    asked = shop.chat.requests["triage"][before:]
    refusal = tool_results(asked[1])[0]
    assert "capability gate refused" in refusal
    assert "outside this agent's scope: shipping" in refusal


def test_refusals_past_the_limit_fail_the_task_with_the_reason(shop: Shop) -> None:
    shop.chat.script(
        "triage", *[Call("transfer_to_billing", {"intent": "nope", "summary": "x"})] * 4
    )
    task = send(shop.triage, "refund please, order 12345")
    assert state(task) == "TASK_STATE_FAILED"
    assert "refused 4 times" in status_text(task)
    assert "triage-to-billing" in status_text(task)


def test_a_held_back_refund_escalates_and_runs_once_when_approved(shop: Shop) -> None:
    shop.chat.script(
        "billing",
        Call("issue_refund", {"order_id": "4242", "amount": 750.0}),
        Say("Refunded $750.00 on order 4242 after approval."),
    )
    task = send(shop.billing, "refund $750 on order 4242, it never arrived")
    assert state(task) == "TASK_STATE_COMPLETED"
    assert ext(task)["transfer"]["agentName"] == "human"  # escalated, nothing refunded yet
    operator = Cli(shop.tmp / "operator.json")

    def waiting() -> dict[str, Any] | None:
        code, items = operator.events("inbox", "--agent", shop.human.url)
        assert code == 0
        return next((i for i in items if i.get("sourceTaskId") == task["id"]), None)

    item = wait_for(waiting, timeout=20)
    assert item["trigger"] == "high_impact"
    assert "issue_refund" in item["whatIsNeeded"]
    code, out = operator.run("approve", item["taskId"], "ok", "--agent", shop.human.url)
    assert code == 0, out

    def refunded() -> list[dict[str, Any]]:
        params = {"contextId": task["contextId"], "includeArtifacts": True}
        tasks = result(shop.billing.rpc("ListTasks", params))["tasks"]
        return [t for t in tasks if state(t) == "TASK_STATE_COMPLETED" and t["id"] != task["id"]]

    returned = wait_for(refunded, timeout=20)
    refunds = [a for t in returned for a in t.get("artifacts", []) if a.get("name") == "refund"]
    assert len(refunds) == 1  # the tool ran once, after the approval
    assert refunds[0]["parts"][0]["data"]["amount"] == 750.0
    last = shop.chat.requests["billing"][-1]
    assert "Refund of $750.00 issued for order 4242." in tool_results(last)
    assert any("approved" in c for role, c in contents(last) if role == "system")


def test_the_model_escalates_through_the_tool_and_reads_the_operator_s_answer(
    shop: Shop,
) -> None:
    complete = {
        "what_happened": "The customer wants to close an account that has unpaid orders.",
        "what_was_tried": ["Listed the orders of the account: two are unpaid."],
        "what_is_needed": "a decision on closing the account before the orders are paid",
        "need": "decision",
    }
    shop.chat.script(
        "billing",
        Call("escalate_to_human", {**complete, "what_happened": "stuck", "what_was_tried": []}),
        Call("escalate_to_human", complete),
        Say("An operator decided: the account stays open until the orders are paid."),
    )
    task = send(shop.billing, "close my account now")
    assert ext(task)["transfer"]["agentName"] == "human"
    # "stuck" is not an escalation: the model was told so, and said it properly.
    said = tool_results(shop.chat.requests["billing"][-1])[0]
    assert "the escalation is incomplete" in said
    operator = Cli(shop.tmp / "operator-2.json")

    def waiting() -> dict[str, Any] | None:
        code, items = operator.events("inbox", "--agent", shop.human.url)
        assert code == 0
        return next((i for i in items if i.get("sourceTaskId") == task["id"]), None)

    item = wait_for(waiting, timeout=20)
    assert item["whatHappened"] == complete["what_happened"]
    assert item["whatWasTried"] == complete["what_was_tried"]
    assert item["whatIsNeeded"] == complete["what_is_needed"]
    assert (item["need"], item["trigger"]) == ("decision", "value_uncertainty")
    text = "keep it open until the orders are paid"
    code, out = operator.run("reply", item["taskId"], text, "--agent", shop.human.url)
    assert code == 0, out

    def answered() -> list[dict[str, Any]]:
        tasks = result(shop.billing.rpc("ListTasks", {"contextId": task["contextId"]}))["tasks"]
        return [t for t in tasks if state(t) == "TASK_STATE_COMPLETED" and t["id"] != task["id"]]

    back = wait_for(answered, timeout=20)[0]
    assert "stays open" in status_text(back)
    last = shop.chat.requests["billing"][-1]
    notes = " ".join(c for role, c in contents(last) if role == "system")
    assert f"An operator answered the escalation: answered (by operator): {text}" in notes
    # The earlier turns came back with the decision: the chat goes on where it stopped.
    assert ("user", "close my account now") in contents(last)


def test_tokens_stream_as_chunks_of_one_artifact_before_the_task_completes(shop: Shop) -> None:
    hold = threading.Event()
    text = "I route billing and logistics questions: tell me what happened."
    shop.chat.script("triage", Say(text, chunks=4, hold=hold))
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": message("hi")}
    chunks: list[dict[str, Any]] = []
    states: list[str] = []
    early = False
    with (
        httpx.Client(timeout=30) as http,
        http.stream("POST", shop.triage.url, json=body, headers=A2A_HEADERS) as response,
    ):
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])["result"]
            if "artifactUpdate" in event:
                if not chunks:
                    early = not hold.is_set()  # the model is still holding its answer
                    hold.set()
                chunks.append(event["artifactUpdate"])
            elif "statusUpdate" in event:
                states.append(event["statusUpdate"]["status"]["state"])
    assert early
    assert states[-1] == "TASK_STATE_COMPLETED"
    assert len({c["artifact"]["artifactId"] for c in chunks}) == 1
    assert len(chunks) >= 4
    assert chunks[-1]["lastChunk"] is True
    streamed = "".join(p.get("text", "") for c in chunks for p in c["artifact"]["parts"])
    assert streamed == text


@pytest.fixture(scope="module")
def solo(shop: Shop) -> Iterator[AgentProcess]:
    """A triage of its own, routed to billing — which does not trust it."""
    agent = _agent(
        shop.tmp, "triage", f"--route=billing={shop.billing.url}", *_llm(shop.chat, "solo")
    )
    agent.store = f"sqlite:///{shop.tmp / 'solo.db'}"
    agent.start()
    try:
        yield agent
    finally:
        agent.stop()


def test_a_refusal_by_the_target_goes_back_to_the_model(solo: AgentProcess, shop: Shop) -> None:
    shop.chat.script(
        "solo",
        Call("transfer_to_billing", {"reason": "refund", "summary": "Refund on order 12345"}),
        Say("Billing cannot take this over from me; please write to billing directly."),
    )
    task = send(solo, "refund order 12345 please")
    # Billing took nothing (it does not trust this agent): the model read the refusal as the
    # tool's result and answered the user itself; the task completed here.
    assert state(task) == "TASK_STATE_COMPLETED", task
    assert "transfer" not in ext(task)
    assert ext(task)["refused"]["reason"].startswith("billing rejected the handoff")
    refusal = tool_results(shop.chat.requests["solo"][-1])[0]
    assert refusal.startswith("refused: billing rejected the handoff")
    assert "write to billing directly" in status_text(task)


def test_a_kill_mid_model_call_fails_the_task_on_restart_and_chats_go_on(
    solo: AgentProcess, shop: Shop
) -> None:
    release = threading.Event()
    shop.chat.script("solo", Say("Which order is it about?"), Hang(release))
    before = len(shop.chat.requests["solo"])
    asked = send(solo, "my parcel is late")
    assert state(asked) == "TASK_STATE_INPUT_REQUIRED"
    params = message("hello there", returnImmediately=True)
    started = result(solo.rpc("SendMessage", params))["task"]
    wait_for(lambda: len(shop.chat.requests["solo"]) == before + 2)
    solo.kill()  # kill -9 while the model is answering
    release.set()
    shop.chat.script("solo", Say("Thanks, order 12345 is on its way."))
    solo.start()
    # The call died with the process: its task fails as any interrupted task does (a model
    # call is not replayed).
    failed = wait_for(lambda: state(t := get(solo, started["id"])) != "TASK_STATE_WORKING" and t)
    assert state(failed) == "TASK_STATE_FAILED"
    assert RESTART_REASON in status_text(failed)
    # The task waiting for an answer survived the restart, and its chat goes on from the
    # store: the model sees its own question and the answer.
    done = send(solo, "order 12345", taskId=asked["id"], contextId=asked["contextId"])
    assert state(done) == "TASK_STATE_COMPLETED"
    assert len(shop.chat.requests["solo"]) == before + 3  # no model call was made twice
    assert contents(shop.chat.requests["solo"][-1])[1:] == [
        ("user", "my parcel is late"),
        ("assistant", "Which order is it about?"),
        ("user", "order 12345"),
    ]


def test_an_endpoint_answering_garbage_or_down_fails_the_task_clearly(shop: Shop) -> None:
    shop.chat.script("triage", Garbage())
    started = time.monotonic()
    task = send(shop.triage, "hello")
    assert state(task) == "TASK_STATE_FAILED"
    assert "the model at http://127.0.0.1" in status_text(task)
    down = _agent(shop.tmp, "triage", "--llm", f"--llm-url=http://127.0.0.1:{free_port()}/v1")
    down.store = f"sqlite:///{shop.tmp / 'down.db'}"
    down.start()
    try:
        task = send(down, "hello")
    finally:
        down.stop()
    assert state(task) == "TASK_STATE_FAILED"
    assert "connection refused or lost" in status_text(task)
    assert time.monotonic() - started < 15  # never a hang
