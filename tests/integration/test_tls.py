"""TLS and mutual TLS against real agent processes, with a test CA made here: HTTPS for a
plain client that trusts the CA; under mutual TLS the right certificate served as the
principal its SAN names (owners, operators), a certificate from another CA or none refused
in the handshake with nothing made; API keys beside certificates; two agents handing off to
each other over mutual TLS, each presenting its own certificate."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from tests.integration.handoff_support import REFUND, ext, message, result
from tests.support import A2A_HEADERS, free_port
from tests.tls_support import Issued, TestCA, TlsAgent, client

ALICE = "spiffe://example.org/user/alice"
BOB = "spiffe://example.org/user/bob"
OLGA = "spiffe://example.org/ops/olga"
TRIAGE = "spiffe://example.org/agent/triage"
BILLING = "spiffe://example.org/agent/billing"


def rpc(http: httpx.Client, url: str, method: str, params: dict[str, Any], **headers: str) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = http.post(url, json=body, headers={**A2A_HEADERS, **headers})
    return response.json()


@dataclass
class Pki:
    ca: TestCA
    other: TestCA  # a CA the agents do not trust
    echo: Issued
    alice: Issued
    bob: Issued
    olga: Issued
    forged_alice: Issued  # alice's name, from the other CA
    no_name: Issued  # from the right CA, naming no principal (an IP address only)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    tmp = tmp_path_factory.mktemp("pki")
    ca, other = TestCA(tmp / "ca"), TestCA(tmp / "other", "someone else's CA")
    return Pki(
        ca,
        other,
        echo=ca.issue("echo", uris=("spiffe://example.org/agent/echo",)),
        alice=ca.issue("alice", uris=(ALICE,)),
        bob=ca.issue("bob", dns=("bob.example.org",)),
        olga=ca.issue("olga", uris=(OLGA,)),
        forged_alice=other.issue("alice", uris=(ALICE,)),
        no_name=ca.issue("nobody"),
    )


@pytest.fixture(scope="module")
def mtls_echo(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TlsAgent, str]]:
    """The echo agent under mutual TLS, with API keys beside (carol), olga its operator, and
    gRPC on a port of its own (`agent.grpc`): (the agent, carol's key)."""
    tmp = tmp_path_factory.mktemp("mtls-echo")
    keys = tmp / "keys"
    keys.write_text("carol=k-carol-0123456789\n")
    agent = TlsAgent(
        "echo",
        f"sqlite:///{tmp / 'echo.db'}",
        extra=(
            f"--tls-cert={pki.echo.cert}",
            f"--tls-key={pki.echo.key}",
            f"--tls-client-ca={pki.ca.cert}",
            f"--auth-keys={keys}",
            f"--operators={OLGA}",
        ),
        ca=pki.ca.cert,
        identity=pki.alice,
    )
    agent.log_path = tmp / "echo.log"
    agent.start()
    try:
        yield agent, "k-carol-0123456789"
    finally:
        agent.stop()


def send(http: httpx.Client, url: str, text: str, **headers: str) -> dict[str, Any]:
    task: dict[str, Any] = result(rpc(http, url, "SendMessage", message(text), **headers))["task"]
    return task


def refused(ca: Path, identity: Issued | None, url: str) -> BaseException:
    """The error a call presenting `identity` fails with (it must fail)."""
    with client(ca, identity) as http, pytest.raises(httpx.TransportError) as failed:
        rpc(http, url, "ListTasks", {})
    return failed.value


def test_https_serves_a_plain_client_that_trusts_the_ca(pki: Pki, tmp_path: Path) -> None:
    agent = TlsAgent(
        "echo",
        f"sqlite:///{tmp_path / 'echo.db'}",
        extra=(f"--tls-cert={pki.echo.cert}", f"--tls-key={pki.echo.key}"),
        ca=pki.ca.cert,
    )
    agent.log_path = tmp_path / "echo.log"
    agent.start()
    try:
        with client(pki.ca.cert) as http:
            card = http.get(agent.url + ".well-known/agent-card.json").json()
            assert {i["url"] for i in card["supportedInterfaces"]} == {
                agent.url,
                agent.url.rstrip("/"),
            }
            assert all(i["url"].startswith("https://") for i in card["supportedInterfaces"])
            assert "securitySchemes" not in card  # no client certificate asked for
            task = send(http, agent.url, "over HTTPS")
            assert task["artifacts"][0]["parts"][0]["text"] == "over HTTPS"
        # A client that does not trust the CA refuses the agent's certificate...
        with httpx.Client(timeout=10.0) as untrusting, pytest.raises(httpx.ConnectError) as bad:
            untrusting.get(agent.url + "health")
        assert "CERTIFICATE_VERIFY_FAILED" in str(bad.value)
        # ...and plaintext HTTP is not served on the port.
        with httpx.Client(timeout=10.0) as plain, pytest.raises(httpx.TransportError):
            plain.get(f"http://127.0.0.1:{agent.port}/health")
        # A client keeping its connection in its pool (no goodbye until it looks again) does
        # not hold the agent's stop until uvicorn gives up on it.
        with client(pki.ca.cert) as idle:
            assert idle.get(agent.url + "health").status_code == 200
            agent.stop()
        assert "graceful shutdown exceeded" not in agent.log_path.read_text()
    finally:
        agent.stop()


def test_the_card_declares_mutual_tls_and_https(pki: Pki, mtls_echo: tuple[TlsAgent, str]) -> None:
    agent, _ = mtls_echo
    with client(pki.ca.cert, pki.bob) as http:
        card = http.get(agent.url + ".well-known/agent-card.json").json()
    assert list(card["securitySchemes"]["mutualTLS"]) == ["mtlsSecurityScheme"]
    assert "apiKey" in card["securitySchemes"]  # the keys still work beside certificates
    assert card["securityRequirements"] == [{"schemes": {"mutualTLS": {"list": []}}}]
    assert all(i["url"].startswith("https://") for i in card["supportedInterfaces"])


def test_the_principal_is_the_certificates_san(pki: Pki, mtls_echo: tuple[TlsAgent, str]) -> None:
    agent, _ = mtls_echo
    with client(pki.ca.cert, pki.alice) as alice, client(pki.ca.cert, pki.bob) as bob:
        task = send(alice, agent.url, "alice's task")
        # The owner is alice's URI SAN: she reads it, bob (a DNS SAN) sees nothing of it.
        assert result(rpc(alice, agent.url, "GetTask", {"id": task["id"]}))["id"] == task["id"]
        assert rpc(bob, agent.url, "GetTask", {"id": task["id"]})["error"]["code"] == -32001
        mine = send(bob, agent.url, "bob's task")
        listed = result(rpc(bob, agent.url, "ListTasks", {}))["tasks"]
        assert [t["id"] for t in listed] == [mine["id"]]
        # /health says who each is.
        assert alice.get(agent.url + "health").json()["caller"] == {
            "principal": ALICE,
            "operator": False,
        }
        assert bob.get(agent.url + "health").json()["caller"]["principal"] == "bob.example.org"
    with client(pki.ca.cert, pki.olga) as olga:  # --operators names her SAN
        assert olga.get(agent.url + "health").json()["caller"] == {
            "principal": OLGA,
            "operator": True,
        }
        assert result(rpc(olga, agent.url, "GetTask", {"id": task["id"]}))["id"] == task["id"]


def test_a_key_beside_the_certificate_names_the_caller(
    pki: Pki, mtls_echo: tuple[TlsAgent, str]
) -> None:
    agent, carol_key = mtls_echo
    with client(pki.ca.cert, pki.alice) as http:
        task = send(http, agent.url, "carol's, over alice's connection", **{"X-API-Key": carol_key})
        # carol owns it: alice's certificate alone does not see it.
        assert rpc(http, agent.url, "GetTask", {"id": task["id"]})["error"]["code"] == -32001
        seen = rpc(http, agent.url, "GetTask", {"id": task["id"]}, **{"X-API-Key": carol_key})
        assert result(seen)["id"] == task["id"]
        # A wrong key is refused, never passed over for the certificate.
        wrong = http.post(
            agent.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
            headers={**A2A_HEADERS, "Authorization": "Bearer not-a-key"},
        )
        assert wrong.status_code == 401
        assert wrong.json()["error"]["code"] == -32101


def test_a_certificate_from_another_ca_or_none_is_refused_in_the_handshake(
    pki: Pki, mtls_echo: tuple[TlsAgent, str]
) -> None:
    agent, carol_key = mtls_echo
    with client(pki.ca.cert, pki.olga) as olga:  # an operator: every task
        before = result(rpc(olga, agent.url, "ListTasks", {}))["tasks"]
    for identity in (pki.forged_alice, None):
        error = refused(pki.ca.cert, identity, agent.url)
        assert isinstance(error, httpx.ConnectError | httpx.ReadError | httpx.RemoteProtocolError)
    # Not even a valid key gets past the handshake without a certificate.
    with client(pki.ca.cert) as keyed, pytest.raises(httpx.TransportError):
        send(keyed, agent.url, "no certificate", **{"X-API-Key": carol_key})
    with client(pki.ca.cert, pki.olga) as olga:
        assert result(rpc(olga, agent.url, "ListTasks", {}))["tasks"] == before  # nothing made
    # A certificate of the right CA that names no principal (no URI or DNS SAN) is 401.
    with client(pki.ca.cert, pki.no_name) as nobody:
        answer = nobody.post(
            agent.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message("x")},
            headers=A2A_HEADERS,
        )
    assert answer.status_code == 401
    assert "-32101" in answer.text


def test_a_key_file_others_can_read_is_refused_at_start(pki: Pki, tmp_path: Path) -> None:
    shared = pki.ca.issue("shared", uris=("spiffe://example.org/agent/shared",))
    shared.key.chmod(0o644)
    agent = TlsAgent(
        "echo",
        f"sqlite:///{tmp_path / 'echo.db'}",
        extra=(f"--tls-cert={shared.cert}", f"--tls-key={shared.key}"),
        ca=pki.ca.cert,
    )
    agent.log_path = tmp_path / "echo.log"
    agent.start(wait=False)
    assert agent.proc is not None
    assert agent.proc.wait(30) == 64
    said = agent.log_path.read_text()
    assert f"tls key: {shared.key} is readable by other users" in said
    # Accepted with --allow-insecure-files: served, with a loud line.
    agent.extra = (*agent.extra, "--allow-insecure-files")
    agent.log_path.write_text("")
    agent.start()
    try:
        assert f"INSECURE: tls key: {shared.key}" in agent.log_path.read_text()
    finally:
        agent.stop()


# -- two agents ----------------------------------------------------------------------------


def test_a_handoff_between_agents_over_mutual_tls(pki: Pki, tmp_path: Path) -> None:
    """triage hands a refund to billing, both under mutual TLS: triage presents its own
    certificate to billing (which knows it by its SAN, from its trust file), billing
    presents its own fetching triage's keys; both trust only the test CA."""
    triage_id = pki.ca.issue("triage", uris=(TRIAGE,))
    billing_id = pki.ca.issue("billing", uris=(BILLING,))

    def tls(identity: Issued) -> tuple[str, ...]:
        return (
            f"--tls-cert={identity.cert}",
            f"--tls-key={identity.key}",
            f"--tls-client-ca={pki.ca.cert}",
            f"--tls-ca={pki.ca.cert}",
            "--recovery-interval=0.3",
        )

    triage = TlsAgent("triage", f"sqlite:///{tmp_path / 'triage.db'}", ca=pki.ca.cert)
    billing = TlsAgent("billing", f"sqlite:///{tmp_path / 'billing.db'}", ca=pki.ca.cert)
    trust_file = tmp_path / "trust.json"
    trust_file.write_text(
        json.dumps({"agents": [{"name": "triage", "url": triage.url, "principal": TRIAGE}]})
    )
    billing.extra = (*tls(billing_id), f"--trust-file={trust_file}")
    triage.extra = (*tls(triage_id), f"--route=billing={billing.url}")
    for agent in (billing, triage):
        agent.identity = pki.alice
        agent.log_path = tmp_path / f"{agent.name}.log"
    billing.start()
    triage.start()
    try:
        ctx = f"ctx-{uuid.uuid4()}"
        with client(pki.ca.cert, pki.alice) as alice:
            source = result(rpc(alice, triage.url, "SendMessage", message(REFUND, ctx)))["task"]
        pointer = ext(source)["transfer"]
        assert ext(source)["state"] == "TRANSFERRED", source
        assert pointer["agentUrl"] == billing.url
        # The successor was delivered by triage (its SAN, which billing's trust file names):
        # triage's certificate reads it.
        with client(pki.ca.cert, triage_id) as as_triage:
            deadline = time.monotonic() + 20
            target: dict[str, Any] = {}
            while time.monotonic() < deadline:
                target = result(rpc(as_triage, billing.url, "GetTask", {"id": pointer["taskId"]}))
                if target["status"]["state"] == "TASK_STATE_COMPLETED":
                    break
                time.sleep(0.1)
        assert target["status"]["state"] == "TASK_STATE_COMPLETED"
        assert target["history"][0]["metadata"][URI]["source"]["taskId"] == source["id"]
        # It is alice's too (the user the task was handed off for, her SAN), and nobody
        # else's.
        with client(pki.ca.cert, pki.alice) as alice:
            hers = result(rpc(alice, billing.url, "GetTask", {"id": pointer["taskId"]}))
        assert hers["id"] == pointer["taskId"]
        with client(pki.ca.cert, pki.bob) as bob:
            missing = rpc(bob, billing.url, "GetTask", {"id": pointer["taskId"]})
        assert missing["error"]["code"] == -32001
    finally:
        triage.stop()
        billing.stop()


def test_a_handoff_from_an_agent_without_the_ca_is_refused(pki: Pki, tmp_path: Path) -> None:
    """triage presenting a certificate from another CA never reaches billing: the handoff
    fails on triage, and billing made no task."""
    triage_id = pki.other.issue("triage", uris=(TRIAGE,))
    billing_id = pki.ca.issue("billing-2", uris=(BILLING,))
    billing = TlsAgent(
        "billing",
        f"sqlite:///{tmp_path / 'billing.db'}",
        ca=pki.ca.cert,
        identity=pki.alice,
        extra=(
            f"--tls-cert={billing_id.cert}",
            f"--tls-key={billing_id.key}",
            f"--tls-client-ca={pki.ca.cert}",
            f"--operators={OLGA}",
        ),
    )
    triage = TlsAgent(
        "triage",
        f"sqlite:///{tmp_path / 'triage.db'}",
        ca=pki.ca.cert,
        extra=(
            f"--tls-client-cert={triage_id.cert}",
            f"--tls-client-key={triage_id.key}",
            f"--tls-ca={pki.ca.cert}",
            f"--route=billing={billing.url}",
            "--ttl=1",
        ),
    )
    triage.log_path, billing.log_path = tmp_path / "triage.log", tmp_path / "billing.log"
    billing.start()
    triage.start(wait=False)  # plain HTTP (it serves no TLS), presenting its certificate out
    try:
        with httpx.Client(timeout=30.0) as plain:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                try:
                    plain.get(f"http://127.0.0.1:{triage.port}/health")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            url = f"http://127.0.0.1:{triage.port}/"
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message(REFUND)}
            source = plain.post(url, json=body, headers=A2A_HEADERS).json()["result"]["task"]
        assert source["status"]["state"] == "TASK_STATE_FAILED", source
        assert "billing could not be reached" in source["status"]["message"]["parts"][0]["text"]
        with client(pki.ca.cert, pki.olga) as olga:  # billing's operator: every task
            assert result(rpc(olga, billing.url, "ListTasks", {}))["tasks"] == []
        with client(pki.ca.cert, triage_id) as forged, pytest.raises(httpx.TransportError):
            rpc(forged, billing.url, "ListTasks", {})
    finally:
        triage.stop()
        billing.stop()


def test_a_handoff_over_grpc_under_mutual_tls(pki: Pki, tmp_path: Path) -> None:
    """billing offers gRPC alone (`tests.integration.grpc_only_agent`): triage's handoff goes
    over a gRPC channel that trusts the test CA and presents triage's certificate."""
    triage_id = pki.ca.issue("triage-g", uris=(TRIAGE,))
    billing_id = pki.ca.issue("billing-g", uris=(BILLING,))
    triage = TlsAgent("triage", f"sqlite:///{tmp_path / 'triage.db'}", ca=pki.ca.cert)
    billing = TlsAgent(
        "billing",
        f"sqlite:///{tmp_path / 'billing.db'}",
        module="tests.integration.grpc_only_agent",
        ca=pki.ca.cert,
    )
    trust_file = tmp_path / "trust.json"
    trust_file.write_text(
        json.dumps({"agents": [{"name": "triage", "url": triage.url, "principal": TRIAGE}]})
    )
    common = (f"--tls-client-ca={pki.ca.cert}", f"--tls-ca={pki.ca.cert}")
    billing.extra = (
        f"--tls-cert={billing_id.cert}",
        f"--tls-key={billing_id.key}",
        *common,
        f"--grpc-port={free_port()}",
        f"--trust-file={trust_file}",
    )
    triage.extra = (
        f"--tls-cert={triage_id.cert}",
        f"--tls-key={triage_id.key}",
        *common,
        f"--route=billing={billing.url}",
        "--recovery-interval=0.3",
    )
    for agent in (billing, triage):
        agent.identity = pki.alice
        agent.log_path = tmp_path / f"{agent.name}.log"
    billing.start()
    triage.start()
    try:
        with client(pki.ca.cert, pki.alice) as alice:
            source = result(rpc(alice, triage.url, "SendMessage", message(REFUND)))["task"]
        assert ext(source)["state"] == "TRANSFERRED", source
        with client(pki.ca.cert, triage_id) as as_triage:
            target = result(
                rpc(as_triage, billing.url, "GetTask", {"id": ext(source)["transfer"]["taskId"]})
            )
        assert target["history"][0]["metadata"][URI]["source"]["taskId"] == source["id"]
    finally:
        triage.stop()
        billing.stop()
