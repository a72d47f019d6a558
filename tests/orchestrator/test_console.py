"""The console in a real browser (headless Chromium driven by selenium): a real handoff chain
and an escalation are drawn live, the operator approves in the page, the task completes.

Skipped only when Chromium or its driver is not installed (`scripts/bootstrap` installs the
Debian packages `chromium` and `chromium-driver`). Set CONSOLE_SCREENSHOT=PATH to save the
page as a picture (the README's is docs/console.png, made so).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.integration.handoff_support import message, result, wait_for
from tests.support import ROOT, AgentProcess, _http, free_port, wire_trust

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="Chromium is not installed (apt-get install chromium chromium-driver;"
    " scripts/bootstrap does it)",
)

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


@pytest.fixture(scope="module")
def console(agents: list[AgentProcess], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    urls = [a for p in agents for a in ("--agent", p.url)]
    session = tmp_path_factory.mktemp("console-session") / "s.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "--session", str(session), "console",
         *urls, "--port", str(port)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
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
def browser() -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1500,900",
                 # A name an attacker's DNS rebinds to 127.0.0.1 (the console must refuse it).
                 "--host-resolver-rules=MAP rebound.test 127.0.0.1"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_the_console_draws_the_chain_and_the_operator_approves_in_the_page(
    agents: list[AgentProcess], console: str, browser: object
) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    driver: WebDriver = browser  # type: ignore[assignment]
    _human, _billing, triage = agents
    driver.get(console)
    # The page redraws on every snapshot: an element found a moment ago may be gone.
    wait = WebDriverWait(
        driver, 20, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)
    )
    wait.until(seen.text_to_be_present_in_element((By.ID, "live"), "live"))
    # Every agent's health is shown.
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".agent-health")) == 3)

    # The user's refund: triage → billing → (escalation) human, while the page is open.
    task = result(triage.rpc("SendMessage", message(BIG_REFUND)))["task"]
    context = task["contextId"]
    chain = f'.chain[data-context="{context}"]'

    def drawn(d: WebDriver) -> list[list[str]]:  # read in one script: atomic with a redraw
        found: list[list[str]] = d.execute_script(
            "return [...document.querySelectorAll(arguments[0])]"
            ".map(b => [b.dataset.agent, b.dataset.state])",
            f"{chain} .box",
        )
        return found

    def kinds(d: WebDriver) -> list[str]:
        found: list[str] = d.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map(a => a.dataset.kind)",
            f"{chain} .arrow",
        )
        return found

    def click(css: str) -> bool:
        driver.find_element(By.CSS_SELECTOR, css).click()
        return True

    expected = [["triage", "transferred"], ["billing", "transferred"], ["human", "input_required"]]
    wait.until(lambda d: drawn(d) == expected)
    assert kinds(driver) == ["handoff", "escalation"]
    label: str = driver.execute_script(
        "return document.querySelector(arguments[0]).textContent", f"{chain} .arrow"
    )
    assert "refund request" in label

    # Clicking a box shows its detail: the envelope it came with, its ledger rows.
    wait.until(lambda d: click(f'{chain} .box[data-agent="billing"]'))
    wait.until(seen.text_to_be_present_in_element((By.ID, "detail-body"), "Ledger rows"))
    detail = driver.find_element(By.ID, "detail-body").text
    assert "Customer asks for help with a refund on order 4242" in detail  # transfer context
    assert '"outcome": "accepted"' in detail  # its received ledger row
    wait.until(lambda d: click("#detail-close"))

    # The operator's inbox holds the escalation; approve it in the page.
    item = wait.until(
        lambda d: d.find_element(By.CSS_SELECTOR, "#inbox .item")
        if d.find_elements(By.CSS_SELECTOR, "#inbox .item") else None
    )  # fmt: skip
    assert "permission to refund $750.00 on order 4242" in item.text
    # What the decision binds, derived from the signed fingerprint's inputs.
    assert 'refund {"orderId":"4242"} for $750.00 — billing acts on it once approved' in item.text
    screenshot = os.environ.get("CONSOLE_SCREENSHOT")
    if screenshot:  # the chain waiting for the operator, as the README shows it
        driver.save_screenshot(screenshot)
    item.find_element(By.CSS_SELECTOR, "textarea").send_keys("verified with the bank")
    item.find_element(By.CSS_SELECTOR, "button.approve").click()
    wait.until(seen.text_to_be_present_in_element((By.CSS_SELECTOR, "#inbox .result"),
                                                  "approved"))  # fmt: skip

    # The decision returns to billing, whose new task completes: drawn as a return.
    done = f'{chain} .box[data-agent="billing"][data-state="completed"]'
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, done))
    wait.until(lambda d: kinds(d) == ["handoff", "escalation", "return"])
    wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, "#inbox .item"))


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
    foreign = _http().post(base + "api/answer", json=answer, headers={
        "Origin": "http://attacker.test", "X-Console-Token": token})  # fmt: skip
    assert foreign.status_code == 403
    assert "its own page" in foreign.json()["error"]
    # Without the token: nothing, not even the page.
    for path in ("", "api/events", "api/task?agent=x&id=y"):
        assert _http().get(base + path, timeout=5).status_code == 403
    assert _http().post(base + "api/answer", json=answer).status_code == 403
    # With it, from the console's own page: answered (here: a bad request, not a refusal).
    own = _http().post(base + "api/answer", json=answer,
                       headers={"Origin": base.rstrip("/"), "X-Console-Token": token})  # fmt: skip
    assert own.status_code == 400
