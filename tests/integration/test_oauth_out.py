"""Outbound OAuth2 tokens against real processes: a token endpoint
(`tests.oauth_token_server`, which counts what it is asked) and peers that require the bearer
token (`--auth-keys` listing the tokens it will issue: `token-1`, `token-2`, …).

One token request serves many calls, concurrent or not; a token that lives no longer than the
60 s margin is replaced for each new call; a 401 from the peer replaces the token once; a
wrong secret is one refused request, however many calls follow; a client file others can read,
or a token URL over plain http off the loopback, stops an agent before it serves.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from a2a_handoff import AgentClient, Message, Role, Task
from a2a_handoff.client import ClientCredentials, OAuth2Tokens
from a2a_handoff.errors import RemoteError, TokenError
from tests.integration.handoff_support import REFUND, ext, message, result
from tests.integration.oauth_support import (
    CLIENT_ID,
    CLIENT_SECRET,
    TokenServer,
    auth_keys,
    client_file,
    token_server,
)
from tests.support import ROOT, AgentProcess, Cli, free_port

pytestmark = pytest.mark.anyio


# The tokens the shared peer takes, as `PREFIXtoken-N`: each test has the token server issue
# tokens with its own prefix; a token the peer does not list is refused, as a revoked one is.
ACCEPTED = {
    "many-": [1],
    "expiry-": [1, 2, 3, 4],
    "revoked-": [2],
    "stream-": [2],
    "cli-": [1],
    "grpc-": [2],
}


@dataclass
class Network:
    """The token endpoint, and a peer that takes only the tokens of ACCEPTED."""

    server: TokenServer
    agent: AgentProcess


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    tmp = tmp_path_factory.mktemp("oauth")
    tokens = [f"{prefix}token-{n}" for prefix, ns in ACCEPTED.items() for n in ns]
    keys = auth_keys(tmp / "echo.auth", **{f"caller-{t}": t for t in tokens})
    grpc_port = free_port()
    agent = AgentProcess(
        "echo",
        f"sqlite:///{tmp / 'echo'}.db",
        extra=(f"--auth-keys={keys}", f"--grpc-port={grpc_port}"),
    )
    agent.grpc = f"127.0.0.1:{grpc_port}"  # type: ignore[attr-defined]
    agent.log_path = tmp / "echo.log"
    with token_server() as server:
        agent.start()
        try:
            yield Network(server, agent)
        finally:
            agent.stop()


def hello(text: str = "hello") -> Message:
    return Message(message_id=str(uuid.uuid4()), role=Role.USER, parts=[{"text": text}])


def client_for(
    agent: AgentProcess, server: TokenServer, secret: str = CLIENT_SECRET
) -> AgentClient:
    grant = ClientCredentials(
        token_url=server.token_url,
        client_id=CLIENT_ID,
        client_secret=secret,
        audience=agent.url,
    )
    return AgentClient(httpx.AsyncClient(timeout=10), credentials={agent.url: OAuth2Tokens(grant)})


async def test_one_token_request_serves_many_calls(network: Network) -> None:
    server, agent = network.server, network.agent
    server.reset("many-")
    client = client_for(agent, server)
    try:
        concurrent = await asyncio.gather(*(client.send(agent.url, hello()) for _ in range(20)))
        after = [await client.send(agent.url, hello()) for _ in range(5)]
        card = await client.card(agent.url)
    finally:
        await client.aclose()
    assert all(task.status.state.value == "TASK_STATE_COMPLETED" for task in concurrent + after)
    assert card.name == "echo"
    asked = server.requests()
    assert len(asked) == 1
    form = asked[0]["form"]
    assert form == {
        "grant_type": "client_credentials",
        "audience": agent.url,
        "resource": agent.url,
    }
    assert asked[0]["basic"]
    assert asked[0]["client"] == CLIENT_ID


async def test_a_token_within_the_margin_of_its_expiry_is_replaced(network: Network) -> None:
    # 60 s to live: within the 60 s margin at once, so each new call asks for a new token —
    # while calls that waited for one request share its token.
    server, agent = network.server, network.agent
    server.reset("expiry-", expires_in=60)
    client = client_for(agent, server)
    try:
        for _ in range(3):
            await client.send(agent.url, hello())
        assert len(server.requests()) == 3
        await asyncio.gather(*(client.send(agent.url, hello()) for _ in range(10)))
    finally:
        await client.aclose()
    assert len(server.requests()) == 4


async def test_a_401_replaces_the_token_once(network: Network) -> None:
    # The peer does not take the first token (as if revoked): the call gets the second.
    server, agent = network.server, network.agent
    server.reset("revoked-")
    client = client_for(agent, server)
    try:
        task = await client.send(agent.url, hello())
        again = await asyncio.gather(*(client.send(agent.url, hello()) for _ in range(5)))
    finally:
        await client.aclose()
    assert task.status.state.value == "TASK_STATE_COMPLETED"
    assert all(t.status.state.value == "TASK_STATE_COMPLETED" for t in again)
    assert len(server.requests()) == 2


async def test_a_401_on_a_stream_replaces_the_token_once(network: Network) -> None:
    server, agent = network.server, network.agent
    server.reset("stream-")
    client = client_for(agent, server)
    try:
        events = [item async for _, item in client.stream(agent.url, hello("tokens: a b"))]
    finally:
        await client.aclose()
    assert events[-1].status_update is not None
    assert events[-1].status_update.status.state.value == "TASK_STATE_COMPLETED"
    assert len(server.requests()) == 2


def grpc_only(agent: AgentProcess) -> httpx.MockTransport:
    """HTTP serving the agent's own card offering its gRPC interface alone, and nothing else:
    the calls go over gRPC to the real process."""
    card = httpx.get(agent.url + ".well-known/agent-card.json", timeout=10.0).json()
    card["supportedInterfaces"] = [{"url": agent.grpc, "protocolBinding": "GRPC"}]  # type: ignore[attr-defined]
    card.pop("signatures", None)

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/.well-known/agent-card.json":
            return httpx.Response(200, json=card)
        return httpx.Response(404)

    return httpx.MockTransport(answer)


async def test_over_grpc_the_token_goes_in_the_metadata_and_is_replaced_once(
    network: Network,
) -> None:
    server, agent = network.server, network.agent
    server.reset("grpc-")
    grant = ClientCredentials(server.token_url, CLIENT_ID, CLIENT_SECRET, agent.url)
    address = "http://127.0.0.1:9/"  # the card's address (read through the mock): same host
    http = httpx.AsyncClient(transport=grpc_only(agent), timeout=10)
    client = AgentClient(http, credentials={address: OAuth2Tokens(grant)})
    try:
        card = await client.card(address)
        assert [i.protocol_binding for i in card.supported_interfaces] == ["GRPC"]
        first = await client.send(address, hello())  # grpc-token-1 refused, then -2
        second = await client.send(address, hello())
    finally:
        await client.aclose()
    assert isinstance(first, Task)
    assert isinstance(second, Task)
    assert second.status.state.value == "TASK_STATE_COMPLETED"
    assert len(server.requests()) == 2


async def test_a_fresh_token_refused_too_fails_the_call_clearly(network: Network) -> None:
    server, agent = network.server, network.agent
    server.reset("unknown-")
    client = client_for(agent, server)
    try:
        with pytest.raises(RemoteError) as refused:
            await client.send(agent.url, hello())
    finally:
        await client.aclose()
    assert refused.value.code == -32101
    assert "refused a fresh OAuth2 token as well" in str(refused.value)
    assert len(server.requests()) == 2  # one token, one replacement: no more


async def test_a_wrong_secret_is_one_refused_request(network: Network) -> None:
    server, agent = network.server, network.agent
    server.reset("many-")
    client = client_for(agent, server, secret="not-the-secret")
    try:
        errors = []
        for _ in range(5):
            with pytest.raises(TokenError) as failed:
                await client.send(agent.url, hello())
            errors.append(str(failed.value))
        concurrent = await asyncio.gather(
            *(client.send(agent.url, hello()) for _ in range(5)), return_exceptions=True
        )
    finally:
        await client.aclose()
    assert "refused: HTTP 401 (invalid_client" in errors[0]
    assert CLIENT_ID in errors[0]
    assert server.token_url in errors[0]
    assert "not-the-secret" not in errors[0]
    assert all(isinstance(e, TokenError) for e in concurrent)
    assert len(server.requests()) == 1  # remembered: no request per call


def test_an_agent_hands_off_with_its_token(network: Network, tmp_path: Path) -> None:
    # triage → billing, billing requiring a bearer token: triage's handoffs carry the token
    # its client file's client gets, one token request for all of them.
    server = network.server
    server.reset("handoff-")
    store = lambda name: f"sqlite:///{tmp_path / name}.db"  # noqa: E731
    triage = AgentProcess("triage", store("triage"), log_path=tmp_path / "triage.log")
    billing = AgentProcess("billing", store("billing"), log_path=tmp_path / "billing.log")
    keys = auth_keys(tmp_path / "billing.auth", triage="handoff-token-1")
    billing.extra = (f"--trust=triage={triage.url}", f"--auth-keys={keys}")
    credential = client_file(tmp_path / "triage-oauth.json", server.token_url, billing.url)
    triage.extra = (
        f"--route=billing={billing.url}",
        f"--credential=billing=oauth2:@{credential}",
        "--recovery-interval=0.3",
    )
    billing.start()
    triage.start()
    try:
        for _ in range(3):
            source = result(triage.rpc("SendMessage", message(REFUND)))["task"]
            pointer = ext(source)["transfer"]
            assert pointer["agentName"] == "billing"
            # The successor is triage's at billing: the principal its token maps to.
            as_triage = {"Authorization": "Bearer handoff-token-1"}
            made = result(billing.rpc("GetTask", {"id": pointer["taskId"]}, **as_triage))
            assert made["history"][0]["referenceTaskIds"] == [source["id"]]
    finally:
        triage.stop()
        billing.stop()
    assert len(server.requests()) == 1
    logs = (tmp_path / "triage.log").read_text()
    assert CLIENT_SECRET not in logs
    assert "handoff-token-1" not in logs


def test_the_orchestrator_presents_its_token(network: Network, tmp_path: Path) -> None:
    server, agent = network.server, network.agent
    server.reset("cli-")
    origin = agent.url.rstrip("/")
    credential = client_file(tmp_path / "cli-oauth.json", server.token_url, agent.url)
    cli = Cli(tmp_path / "session.json")
    code, out = cli.run(
        "send", "--entry", agent.url, f"--credential={origin}=oauth2:@{credential}", "hi"
    )
    assert code == 0, out
    assert len(server.requests()) == 1
    assert CLIENT_SECRET not in out
    assert "cli-token-1" not in out


def serve_with(tmp_path: Path, credential: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """`python -m servers echo` routed to a peer whose credential is `credential`; it
    refuses to start (exit 64) or is stopped by the timeout."""
    cmd = [
        sys.executable,
        "-m",
        "servers",
        "echo",
        f"--port={free_port()}",
        f"--store=sqlite:///{tmp_path / 'refused'}.db",
        "--route=peer=http://127.0.0.1:1/",
        f"--credential=peer=oauth2:@{credential}",
        *extra,
    ]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=30)


def test_a_client_file_others_can_read_stops_the_agent(tmp_path: Path) -> None:
    credential = client_file(
        tmp_path / "open.json", "https://idp.example/token", "http://127.0.0.1:1/", mode=0o644
    )
    refused = serve_with(tmp_path, credential)
    assert refused.returncode == 64
    assert "readable by other users" in refused.stderr
    assert "chmod 600" in refused.stderr
    assert CLIENT_SECRET not in refused.stderr


def test_a_client_file_others_can_read_is_accepted_when_told(tmp_path: Path) -> None:
    credential = client_file(
        tmp_path / "open.json", "https://idp.example/token", "http://127.0.0.1:1/", mode=0o644
    )
    agent = AgentProcess(
        "echo",
        f"sqlite:///{tmp_path / 'told'}.db",
        extra=(
            "--route=peer=http://127.0.0.1:1/",
            f"--credential=peer=oauth2:@{credential}",
            "--allow-insecure-files",
        ),
        log_path=tmp_path / "told.log",
    )
    agent.start()
    agent.stop()
    log = (tmp_path / "told.log").read_text()
    assert "INSECURE" in log
    assert str(credential) in log


def test_a_token_url_over_plain_http_off_the_loopback_stops_the_agent(tmp_path: Path) -> None:
    credential = client_file(
        tmp_path / "plain.json", "http://idp.example/token", "http://127.0.0.1:1/"
    )
    refused = serve_with(tmp_path, credential)
    assert refused.returncode == 64
    assert "plain http" in refused.stderr
    assert "use https" in refused.stderr
