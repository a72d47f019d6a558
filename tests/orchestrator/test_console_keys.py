"""The console says why it does not see an agent's tasks: its key is no operator's there
(it reads only its own tasks), or the agent refuses its key."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser_support import chromium, needs_chromium
from tests.integration.handoff_support import message, result, wait_for
from tests.integration.trust_support import OPERATOR as DESK_OPERATOR
from tests.integration.trust_support import USERS, bank
from tests.orchestrator.test_console import console_of, open_page
from tests.support import AgentProcess

OPERATOR, CLERK = "k-operator-console-0001", "k-clerk-console-0002"


@pytest.fixture(scope="module")
def billing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    tmp = tmp_path_factory.mktemp("console-keys")
    keys = tmp / "keys"
    keys.write_text(f"op={OPERATOR}\nclerk={CLERK}\n")
    keys.chmod(0o600)
    process = AgentProcess(
        "billing",
        f"sqlite:///{tmp / 'billing.db'}",
        extra=("--auth-keys", str(keys), "--operators", "op"),
    )
    process.log_path = tmp / "billing.log"
    process.start()
    try:
        yield process
    finally:
        process.stop()


def console(agent: AgentProcess, key: str, tmp: Path) -> contextlib.AbstractContextManager[str]:
    """The console watching `agent` with the API key `key`: its printed URL."""
    return console_of([agent], tmp, key)


def watched(url: str) -> dict[str, Any]:
    """The agent's line in the console's snapshot, once it polled the agent."""
    token = url.split("token=")[1]
    base = url.split("/?")[0]

    def polled() -> dict[str, Any] | None:
        with httpx.stream("GET", f"{base}/api/events?token={token}", timeout=5) as events:
            for line in events.iter_lines():
                if line.startswith("data: "):
                    [agent] = json.loads(line[6:])["agents"]
                    return agent if "reachable" in agent else None
        return None

    found: dict[str, Any] = wait_for(polled, timeout=20)
    return found


@pytest.mark.timeout(90)
def test_the_console_says_its_key_reads_only_its_own_tasks_there(
    billing: AgentProcess, tmp_path: Path
) -> None:
    with console(billing, CLERK, tmp_path) as url:
        agent = watched(url)
    assert agent["reachable"] is True
    assert "not an operator's" in agent["unread"]
    assert "--operators clerk" in agent["unread"]
    with console(billing, OPERATOR, tmp_path) as url:
        agent = watched(url)
    assert agent["reachable"] is True
    assert "unread" not in agent


@pytest.mark.timeout(90)
def test_the_console_says_the_agent_refuses_its_key(billing: AgentProcess, tmp_path: Path) -> None:
    with console(billing, "k-not-a-key-of-billing", tmp_path) as url:
        agent = watched(url)
    assert agent["reachable"] is False, agent
    assert "refuses the console's key" in agent["unread"]
    assert "--keys-file" in agent["unread"]


@needs_chromium
@pytest.mark.timeout(120)
def test_the_page_says_why_beside_the_agent(billing: AgentProcess, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    with console(billing, CLERK, tmp_path) as url, chromium() as driver:
        wait = open_page(driver, url)
        row = '.agent-health[data-agent="billing"]'
        wait.until(lambda d: "not an operator's" in d.find_element(By.CSS_SELECTOR, row).text)
        assert "--operators clerk" in driver.find_element(By.CSS_SELECTOR, row).text


@needs_chromium
@pytest.mark.timeout(120)
def test_the_operator_sees_whose_escalation_it_is(tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    with bank(tmp_path) as agents:
        big = "I was charged twice, I want a refund of $750 for order 4242"
        reply = agents.triage.rpc("SendMessage", message(big), **{"X-API-Key": USERS["alice"]})
        context = result(reply)["task"]["contextId"]
        with console_of([agents.human], tmp_path, DESK_OPERATOR["op"]) as url, chromium() as driver:
            wait = open_page(driver, url)
            # The escalation came from billing, which triage handed alice's request to.
            card = "#inbox .item[data-task] dd.user"
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, card))
            assert driver.find_element(By.CSS_SELECTOR, card).text == "alice"
            arrow = f'.chain[data-context="{context}"] .arrow title'
            title = driver.execute_script(
                "return document.querySelector(arguments[0]).textContent", arrow
            )
            assert title.startswith("escalation (for alice): "), title
