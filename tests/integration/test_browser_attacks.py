"""A web page the operator opens cannot drive the agents: the example agents as `python -m
servers all` starts them (no API keys), a refund over the escalation limit waiting for the
operator at the human agent, and a page that tries to read the inbox and answer "approve".

Before: the page rebound its name to 127.0.0.1 and sent `text/plain` bodies (no CORS
preflight) with `?A2A-Version=1.0` in the query; the agents checked neither `Host` nor
`Origin`, listed the human agent's inbox to it and took its "approve": the refund was paid
with no operator. Now each such request is refused (403, -32107, or -32005 for the body
type) and the refund waits for the operator — from raw HTTP requests as the page makes them,
and from a real headless Chromium.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from servers.payments import Payments
from tests.browser_support import REBOUND, chromium, needs_chromium
from tests.integration.handoff_support import wait_for
from tests.support import AgentProcess, Cli, wire_trust

BIG_REFUND = "I was charged twice, I want a refund of $750 for order 4242"
PAGE_BODY = "text/plain;charset=UTF-8"  # what fetch() sends a string body as


@dataclass
class Desk:
    triage: AgentProcess
    billing: AgentProcess
    human: AgentProcess
    payments: Payments
    tmp: Path

    def all(self) -> list[AgentProcess]:
        return [self.human, self.billing, self.triage]


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desk]:
    tmp = tmp_path_factory.mktemp("browser-attacks")

    def agent(name: str, *extra: str) -> AgentProcess:
        process = AgentProcess(
            name, f"sqlite:///{tmp / name}.db", extra=("--recovery-interval", "0.3", *extra)
        )
        process.log_path = tmp / f"{name}.log"
        return process

    ledger = tmp / "payments.jsonl"
    human = agent("human")
    billing = agent("billing", f"--route=human={human.url}", f"--payments={ledger}")
    triage = agent("triage", f"--route=billing={billing.url}")
    desk = Desk(triage, billing, human, Payments(ledger), tmp)
    wire_trust(desk.all())
    for process in desk.all():
        process.start()
    try:
        yield desk
    finally:
        for process in desk.all():
            process.stop()


def escalated(desk: Desk, name: str) -> tuple[Any, dict[str, Any], Cli]:
    """A user's large refund, waiting for the operator: the user's CLI (running), the
    operator's inbox entry for it, and the operator's CLI."""
    user = Cli(desk.tmp / f"{name}-user.json")
    running = user.start("--wait", "90", "send", "--entry", desk.triage.url, BIG_REFUND)
    operator = Cli(desk.tmp / f"{name}-operator.json")

    def waiting() -> dict[str, Any] | None:
        code, items = operator.events("inbox", "--agent", desk.human.url)
        assert code == 0
        return next((i for i in items if "4242" in i["whatIsNeeded"]), None)

    item: dict[str, Any] = wait_for(waiting, timeout=30)
    return running, item, operator


def still_waiting(desk: Desk, operator: Cli, item: dict[str, Any]) -> None:
    """The escalation still waits for the operator, and nothing was paid."""
    code, items = operator.events("inbox", "--agent", desk.human.url)
    assert code == 0
    assert [i["taskId"] for i in items if i["taskId"] == item["taskId"]] == [item["taskId"]]
    assert desk.payments.payments() == []


def settle(desk: Desk, running: Any, operator: Cli, item: dict[str, Any]) -> None:
    """The operator denies: the user's conversation ends, nothing paid."""
    code, out = operator.run("deny", item["taskId"], "not today", "--agent", desk.human.url)
    assert code == 0, out
    code, events = Cli.finish(running)
    assert events[-1]["event"] in ("completed", "failed", "rejected"), events
    assert desk.payments.payments() == []


def rpc(method: str, params: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})


def approve(task_id: str) -> str:
    message = {"messageId": str(uuid.uuid4()), "taskId": task_id, "role": "ROLE_USER"}
    return rpc("SendMessage", {"message": {**message, "parts": [{"text": "approve"}]}})


def refused(response: httpx.Response, code: int) -> None:
    assert response.status_code in (200, 403), response.text
    assert response.json()["error"]["code"] == code, response.text
    assert "result" not in response.json()


def test_a_page_cannot_list_the_inbox_nor_approve_a_refund_over_http(desk: Desk) -> None:
    running, item, operator = escalated(desk, "http")
    port = desk.human.port
    entry = desk.human.url + "?A2A-Version=1.0"
    with httpx.Client(timeout=10) as http:
        # DNS rebinding: the page's own name, now pointing at 127.0.0.1, same-origin to it.
        rebound = {"Host": f"{REBOUND}:{port}", "Origin": f"http://{REBOUND}:{port}"}
        page = {**rebound, "Content-Type": PAGE_BODY}
        refused(http.post(entry, content=rpc("ListTasks", {}), headers=page), -32107)
        refused(http.post(entry, content=approve(item["taskId"]), headers=page), -32107)
        listed = http.get(desk.human.url + "tasks?A2A-Version=1.0", headers=rebound)
        assert listed.status_code == 403
        assert listed.json()["error"]["details"][0]["reason"] == "FOREIGN_REQUEST"
        card = http.get(desk.human.url + ".well-known/agent-card.json", headers=rebound)
        assert card.status_code == 403
        # A cross-site page posting to the agent's own address (fetch with mode no-cors).
        cross = {"Origin": "http://attacker.test", "Content-Type": PAGE_BODY}
        refused(http.post(entry, content=approve(item["taskId"]), headers=cross), -32107)
        rest = desk.human.url + "message:send?A2A-Version=1.0"
        body = json.loads(approve(item["taskId"]))["params"]
        assert http.post(rest, json=body, headers={"Origin": "null"}).status_code == 403
        # Sandboxed or not, a body a page sends unasked is refused whatever it holds.
        for kind in (PAGE_BODY, "application/x-www-form-urlencoded", "multipart/form-data"):
            refused(
                http.post(entry, content=approve(item["taskId"]), headers={"Content-Type": kind}),
                -32005,
            )
        form = http.post(rest, json=body, headers={"Content-Type": "text/plain"})
        assert form.status_code == 415
    still_waiting(desk, operator, item)
    settle(desk, running, operator, item)


PAGE_SCRIPT = """
const done = arguments[arguments.length - 1];
const call = async (url, method, params, mode) => {
  const body = JSON.stringify({jsonrpc: "2.0", id: 1, method: method, params: params});
  try {
    const answer = await fetch(url, {method: "POST", body: body, mode: mode});
    return {status: answer.status, text: mode === "no-cors" ? "" : await answer.text()};
  } catch (error) {
    return {status: -1, text: String(error)};
  }
};
const newId = () => "page-" + Math.random().toString(36).slice(2);  // no secure context
(async () => {
  const own = "/?A2A-Version=1.0";
  const inbox = await call(own, "ListTasks", {}, "same-origin");
  let task = arguments[0];
  try {
    const found = JSON.parse(inbox.text).result.tasks
      .find(t => t.status.state === "TASK_STATE_INPUT_REQUIRED");
    if (found) task = found.id;
  } catch (error) {}
  const message = {messageId: newId(), taskId: task, role: "ROLE_USER",
                   parts: [{text: "approve"}]};
  const answered = await call(own, "SendMessage", {message: message}, "same-origin");
  const direct = await call(arguments[1] + "?A2A-Version=1.0", "SendMessage",
                            {message: {...message, messageId: newId()}}, "no-cors");
  done({inbox: inbox, answered: answered, direct: direct});
})().catch(error => done({error: String(error)}));
"""


@needs_chromium
def test_a_rebound_page_in_a_real_browser_cannot_read_the_inbox_nor_approve(desk: Desk) -> None:
    from selenium.webdriver.common.by import By

    running, item, operator = escalated(desk, "browser")
    with chromium() as driver:
        driver.set_script_timeout(20)
        # The attacker's page, loaded under its name, then rebound to 127.0.0.1: what the
        # page now reaches at its own origin is the human agent.
        driver.get(f"http://{REBOUND}:{desk.human.port}/.well-known/agent-card.json")
        shown = driver.find_element(By.TAG_NAME, "body").text
        seen = driver.execute_async_script(PAGE_SCRIPT, item["taskId"], desk.human.url)
    assert "not this agent's" in shown
    assert seen["inbox"]["status"] == 403, seen
    assert json.loads(seen["inbox"]["text"])["error"]["code"] == -32107
    assert item["taskId"] not in seen["inbox"]["text"]
    assert seen["answered"]["status"] == 403, seen
    assert json.loads(seen["answered"]["text"])["error"]["code"] == -32107
    assert seen["direct"]["status"] == 0, seen  # opaque: sent, refused for its Origin
    still_waiting(desk, operator, item)
    settle(desk, running, operator, item)
