"""The examples of the README and of every file in docs/, extracted and run, so they cannot
drift from the code.

Python: the README's ```python blocks run, in order, in one namespace — as a reader pastes them
into one session — after a prelude that binds only the names the docs leave to the reader
(`card`, `store`, the URLs, `model`, `png_bytes`; `uvicorn.run` records its arguments instead of
serving forever); each file of docs/ then runs its blocks in order in a copy of that namespace
(a topic builds on the README's agents). The greeter then runs as the README says (`uvicorn
module:app`) and greets.

Shell: every ```bash block is either run or named in SKIPPED with the reason. A block runs in
its own bash, with the README's ports mapped to free ones on 127.0.0.1, `.venv/bin/python`
to this interpreter, and servers it starts in the foreground put in the background (and
waited for); each command's exit code is checked, and the output the README shows under a
command must be in what the command printed.

JSON: every ```json block parses; an MCP host's `mcpServers` block names a command of the
package (`[project.scripts]`), which takes its arguments (run with `--help`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_handoff.server._card_route import CARD_PATH
from tests.postgres_support import psql
from tests.support import ROOT, free_port, free_ports
from tests.tls_support import TestCA

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCKS_OF = {page: FENCE.findall(page.read_text()) for page in PAGES}
BLOCKS = [block for page in PAGES for block in BLOCKS_OF[page]]
COMMANDS = (
    ".venv/bin/python",
    "python ",
    "curl ",
    "redis-server ",
    "R=",
    "P=",
    "psql ",
    "for ",
    "mkdir ",
    "pip ",
    "bench/",
    "scripts/",
)

# Blocks not run here, by their first line, and why.
SKIPPED = {
    "python -m a2a_handoff trust list": "tests/integration/test_pins.py runs both against an"
    " agent whose pinned peer an impostor replaced",
    "scripts/demo": "the demo and the whole suite: scripts/test runs both",
    "bench/run": "benchmarks are run by hand, never in the suite",
    "python -m servers billing --port 8102 --llm": "needs a model server (Ollama); tests/llm"
    " runs these agents with --llm against a chat-completions server of their own",
    "python -m servers all &": "the console: tests/orchestrator/test_console.py drives it in a"
    " real browser against real agents",
    "pip install 'a2a-handoff[otel]'": "needs an OTLP collector; traces across agents are"
    " tested with an in-memory exporter (tests/integration/test_traces.py)",
    ".venv/bin/python -m orchestrator serve": "tests/orchestrator/test_gateway.py runs the"
    " gateway with the official SDK clients (1.x on both bindings, 0.3), across a kill -9",
    "pip install 'a2a-handoff[agents]'": "scripts/bootstrap installs both extras; the docs'"
    " Python blocks import them, and the example pair runs below",
    "pip install .": "run below, in the checkout's root as the README says, into a target"
    " directory (not into the tests' own environment)",
    "docker build -t a2a-handoff": "needs a Docker daemon; tests/test_deploy.py checks the"
    " Dockerfile and the .dockerignore",
    ".venv/bin/python deploy/make_secrets.py": "tests/test_deploy.py runs it into a directory"
    " of its own, reads what it wrote as the agents do, and copies it as the entrypoint does",
    "docker compose -f deploy/compose.yaml": "needs a Docker daemon; tests/test_deploy.py"
    " parses compose.yaml, each command with its program's parser, and checks its references",
    "kubectl create secret generic a2a-postgres": "needs a cluster; tests/test_deploy.py"
    " checks that the Secrets made here are the ones the manifests mount, with their keys",
    "kubectl delete job a2a-migrate": "needs a cluster; tests/test_deploy.py checks the"
    " migration Job and the Deployments' probes, grace and budgets",
    "python -m servers billing --port 8102 --tls-cert": "tests/integration/test_tls.py runs"
    " these flags against real agents, with a test CA and certificates made there",
}


def python_blocks(page: Path = PAGES[0]) -> list[str]:
    return [body for lang, body in BLOCKS_OF[page] if lang == "python"]


def bash_blocks() -> list[str]:
    return [body for lang, body in BLOCKS if lang == "bash"]


def test_every_json_block_parses_and_a_hosts_mcp_command_runs() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    launched = 0
    for body in (body for lang, body in BLOCKS if lang == "json"):
        parsed = json.loads(body)
        servers = parsed.get("mcpServers", {}) if isinstance(parsed, dict) else {}
        for server in servers.values():
            module = scripts[server["command"]].split(":")[0].removesuffix(".__main__")
            command = [sys.executable, "-m", module, *server["args"], "--help"]
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, f"{server}: {done.stdout}{done.stderr}"
            assert "--entry" in done.stdout
            launched += 1
    assert launched, "docs/mcp.md shows a host's mcpServers block"


# -- Python --------------------------------------------------------------------------------


class _Uvicorn:
    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def run(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append((args, kwargs))


def test_the_python_examples_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from a2a_handoff import build_card, open_store

    monkeypatch.chdir(tmp_path)
    shutil.copytree(ROOT / "contracts", tmp_path / "contracts")
    (tmp_path / "data").mkdir()
    TestCA(tmp_path / "certs").issue("billing")  # the TLS example's files: ca.pem, billing.*
    uvicorn = _Uvicorn()
    namespace: dict[str, Any] = {
        "__name__": "readme",
        "card": build_card("example", "http://127.0.0.1:8000/"),
        "store": open_store("memory://"),
        "HUMAN_URL": "http://127.0.0.1:8104/",
        "BILLING_URL": "http://127.0.0.1:8102/",
        "model": None,  # used inside handlers only, never called here
        "png_bytes": b"\x89PNG",
        "httpx": httpx,
        "uvicorn": uvicorn,
    }
    run_blocks(PAGES[0], namespace)
    ran: dict[str, dict[str, Any]] = {}
    for page in PAGES[1:]:
        ran[page.name] = run_blocks(page, dict(namespace))
    assert sum(len(python_blocks(page)) for page in PAGES) >= 8
    assert uvicorn.calls, "the server-limits example calls uvicorn.run"
    assert type(ran["contracts.md"]["contracts"]).__name__ == "Catalog"


def test_the_two_agent_block_runs_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pasted on its own, as a reader tries it: it defines everything it uses."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (block,) = [b for b in python_blocks() if "class Triage" in b and "class Billing" in b]
    namespace: dict[str, Any] = {"__name__": "readme"}
    exec(compile(block, "README.md two agents", "exec"), namespace)
    cards = [namespace[app].state.a2a.card for app in ("triage_app", "billing_app")]
    assert [card.name for card in cards] == ["triage", "billing"]


def run_blocks(page: Path, namespace: dict[str, Any]) -> dict[str, Any]:
    for number, block in enumerate(python_blocks(page), 1):
        where = f"{page.relative_to(ROOT)} python block {number}"
        try:
            exec(compile(block, where, "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"{where} fails:\n{block}") from exc
    return namespace


def serve_greeter(directory: Path) -> tuple[int, subprocess.Popen[Any]]:
    """`uvicorn greeter:app` on a free port, once it serves there: a port another test's
    agent took between the probe and the bind (its uvicorn then exits) is tried again on
    another, and what answers must be the greeter (its card's name), not that agent."""
    for _ in range(3):
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "greeter:app", "--port", str(port)],
            cwd=directory,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_port(port, proc)
            card = httpx.get(f"http://127.0.0.1:{port}{CARD_PATH}", timeout=10).json()
            if proc.poll() is None and card.get("name") == "greeter":
                return port, proc
        except (AssertionError, httpx.HTTPError, ValueError):
            pass
        proc.terminate()
        proc.wait(10)
    raise AssertionError("the greeter did not serve on any of three free ports")


def test_the_greeter_serves_as_the_readme_says(tmp_path: Path) -> None:
    greeter = python_blocks()[0]
    assert "class Greeter" in greeter
    (tmp_path / "greeter.py").write_text(greeter)
    (tmp_path / "data").mkdir()
    port, proc = serve_greeter(tmp_path)
    try:
        url = f"http://127.0.0.1:{port}/"
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "Ada"}]}
            },
        }
        answer = httpx.post(url, json=body, headers={"A2A-Version": "1.0"}, timeout=10).json()
        task = answer["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"] == [{"text": "Hello, Ada!"}]
    finally:
        proc.terminate()
        proc.wait(10)


# -- shell ---------------------------------------------------------------------------------


@dataclass
class Command:
    text: str
    shown: list[str] = field(default_factory=list)  # output lines the README shows


def commands(block: str) -> list[Command]:
    """A block's commands (continuations and open quotes joined) with their shown output."""
    found: list[Command] = []
    pending = ""
    for line in block.splitlines():
        if not pending and not line.startswith(COMMANDS):
            if line.strip() and found:
                found[-1].shown.append(line.strip())
            continue
        pending = f"{pending}\n{line}" if pending else line
        if pending.endswith("\\"):
            continue
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # a quote still open: the command goes on
            continue
        found.append(Command(pending))
        pending = ""
    return found


def uncommented(text: str) -> str:
    """The command without its `# comments` (a `#` outside quotes, after a space)."""
    out: list[str] = []
    quote = ""
    skipping = False
    for i, char in enumerate(text):
        if skipping:
            skipping = char != "\n"
            if not skipping:
                out.append(char)
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or text[i - 1].isspace()):
            skipping = True
            continue
        out.append(char)
    return "\n".join(line.rstrip() for line in "".join(out).splitlines())


def wait_port(port: int, proc: subprocess.Popen[Any] | None = None, within: float = 30) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the server for port {port} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on port {port} after {within} s")


class Shell:
    """The README's shell, mapped to this machine: ports, interpreter, temp directory."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ports: dict[str, int] = {}
        base = free_ports(4)  # `servers all --base-port 8101`: four consecutive ports
        for i, readme_port in enumerate(("8101", "8102", "8103", "8104")):
            self.ports[readme_port] = base + i
        (tmp / "contracts").symlink_to(ROOT / "contracts")  # commands run from the repo root
        self.env = {
            **os.environ,
            "XDG_STATE_HOME": str(tmp / "state"),
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": str(ROOT),
        }

    def port(self, readme_port: str) -> int:
        if readme_port not in self.ports:
            self.ports[readme_port] = free_port()
        return self.ports[readme_port]

    def mapped(self, text: str) -> str:
        text = uncommented(text)
        text = text.replace(".venv/bin/python", shlex.quote(sys.executable))
        text = re.sub(r"(?<![\w/.-])python -m", f"{shlex.quote(sys.executable)} -m", text)
        text = text.replace("/tmp/redis-a2a", str(self.tmp / "redis-a2a"))
        text = text.replace("localhost:", "127.0.0.1:")
        return re.sub(r"\b(6390|8\d{3})\b", lambda m: str(self.port(m.group(1))), text)

    def run(self, block: str) -> list[tuple[Command, int, str]]:
        """Run the block's commands in one bash; each command's exit code and output."""
        script = ["cd " + shlex.quote(str(self.tmp))]
        listed = commands(block)
        for number, command in enumerate(listed):
            text = self.mapped(command.text)
            serves = re.search(r"-m servers |redis-server ", text) is not None
            if serves and not text.rstrip().endswith(("&", "& done")):
                text = text.rstrip() + " > /dev/null 2>&1 &"  # a server: in the background
            script.append(f"echo '@@start {number}'")
            script.append(text + (" < /dev/null" if "orchestrator chat" in text else ""))
            script.append(f"printf '\\n@@rc {number} %s\\n' \"$?\"")
            if serves:
                for port in sorted(set(re.findall(r"--port (\d+)|\$p\b", text)) - {""}):
                    script.append(f"wait_port {port}")
                for p in re.findall(r"for p in ([\d ]+);", text):
                    script.extend(f"wait_port {one}" for one in p.split())
                if "servers all" in text:
                    base = int(re.search(r"--base-port (\d+)", text).group(1))  # type: ignore[union-attr]
                    script.extend(f"wait_port {base + i}" for i in range(4))
        prelude = (
            "wait_port() { for i in $(seq 200); do "
            "(echo > /dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.1; done;"
            ' echo "port $1 never listened" >&2; return 1; }'
        )
        log = self.tmp / f"shell-{len(self.groups)}.out"
        with log.open("w") as sink:  # a file, not a pipe: the servers it starts keep it open
            proc = subprocess.Popen(
                ["bash", "-c", prelude + "\n" + "\n".join(script)],
                cwd=self.tmp,
                env=self.env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
        self.groups.append(proc.pid)
        proc.wait(timeout=100)
        out = log.read_text()
        results = []
        for number, command in enumerate(listed):
            match = re.search(rf"^@@start {number}\n(.*?)^@@rc {number} (\d+)$", out, re.S | re.M)
            assert match, f"command {number} did not run: {command.text}\n{out}"
            results.append((command, int(match.group(2)), match.group(1)))
        return results

    groups: list[int] = []

    def stop(self) -> None:
        for group in self.groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGTERM)
        time.sleep(0.5)
        for group in self.groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Shell]:
    one = Shell(tmp_path)
    one.groups = []
    try:
        yield one
    finally:
        one.stop()


def block_starting(first: str) -> str:
    found = [b for b in bash_blocks() if b.lstrip().startswith(first)]
    assert len(found) == 1, f"one bash block starts with {first!r}"
    return found[0]


RUN = {
    "mkdir -p /tmp/redis-a2a": "redis",
    "psql -h 127.0.0.1 -U postgres": "postgres",
    ".venv/bin/python -m servers all --base-port 8101": "orchestrator",
    ".venv/bin/python -m a2a_handoff lint contracts": "lint",
    ".venv/bin/python -m servers echo": "echo",
    "curl -s localhost:8001/": "echo",
    "python -m a2a_handoff keys list": "keys",
    "python -m servers human --port 8104": "adapters",
    "python -m servers echo --port 8301": "db",
}


def test_every_bash_block_is_run_or_skipped_for_a_reason() -> None:
    for block in bash_blocks():
        first = block.lstrip()
        assert any(first.startswith(k) for k in (*SKIPPED, *RUN)), f"unclassified:\n{block}"


def expect(results: list[tuple[Command, int, str]], codes: list[int]) -> None:
    for (command, code, out), wanted in zip(results, codes, strict=True):
        assert code == wanted, f"{command.text}\nexit {code}, README implies {wanted}:\n{out}"
        for line in command.shown:
            if line != "…":
                assert line in out, f"{command.text}: the README shows {line!r}; got:\n{out}"


def test_the_orchestrator_commands(shell: Shell) -> None:
    results = shell.run(block_starting(".venv/bin/python -m servers all --base-port 8101"))
    # servers all, send (billing asks which order), the answer, trace, a new topic, new, chat
    expect(results, [0, 2, 0, 0, 0, 0, 0])
    assert "issued for order 12345" in results[2][2]
    assert "[logistics] completed" in results[4][2]


def test_the_db_commands_on_an_agent_with_retention(shell: Shell) -> None:
    results = shell.run(block_starting("python -m servers echo --port 8301"))
    # the agent (with --retain), status, upgrade (nothing to do), status --json
    expect(results, [0, 0, 0, 0])


def test_the_contract_lint_and_the_agents_with_contracts(shell: Shell) -> None:
    results = shell.run(block_starting(".venv/bin/python -m a2a_handoff lint contracts"))
    expect(results, [0, 0])


def test_the_echo_agent_and_its_curl_calls(shell: Shell) -> None:
    results = shell.run(
        block_starting(".venv/bin/python -m servers echo") + block_starting("curl -s localhost")
    )
    expect(results, [0, 0, 0, 0, 0])
    for _, _, out in results[1:]:
        assert '"task"' in out  # JSON-RPC's result, REST's bare body, 0.3's result
        assert '"error"' not in out
    assert "slept 3 s" in results[2][2]


def test_three_replicas_behind_one_redis(shell: Shell) -> None:
    if shutil.which("redis-server") is None:
        raise AssertionError("redis-server is not installed: run scripts/bootstrap")
    results = shell.run(block_starting("mkdir -p /tmp/redis-a2a"))
    # mkdir, redis-server, R=, two key files, three billing replicas, triage, the refund
    expect(results, [0, 0, 0, 0, 0, 0, 0, 0])
    assert "Refund of $49.99 issued for order 12345" in results[-1][2]


def test_three_replicas_on_postgresql(shell: Shell) -> None:
    name = f"a2a_doc_{uuid.uuid4().hex[:12]}"  # the docs' database, made unique here
    block = block_starting("psql -h 127.0.0.1 -U postgres").replace("a2a_demo", name)
    try:
        results = shell.run(block)
        # the database, P=, two key files, three billing replicas, triage, the refund
        expect(results, [0, 0, 0, 0, 0, 0, 0])
        assert "Refund of $49.99 issued for order 12345" in results[-1][2]
    finally:
        shell.stop()
        psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_the_keys_commands(shell: Shell) -> None:
    data = shell.tmp / "data"
    data.mkdir()
    triage = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "servers",
            "triage",
            "--port",
            str(free_port()),
            "--store",
            f"sqlite:///{data / 'triage.db'}",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while not (data / "triage.keys.json").exists():  # made on first start
            assert time.monotonic() < deadline, "no key file"
            time.sleep(0.1)
    finally:
        triage.terminate()
        triage.wait(10)
    block = block_starting("python -m a2a_handoff keys list")
    # `keys move` needs keys an older version left in Redis: test_secure_defaults.py moves some.
    lines = [line for line in block.splitlines() if "redis://" not in line]
    first = shell.run(lines[0])
    expect(first, [0])
    old_kid = first[0][2].split()[0]
    results = shell.run("\n".join([*lines[:2], lines[2].replace("KID", old_kid), lines[3]]))
    expect(results, [0, 0, 0, 0])
    assert old_kid in results[2][2]
    assert "retired" in results[2][2]
    made = shell.tmp / "data" / "billing.keys.json"
    assert made.stat().st_mode & 0o777 == 0o600


def test_pip_install_in_the_clone(tmp_path: Path) -> None:
    # The command as the README writes it, run where it says (the clone's root): no
    # placeholder to stand in for; only where it installs to is the test's own.
    line = next(
        line
        for block in bash_blocks()
        for line in block.splitlines()
        if line.startswith("pip install .")
    )
    command = shlex.split(line, comments=True)
    assert command[:2] == ["pip", "install"]
    target = tmp_path / "site"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            *command[2:],
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    elsewhere = subprocess.run(
        [
            sys.executable,
            "-c",
            "import a2a_handoff, servers, orchestrator;"
            " print(a2a_handoff.__version__, a2a_handoff.__file__)",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert elsewhere.returncode == 0, elsewhere.stderr
    version, where = elsewhere.stdout.split()
    assert where.startswith(str(target))
    import a2a_handoff

    assert version == a2a_handoff.__version__


def test_the_adapters_example_pair_through_the_cli(shell: Shell) -> None:
    from tests.llm.chat_server import Call, ChatServer

    chat = ChatServer().start()
    try:
        # The Agents SDK triage's model, scripted: it hands the refund to billing.
        arguments = {"reason": "refund request", "summary": "Charged twice, wants a refund"}
        chat.script("docs", Call("transfer_to_billing", arguments))
        shell.env["LLM_URL"] = chat.url("docs")
        block = block_starting("python -m servers human --port 8104")
        local = "--llm-url http://127.0.0.1:11434/v1"
        assert local in block
        results = shell.run(block.replace(local, "--llm-url $LLM_URL"))
        # human, billing, triage (in the background), send (billing asks), the answer
        expect(results, [0, 0, 0, 2, 0])
        assert "[triage] transferred to billing" in results[3][2]
    finally:
        chat.stop()
