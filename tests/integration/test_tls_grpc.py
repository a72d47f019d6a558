"""The gRPC face over TLS and mutual TLS, against real agents started with `--tls-*` and
`--grpc-port`: the official SDK's client over TLS; under mutual TLS the right certificate
served as its SAN's principal, another CA's certificate or none refused in the handshake."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio
import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import GetTaskRequest, ListTasksRequest, SendMessageRequest

from tests.integration.test_interop import artifact_texts, send_for_task, user_message
from tests.support import free_port
from tests.tls_support import Issued, TestCA, TlsAgent

pytestmark = pytest.mark.anyio

ALICE = "spiffe://example.org/user/alice"


def grpc_tls_agent(name: str, store: str, ca: TestCA, *extra: str) -> TlsAgent:
    """An agent serving HTTPS and gRPC (`agent.grpc`), its own certificate from `ca`."""
    own = ca.issue(name, uris=(f"spiffe://example.org/agent/{name}",))
    port = free_port()
    agent = TlsAgent(
        name,
        store,
        extra=(f"--tls-cert={own.cert}", f"--tls-key={own.key}", f"--grpc-port={port}", *extra),
        ca=ca.cert,
    )
    agent.grpc = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
    return agent


def channel_credentials(ca: Path, identity: Issued | None) -> grpc.ChannelCredentials:
    """TLS trusting `ca`, presenting `identity`'s certificate if given."""
    pair = (identity.key.read_bytes(), identity.cert.read_bytes()) if identity else (None, None)
    return grpc.ssl_channel_credentials(ca.read_bytes(), *pair)


@asynccontextmanager
async def stub(
    agent: TlsAgent, ca: Path | None, identity: Issued | None = None
) -> AsyncIterator[a2a_pb2_grpc.A2AServiceStub]:
    """The SDK's generated stub on a TLS channel trusting `ca` (None: plaintext), presenting
    `identity`'s certificate if given."""
    address = agent.grpc  # type: ignore[attr-defined]
    if ca is None:
        channel = grpc.aio.insecure_channel(address)
    else:
        channel = grpc.aio.secure_channel(address, channel_credentials(ca, identity))
    async with channel:
        yield a2a_pb2_grpc.A2AServiceStub(channel)


async def test_grpc_over_tls_with_the_sdk_client(tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "ca")
    agent = grpc_tls_agent("echo", f"sqlite:///{tmp_path / 'echo.db'}", ca)
    agent.log_path = tmp_path / "echo.log"
    agent.start()
    try:
        trusted = channel_credentials(ca.cert, None)
        trusting = ssl.create_default_context(cafile=str(ca.cert))
        async with httpx.AsyncClient(timeout=30.0, verify=trusting) as http:
            config = ClientConfig(
                streaming=False,
                httpx_client=http,
                supported_protocol_bindings=["GRPC"],
                grpc_channel_factory=lambda url: grpc.aio.secure_channel(url, trusted),
            )
            client = await create_client(agent.url, config)  # the card, over HTTPS
            try:
                task = await send_for_task(client, "over TLS")
            finally:
                await client.close()
        assert artifact_texts(task) == ["over TLS"]
        # A plaintext client gets no answer from a TLS port.
        async with stub(agent, None) as a2a:
            with pytest.raises(grpc.aio.AioRpcError) as plaintext:
                await a2a.GetTask(GetTaskRequest(id=task.id), timeout=5)
            assert plaintext.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        agent.stop()


@dataclass
class Mutual:
    agent: TlsAgent
    ca: TestCA
    alice: Issued
    bob: Issued
    forged: Issued  # alice's name, from a CA the agent does not trust
    key: str  # carol's API key


@pytest.fixture(scope="module")
def mutual(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mutual]:
    tmp = tmp_path_factory.mktemp("grpc-mtls")
    ca, other = TestCA(tmp / "ca"), TestCA(tmp / "other", "someone else's CA")
    keys = tmp / "keys"
    keys.write_text("carol=k-carol-0123456789\n")
    agent = grpc_tls_agent(
        "echo",
        f"sqlite:///{tmp / 'echo.db'}",
        ca,
        f"--tls-client-ca={ca.cert}",
        f"--auth-keys={keys}",
    )
    alice = ca.issue("alice", uris=(ALICE,))
    agent.identity = alice
    agent.log_path = tmp / "echo.log"
    agent.start()
    try:
        yield Mutual(
            agent,
            ca,
            alice,
            ca.issue("bob", dns=("bob.example.org",)),
            other.issue("alice", uris=(ALICE,)),
            "k-carol-0123456789",
        )
    finally:
        agent.stop()


async def test_grpc_under_mutual_tls_serves_the_certificates_principal(mutual: Mutual) -> None:
    ca = mutual.ca.cert
    request = SendMessageRequest(message=user_message("alice's, over gRPC"))
    async with stub(mutual.agent, ca, mutual.alice) as alice:
        task = (await alice.SendMessage(request, timeout=30)).task
        assert (await alice.GetTask(GetTaskRequest(id=task.id), timeout=10)).id == task.id
    async with stub(mutual.agent, ca, mutual.bob) as bob:
        with pytest.raises(grpc.aio.AioRpcError) as hidden:
            await bob.GetTask(GetTaskRequest(id=task.id), timeout=10)
        assert hidden.value.code() == grpc.StatusCode.NOT_FOUND
        # A key beside the certificate names the caller: carol's task, not bob's.
        carol = [("x-api-key", mutual.key)]
        request = SendMessageRequest(message=user_message("carol's, over bob's connection"))
        theirs = (await bob.SendMessage(request, metadata=carol, timeout=30)).task
        mine = await bob.ListTasks(ListTasksRequest(), timeout=10)
        assert theirs.id not in [t.id for t in mine.tasks]
        with pytest.raises(grpc.aio.AioRpcError) as wrong:
            await bob.ListTasks(ListTasksRequest(), metadata=[("x-api-key", "nope")], timeout=10)
        assert wrong.value.code() == grpc.StatusCode.UNAUTHENTICATED
    # The HTTPS side asks for a certificate as well: without one, not even the card.
    trusting = ssl.create_default_context(cafile=str(ca))
    async with httpx.AsyncClient(verify=trusting, timeout=30.0) as plain:
        with pytest.raises(httpx.TransportError):
            await plain.get(mutual.agent.url + ".well-known/agent-card.json")


async def test_grpc_refuses_another_cas_certificate_and_none(mutual: Mutual) -> None:
    for identity in (mutual.forged, None):
        async with stub(mutual.agent, mutual.ca.cert, identity) as a2a:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await a2a.ListTasks(ListTasksRequest(), timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
