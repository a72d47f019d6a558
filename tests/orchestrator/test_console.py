"""The console in a real browser (headless Chromium driven by selenium): a real handoff chain
and an escalation are drawn live, the operator approves in the page, the task completes, and
the decision it carried reads as one. The layout holds at 1,280 and 1,920 px beside a
four-hop chain (screenshots in the test's tmp dir, the inbox's buttons inside the window); a
transfer to an agent the console does not watch points at a stand-in box.

Skipped only when Chromium or its driver is not installed (`scripts/bootstrap` installs the
Debian packages `chromium` and `chromium-driver`). Set CONSOLE_SCREENSHOT=PATH to save the
page as a picture (the README's is docs/console.png, made so).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser_support import chromium, needs_chromium
from tests.integration.handoff_support import message, result, wait_for
from tests.support import ROOT, AgentProcess, Cli, _http, free_port, wire_trust

pytestmark = needs_chromium

BIG_REFUND = "I was charged twice, I want a refund of $750 for order 4242"


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[AgentProcess]]:
    tmp = tmp_path_factory.mktemp("console")

    def agent(name: str, *extra: str) -> AgentProcess:
        process = AgentProcess(
            name, f"sqlite:///{tmp / name}.db", extra=("--recovery-interval", "0.3", *extra)
        )
        process.log_path = tmp / f"{name}.log"
        return process

    human = agent("human")
    billing = agent("billing", f"--route=human={human.url}")
    triage = agent("triage", f"--route=billing={billing.url}")
    processes = [human, billing, triage]
    wire_trust(processes)
    for process in processes:
        process.start()
    try:
        yield processes
    finally:
        for process in processes:
            process.stop()


@contextlib.contextmanager
def console_of(agents: list[AgentProcess], tmp: Path, key: str = "") -> Iterator[str]:
    """`python -m orchestrator console` watching `agents` (with the API key `key`, given as
    `env:` as a secret is): the URL it printed, with its token."""
    port = free_port()
    urls = [a for p in agents for a in ("--agent", p.url)]
    keys = ["--api-key", "env:CONSOLE_KEY"] if key else []
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "--session",
            str(tmp / "s.json"),
            *keys,
            "console",
            *urls,
            "--port",
            str(port),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "CONSOLE_KEY": key},
    )
    assert proc.stdout is not None
    # The URL with the run's token, as the console prints it for the operator to open.
    line = proc.stdout.readline()
    url = line.split()[2]
    assert url.startswith(f"http://127.0.0.1:{port}/?token="), line
    try:
        wait_for(lambda: _http().get(url, timeout=1).status_code == 200, timeout=20)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        proc.stdout.close()


@pytest.fixture(scope="module")
def console(agents: list[AgentProcess], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with console_of(agents, tmp_path_factory.mktemp("console-session")) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as driver:
        yield driver


# -- reading the page (each read in one script: atomic with a redraw) ---------------------


def page_wait(driver: Any) -> Any:
    """A wait that retries reads a redraw cut short: an element found a moment ago may be
    gone, as the page redraws on every snapshot."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(
        driver, 40, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)
    )


def drawn(driver: Any, context: str) -> list[list[str]]:
    """The boxes of a conversation's chain: [agent, state], in order."""
    found: list[list[str]] = driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])]"
        ".map(b => [b.dataset.agent, b.dataset.state])",
        f'.chain[data-context="{context}"] .box',
    )
    return found


def kinds(driver: Any, context: str) -> list[str]:
    """The arrows of a conversation's chain: their kinds, in order."""
    found: list[str] = driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(a => a.dataset.kind)",
        f'.chain[data-context="{context}"] .arrow',
    )
    return found


def task_of(wait: Any, css: str) -> str:
    """The task id of the box `css` finds, read in one script: a box found and then asked
    for its id may be gone in between, as the page redraws on every snapshot."""
    found: str = wait.until(
        lambda d: d.execute_script(
            "const box = document.querySelector(arguments[0]); return box && box.dataset.task",
            css,
        )
    )
    return found


def click(driver: Any, css: str) -> bool:
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, css).click()
    return True


def open_page(driver: Any, url: str) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen

    driver.get(url)
    wait = page_wait(driver)
    wait.until(seen.text_to_be_present_in_element((By.ID, "live"), "live"))
    return wait


def test_the_console_draws_the_chain_and_the_operator_approves_in_the_page(
    agents: list[AgentProcess], console: str, browser: object
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions as seen

    driver: WebDriver = browser  # type: ignore[assignment]
    _human, _billing, triage = agents
    wait = open_page(driver, console)
    # Every agent's health is shown.
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".agent-health")) == 3)

    # The user's refund: triage → billing → (escalation) human, while the page is open.
    task = result(triage.rpc("SendMessage", message(BIG_REFUND)))["task"]
    context = task["contextId"]
    chain = f'.chain[data-context="{context}"]'
    expected = [["triage", "transferred"], ["billing", "transferred"], ["human", "input_required"]]
    wait.until(lambda d: drawn(d, context) == expected)
    assert kinds(driver, context) == ["handoff", "escalation"]
    label: str = driver.execute_script(
        "return document.querySelector(arguments[0]).textContent", f"{chain} .arrow"
    )
    assert "refund request" in label

    # Clicking a box shows its detail: the envelope it came with, its ledger rows.
    wait.until(lambda d: click(d, f'{chain} .box[data-agent="billing"]'))
    wait.until(seen.text_to_be_present_in_element((By.ID, "detail-body"), "Ledger rows"))
    detail = driver.find_element(By.ID, "detail-body").text
    assert "Customer asks for help with a refund on order 4242" in detail  # transfer context
    assert '"outcome": "accepted"' in detail  # its received ledger row
    wait.until(lambda d: click(d, "#detail-close"))

    # The operator's inbox holds the escalation; approve it in the page.
    escalation = task_of(wait, f'{chain} .box[data-agent="human"]')
    mine = f'#inbox .item[data-task="{escalation}"]'
    item = wait.until(
        lambda d: (
            d.find_element(By.CSS_SELECTOR, mine)
            if d.find_elements(By.CSS_SELECTOR, mine)
            else None
        )
    )
    assert "permission to refund $750.00 on order 4242" in item.text
    # What the decision binds, derived from the signed fingerprint's inputs.
    assert 'refund {"orderId":"4242"} for $750.00 — billing acts on it once approved' in item.text
    screenshot = os.environ.get("CONSOLE_SCREENSHOT")
    if screenshot:  # the chain waiting for the operator, as the README shows it
        driver.save_screenshot(screenshot)
    item.find_element(By.CSS_SELECTOR, "textarea").send_keys("verified with the bank")
    item.find_element(By.CSS_SELECTOR, "button.approve").click()
    wait.until(seen.text_to_be_present_in_element((By.CSS_SELECTOR, f"{mine} .result"), "approved"))

    # The decision returns to billing, whose new task completes: drawn as a return.
    done = f'{chain} .box[data-agent="billing"][data-state="completed"]'
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, done))
    wait.until(lambda d: kinds(d, context) == ["handoff", "escalation", "return"])
    # No longer waiting, and redrawn since: the answered card stays, saying what it came to
    # (the redraw used to wipe it, at times before the operator could read it).
    kept = driver.find_element(By.CSS_SELECTOR, f"{mine}.answered .result").text
    assert kept.startswith("approved: the decision goes back to"), kept

    # Its detail shows the decision as a person reads it (it was one raw JSON string in the
    # history, running off the panel): verdict, operator, note, action, signer — all inside.
    wait.until(lambda d: click(d, done))
    wait.until(seen.text_to_be_present_in_element((By.ID, "detail-body"), "Ledger rows"))
    decision = driver.find_element(By.CSS_SELECTOR, "#detail-body dl.decision").text
    for shown in (
        "Verdict\napproved",
        "Note\nverified with the bank",
        'Action\nrefund {"orderId":"4242"} for $750.00',
        "Answers\nbilling's escalation: permission to refund $750.00 on order 4242",
        "Signed\nby human for billing, expires ",
    ):
        assert shown in decision, decision
    history = driver.find_element(By.CSS_SELECTOR, "#detail-body .msg").text
    assert '{"decision"' not in history, history  # its data folded, not dumped raw
    overflowing: list[str] = driver.execute_script(
        "return [...document.querySelectorAll('#detail-body *')]"
        ".filter(e => e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0)"
        ".map(e => e.tagName + ': ' + e.textContent.slice(0, 80))"
    )
    assert not overflowing  # every line wraps inside the panel: nothing scrolls sideways
    wait.until(lambda d: click(d, "#detail-close"))


def test_the_inbox_stays_in_view_beside_a_four_hop_chain_at_1280_and_1920_px(
    agents: list[AgentProcess], console: str, browser: object, tmp_path: Path
) -> None:
    # Before: the chains' column grew to the widest chain, pushing the inbox (and its Deny
    # button) out of a 1,400 px window.
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver

    driver: WebDriver = browser  # type: ignore[assignment]
    _human, _billing, triage = agents
    wait = open_page(driver, console)

    # One conversation, four hops: two small refunds, then a large one escalated.
    def sent(text: str, context: str | None, boxes: list[list[str]]) -> str:
        """The message sent in `context`, once the page draws its tasks (one at a time:
        the chain's order is the order they were made in)."""
        task = result(triage.rpc("SendMessage", message(text, context)))["task"]
        wait.until(lambda d: drawn(d, task["contextId"])[: len(boxes)] == boxes)
        return str(task["contextId"])

    small = [["triage", "transferred"], ["billing", "completed"]]
    context = sent("refund $20 for order 1111", None, small)
    sent("refund $30 for order 2222", context, small * 2)
    sent(BIG_REFUND, context, [*small, *small, ["triage", "transferred"]])
    wait.until(lambda d: drawn(d, context)[-1:] == [["human", "input_required"]])
    assert kinds(driver, context) == ["handoff", "handoff", "handoff", "escalation"]
    chain = f'.chain[data-context="{context}"]'
    escalation = task_of(wait, f'{chain} .box[data-agent="human"]')
    mine = f'#inbox .item[data-task="{escalation}"]'
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f"{mine} button.deny"))
    try:
        for width in (1280, 1920):
            driver.execute_cdp_cmd(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": 800, "deviceScaleFactor": 1, "mobile": False},
            )
            wait.until(lambda d, w=width: d.execute_script("return innerWidth") == w)
            driver.execute_script("scrollTo(0, 0)")
            driver.save_screenshot(str(tmp_path / f"console-{width}.png"))
            layout: dict[str, Any] = driver.execute_script(
                """const chain = document.querySelector(arguments[0] + ' .chain-row');
                const row = chain.getBoundingClientRect();
                const newest = [...chain.querySelectorAll('.box')].pop().getBoundingClientRect();
                return {
                  newestInView: row.left <= newest.left && newest.right <= row.right,
                  buttons: [...document.querySelectorAll(arguments[1] + ' button')].map(b => {
                    const r = b.getBoundingClientRect();
                    return [b.textContent, r.left, r.top, r.right, r.bottom];
                  }),
                  pageWidth: document.documentElement.scrollWidth,
                  chainOverflows: chain.scrollWidth > chain.clientWidth,
                };""",
                chain,
                mine,
            )
            assert [b[0] for b in layout["buttons"]] == ["Approve", "Deny", "Reply"]
            outside = [
                (name, left, top, right, bottom)
                for name, left, top, right, bottom in layout["buttons"]
                if not (0 <= left < right <= width and 0 <= top < bottom <= 800)
            ]
            assert not outside, (width, outside)  # every button whole inside the window
            assert layout["pageWidth"] <= width  # the page itself does not scroll sideways
            assert layout["chainOverflows"]  # the chain is wider than its column: it scrolls
            assert layout["newestInView"]  # ... and shows its newest end: the escalation
            assert (tmp_path / f"console-{width}.png").stat().st_size > 0
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    # The Deny button is where it is seen, and works.
    wait.until(lambda d: click(d, f"{mine} button.deny"))
    wait.until(lambda d: drawn(d, context)[-1:] == [["billing", "rejected"]])
    kept = driver.find_element(By.CSS_SELECTOR, f"{mine}.answered .result").text
    assert kept.startswith("denied: the decision goes back to"), kept  # kept in view


def test_a_transfer_to_an_agent_not_watched_points_at_it(
    agents: list[AgentProcess], browser: object, tmp_path: Path
) -> None:
    # Before: a box that transferred to an agent the console does not watch had no arrow out.
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver

    driver: WebDriver = browser  # type: ignore[assignment]
    human, billing, triage = agents
    with console_of([triage, billing], tmp_path) as url:  # not the human agent
        wait = open_page(driver, url)
        task = result(triage.rpc("SendMessage", message(BIG_REFUND)))["task"]
        context = task["contextId"]
        chain = f'.chain[data-context="{context}"]'
        expected = [["triage", "transferred"], ["billing", "transferred"], ["human", "unwatched"]]
        wait.until(lambda d: drawn(d, context) == expected)
        assert kinds(driver, context) == ["handoff", "transfer"]
        ghost = driver.find_element(By.CSS_SELECTOR, f"{chain} .box.ghost")
        assert ghost.text.splitlines()[:2] == ["human", "not watched here"]
        target = ghost.get_attribute("data-task")
        arrow = driver.find_element(By.CSS_SELECTOR, f'{chain} .arrow[data-to="{target}"]')
        assert "escalated" in arrow.text
        driver.save_screenshot(str(tmp_path / "console-unwatched.png"))
        # The decision comes back from the agent not watched: the return starts at its box.
        operator = Cli(tmp_path / "operator.json")
        code, items = operator.events("inbox", "--agent", human.url)
        assert code == 0
        (item,) = [i for i in items if i["taskId"] == target]
        code, out = operator.run("approve", target, "--agent", human.url)
        assert code == 0, out
        wait.until(lambda d: kinds(d, context) == ["handoff", "transfer", "return"])
        assert drawn(driver, context)[-1] == ["billing", "completed"]
        start: str = driver.execute_script(
            "return document.querySelector(arguments[0]).getAttribute('d')",
            f"{chain} .arrow.return path",
        )
        ghost_x: float = driver.execute_script(
            "return document.querySelector(arguments[0]).getBBox().x", f"{chain} .box.ghost rect"
        )
        assert float(start[1:].split(",")[0]) > ghost_x  # it leaves the stand-in box
        driver.get("about:blank")  # its stream closed: the console stops at once
    assert item["source"] == "billing"


def test_the_console_refuses_a_foreign_host_a_foreign_origin_and_no_token(
    console: str, browser: object
) -> None:
    # Before: a page the operator opened could rebind its name to 127.0.0.1, read every
    # conversation from /api/events and approve through /api/answer with the operator's keys.
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver

    driver: WebDriver = browser  # type: ignore[assignment]
    base, token = console.split("?token=")
    port = base.rstrip("/").rsplit(":", 1)[1]
    # In the browser: the console's own URL under a rebound name is refused, token and all.
    driver.get(f"http://rebound.test:{port}/?token={token}")
    assert "answers only at its own address" in driver.find_element(By.TAG_NAME, "body").text
    driver.get(f"http://rebound.test:{port}/api/events?token={token}")
    assert "answers only at its own address" in driver.find_element(By.TAG_NAME, "body").text
    # From another origin, even one that knows the token: refused before anything is done.
    answer = {"agent": "http://127.0.0.1:1/", "taskId": "t", "action": "approve"}
    foreign = _http().post(
        base + "api/answer",
        json=answer,
        headers={"Origin": "http://attacker.test", "X-Console-Token": token},
    )
    assert foreign.status_code == 403
    assert "its own page" in foreign.json()["error"]
    # Without the token: nothing, not even the page.
    for path in ("", "api/events", "api/task?agent=x&id=y"):
        assert _http().get(base + path, timeout=5).status_code == 403
    assert _http().post(base + "api/answer", json=answer).status_code == 403
    # With it, from the console's own page: answered (here: a bad request, not a refusal).
    own = _http().post(
        base + "api/answer",
        json=answer,
        headers={"Origin": base.rstrip("/"), "X-Console-Token": token},
    )
    assert own.status_code == 400
