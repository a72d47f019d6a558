"""Every agent URL given to the library or a command line is checked at start, and the error
says what to write (a route without its scheme was accepted and its handoffs waited forever)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from a2a_handoff import HandoffConfig, TrustConfig, build_card
from a2a_handoff.errors import AgentUrlError
from a2a_handoff.trust.trustlist import TrustedAgent, parse_trust
from tests.support import ROOT, free_port


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (
            "127.0.0.1:8302",
            "'127.0.0.1:8302' is not an http:// or https:// URL; write http://127.0.0.1:8302",
        ),
        (
            "localhost:9",
            "'localhost:9' is not an http:// or https:// URL; write http://localhost:9",
        ),
        ("ftp://h:1/", "'ftp://h:1/' is not an http:// or https:// URL; write http://h:1/"),
        ("http://", "'http://' names no host; write http://HOST:PORT/"),
        (
            "http://h:port/",
            "'http://h:port/' has a port that is not a number from 1 to 65535; write http://HOST:PORT/",
        ),
        ("", "'' is empty; write http://HOST:PORT/"),
        ("http://a:1/, b:2", "'b:2' is not an http:// or https:// URL; write http://b:2"),
    ],
)
def test_a_route_that_cannot_be_called_is_refused_when_the_config_is_made(
    given: str, says: str
) -> None:
    with pytest.raises(AgentUrlError) as caught:
        HandoffConfig(routes={"b": given})
    assert str(caught.value) == f"route b: {says}"


def test_trust_and_the_card_are_checked_too() -> None:
    with pytest.raises(AgentUrlError, match=r"^trusted agent c: 'localhost:9' is not an http"):
        TrustConfig(trusted=["c=localhost:9"])
    with pytest.raises(AgentUrlError, match=r"^trusted agent c: .* write http://localhost:9$"):
        parse_trust("c=localhost:9")
    with pytest.raises(AgentUrlError, match=r"^the JWKS URL of c: 'keys' is not an http"):
        TrustedAgent("c", "http://c/", jwks_url="keys")
    with pytest.raises(
        AgentUrlError,
        match=r"^the card of a: '127.0.0.1:8399' is not an http:// or https:// URL; "
        r"write http://127.0.0.1:8399$",
    ):
        build_card("a", "127.0.0.1:8399")
    # replicas, spaces after the commas, are accepted as written
    assert TrustedAgent("c", " http://c1/, http://c2/ ").url == "http://c1/,http://c2/"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("option", "says"),
    [
        (
            "--route=billing=127.0.0.1:8602",
            "--route billing: '127.0.0.1:8602' is not an http:// or https:// URL;"
            " write http://127.0.0.1:8602",
        ),
        (
            "--trust=billing=localhost:8602",
            "trusted agent billing: 'localhost:8602' is not an http:// or https:// URL;"
            " write http://localhost:8602",
        ),
        ("--url=127.0.0.1:8601", "--url: '127.0.0.1:8601' is not an http:// or https:// URL"),
    ],
)
def test_an_agent_given_a_url_without_its_scheme_does_not_start(option: str, says: str) -> None:
    port = free_port()
    done = run("servers", "triage", "--port", str(port), "--store", "memory://", option)
    assert done.returncode == 64, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert "Uvicorn running" not in done.stderr  # refused before it serves


def test_the_orchestrator_refuses_an_entry_without_its_scheme() -> None:
    done = run("orchestrator", "send", "--entry", "127.0.0.1:8601", "hi")
    assert done.returncode == 64
    assert (
        "argument --entry: '127.0.0.1:8601' is not an http:// or https:// URL;"
        " write http://127.0.0.1:8601" in done.stderr
    )
