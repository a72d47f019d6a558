"""Bearer tokens from a real OpenID provider (oidc-provider, tests/oidc_support.py) accepted
by a real agent (`python -m servers echo --oidc-issuer …`): its tokens own tasks by subject,
an operator named by subject sees them all; every forged or wrong token is refused with 401
and no task made; a key rotation needs no restart; an issuer down at start-up gives 503 until
it answers. The agents ask the issuer again on every call that needs it (`--oidc-retry 0`):
nothing here waits for a timer."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState
from joserfc.jwk import RSAKey

from tests.oidc_support import OidcProvider, new_key
from tests.support import A2A_HEADERS, ROOT, AgentProcess, free_port

OPERATOR = "ops-console"
CLIENTS = ["alice", "bob", OPERATOR]


@dataclass
class Stack:
    provider: OidcProvider
    agent: AgentProcess
    audience: str  # the card's JSON-RPC URL


def start_agent(tmp: Path, issuer: str, *extra: str) -> AgentProcess:
    agent = AgentProcess(
        "echo",
        f"sqlite:///{tmp / 'echo.db'}",
        extra=(f"--oidc-issuer={issuer}", "--oidc-retry=0", f"--operators={OPERATOR}", *extra),
    )
    return agent.start()


def jsonrpc_url(agent: AgentProcess) -> str:
    card = httpx.get(agent.url + ".well-known/agent-card.json").json()
    urls = [i["url"] for i in card["supportedInterfaces"] if i["protocolBinding"] == "JSONRPC"]
    return str(urls[0])


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("oidc")
    port = free_port()
    keys = tmp / "keys"
    keys.write_text("robot=robot-key\n")
    keys.chmod(0o600)
    agent = start_agent(tmp, f"http://127.0.0.1:{port}", f"--auth-keys={keys}")
    audience = jsonrpc_url(agent)
    provider = OidcProvider(tmp, audience, CLIENTS, port=port).start()
    try:
        yield Stack(provider, agent, audience)
    finally:
        agent.stop()
        provider.stop()


def call(agent: AgentProcess, method: str, params: dict[str, Any], token: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {**A2A_HEADERS, "Authorization": f"Bearer {token}"}
    return httpx.post(agent.url, json=body, headers=headers, timeout=30)


def send(agent: AgentProcess, token: str, text: str = "hello") -> httpx.Response:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    return call(agent, "SendMessage", {"message": message}, token)


def task_count(stack: Stack) -> int:
    """Every task of the agent, as its operator sees them."""
    operator = stack.provider.token(OPERATOR)
    answer = call(stack.agent, "ListTasks", {"pageSize": 100}, operator).json()
    return len(answer["result"]["tasks"])


def test_a_token_owns_its_task_by_subject_and_the_operator_is_named_by_subject(
    stack: Stack,
) -> None:
    alice = stack.provider.token("alice")
    header = json.loads(base64.urlsafe_b64decode(alice.split(".")[0] + "=="))
    assert header["typ"] == "at+jwt"  # RFC 9068, as the provider issues it
    sent = send(stack.agent, alice).json()["result"]["task"]
    assert sent["status"]["state"] == "TASK_STATE_COMPLETED"
    get = {"id": sent["id"]}
    assert call(stack.agent, "GetTask", get, alice).json()["result"]["id"] == sent["id"]
    foreign = call(stack.agent, "GetTask", get, stack.provider.token("bob")).json()
    assert foreign["error"]["code"] == -32001  # bob's token: as if absent
    operator = call(stack.agent, "GetTask", get, stack.provider.token(OPERATOR)).json()
    assert operator["result"]["id"] == sent["id"]
    # The HTTP+JSON binding takes the same token.
    rest = httpx.get(
        stack.agent.url + f"tasks/{sent['id']}",
        headers={"A2A-Version": "1.0", "Authorization": f"Bearer {alice}"},
    )
    assert rest.status_code == 200
    assert rest.json()["id"] == sent["id"]


def test_a_repeated_token_is_answered_again(stack: Stack) -> None:
    alice = stack.provider.token("alice")
    answers = [send(stack.agent, alice).status_code for _ in range(3)]
    assert answers == [200, 200, 200]


def test_api_keys_keep_working_beside_tokens(stack: Stack) -> None:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "k"}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    for header in ({"X-API-Key": "robot-key"}, {"Authorization": "Bearer robot-key"}):
        answer = httpx.post(stack.agent.url, json=body, headers={**A2A_HEADERS, **header})
        assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    refused = httpx.post(stack.agent.url, json=body, headers={**A2A_HEADERS, "X-API-Key": "x"})
    assert refused.status_code == 401


def test_the_card_declares_the_issuer_beside_the_api_key(stack: Stack) -> None:
    card = httpx.get(stack.agent.url + ".well-known/agent-card.json").json()
    discovery = stack.provider.issuer + "/.well-known/openid-configuration"
    schemes = card["securitySchemes"]
    assert schemes["oidc"]["openIdConnectSecurityScheme"]["openIdConnectUrl"] == discovery
    assert "apiKeySecurityScheme" in schemes["apiKey"]
    assert {"schemes": {"oidc": {"list": []}}} in card["securityRequirements"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unsigned(header: dict[str, Any], claims: dict[str, Any]) -> str:
    return f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"


def _hmac_with_public_key(provider: OidcProvider, claims: dict[str, Any]) -> str:
    """HS256 over the token, keyed with the issuer's public key (PEM): the classic confusion."""
    key = provider.keys[0]
    head = _unsigned({"alg": "HS256", "typ": "at+jwt", "kid": key.kid}, claims)
    secret = key.as_pem(private=False)
    return head + "." + _b64(hmac.new(secret, head.encode(), hashlib.sha256).digest())


def _tampered(provider: OidcProvider) -> str:
    """A real token of bob's with its subject changed to alice, the signature kept."""
    head, payload, signature = provider.token("bob").split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["sub"] = "alice"
    return f"{head}.{_b64(json.dumps(claims).encode())}.{signature}"


def _forged(provider: OidcProvider, kind: str) -> str:
    """A token that must be refused, of `kind`."""
    mine = new_key("attacker")
    claims = provider.claims("alice")
    own_kid = {"kid": provider.keys[0].kid}
    match kind:
        case "expired":
            return provider.sign(provider.claims("alice", exp=claims["iat"] - 120))
        case "not yet valid":
            return provider.sign(provider.claims("alice", nbf=claims["iat"] + 600))
        case "no expiry":
            claims.pop("exp")
            return provider.sign(claims)
        case "wrong issuer":
            return provider.sign(provider.claims("alice", iss="http://127.0.0.1:1/other"))
        case "wrong audience":  # a real token, for another resource
            return provider.token("alice", resource="https://other.example/api")
        case "unknown key":
            return provider.sign(claims, key=mine)
        case "alg none":
            return _unsigned({"alg": "none", "typ": "at+jwt", **own_kid}, claims) + "."
        case "alg none, signed":
            return _unsigned({"alg": "none", **own_kid}, claims) + ".c2lnbmF0dXJl"
        case "hmac with the public key":
            return _hmac_with_public_key(provider, claims)
        case "tampered":
            return _tampered(provider)
        case "embedded jwk":
            jwk = mine.as_dict(private=False)
            return provider.sign(claims, key=mine, header={"jwk": jwk, **own_kid})
        case "jku header":
            jku = {"jku": "http://127.0.0.1:1/attacker-jwks", **own_kid}
            return provider.sign(claims, key=mine, header=jku)
        case "x5u header":
            return provider.sign(claims, key=mine, header={"x5u": "http://127.0.0.1:1/c"})
    raise AssertionError(kind)


FORGED = {  # kind → why it is refused, as the error says
    "expired": "has expired",
    "not yet valid": "not valid yet",
    "no expiry": "no expiry",
    "wrong issuer": "another issuer",
    "wrong audience": "not for this agent",
    "unknown key": "a key the issuer does not publish",
    "alg none": "algorithm 'none'",
    "alg none, signed": "algorithm 'none'",
    "hmac with the public key": "algorithm 'HS256'",
    "tampered": "signature does not verify",
    "embedded jwk": "names its own key",
    "jku header": "names its own key",
    "x5u header": "names its own key",
}


@pytest.mark.parametrize("kind", FORGED)
def test_a_forged_or_wrong_token_is_refused_and_makes_no_task(stack: Stack, kind: str) -> None:
    before = task_count(stack)
    answer = send(stack.agent, _forged(stack.provider, kind))
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"]["code"] == -32101
    message = answer.json()["error"]["message"]
    assert message.startswith("bearer token refused: ")
    assert FORGED[kind] in message
    assert task_count(stack) == before


def test_a_signing_key_rotated_at_the_issuer_needs_no_restart(tmp_path: Path) -> None:
    port = free_port()
    agent = start_agent(tmp_path, f"http://127.0.0.1:{port}")
    provider = OidcProvider(tmp_path, jsonrpc_url(agent), CLIENTS, port=port)
    try:
        provider.start()
        assert send(agent, provider.token("alice")).status_code == 200  # keys fetched
        old: RSAKey = provider.keys[0]
        provider.rotate()
        assert provider.keys[0].kid != old.kid
        rotated = provider.token("alice")
        assert send(agent, rotated).status_code == 200  # an unknown kid: keys fetched again
        # The withdrawn key no longer signs for the issuer (a token not seen before).
        withdrawn = provider.sign(provider.claims("alice", jti="after"), key=old)
        assert send(agent, withdrawn).status_code == 401
    finally:
        agent.stop()
        provider.stop()


def test_an_issuer_down_at_start_up_gives_503_until_it_answers(tmp_path: Path) -> None:
    port = free_port()
    agent = start_agent(tmp_path, f"http://127.0.0.1:{port}")  # nothing listens there yet
    provider = OidcProvider(tmp_path, jsonrpc_url(agent), CLIENTS, port=port)
    try:
        early = send(agent, provider.sign(provider.claims("alice")))
        assert early.status_code == 503
        error = early.json()["error"]
        assert error["code"] == -32101
        assert error["data"][0]["reason"] == "ISSUER_UNAVAILABLE"
        assert "has not answered yet" in error["message"]
        assert httpx.get(agent.url + "health").status_code == 200  # the agent itself is up
        card = httpx.get(agent.url + ".well-known/agent-card.json").json()
        assert list(card["securitySchemes"]) == ["oidc"]  # no API keys here: tokens only
        provider.start()
        assert send(agent, provider.token("alice")).status_code == 200
    finally:
        agent.stop()
        provider.stop()


@pytest.mark.anyio
async def test_grpc_takes_the_token_from_its_metadata(tmp_path: Path) -> None:
    port, grpc_port = free_port(), free_port()
    agent = start_agent(tmp_path, f"http://127.0.0.1:{port}", f"--grpc-port={grpc_port}")
    provider = OidcProvider(tmp_path, jsonrpc_url(agent), CLIENTS, port=port)
    try:
        provider.start()

        def request() -> SendMessageRequest:
            parts = [Part(text="over grpc")]
            message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=parts)
            return SendMessageRequest(message=message)

        def bearer(token: str) -> tuple[tuple[str, str], ...]:
            return (("authorization", f"Bearer {token}"), ("a2a-version", "1.0"))

        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            sent = await stub.SendMessage(request(), metadata=bearer(provider.token("alice")))
            assert sent.task.status.state == TaskState.TASK_STATE_COMPLETED
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.SendMessage(request(), metadata=bearer(_forged(provider, "expired")))
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "the token has expired" in (refused.value.details() or "")
        bob = call(agent, "ListTasks", {}, provider.token("bob")).json()
        assert bob["result"]["tasks"] == []  # alice's task is hers
        mine = call(agent, "ListTasks", {}, provider.token("alice")).json()["result"]["tasks"]
        assert [t["id"] for t in mine] == [sent.task.id]
    finally:
        agent.stop()
        provider.stop()


def test_a2a_handoff_serve_takes_the_issuer_and_an_audience_of_ones_choosing(
    stack: Stack, tmp_path: Path
) -> None:
    agent = AgentProcess("serve", f"sqlite:///{tmp_path / 'served.db'}", module="a2a_handoff")
    agent.extra = (
        "tests.servers.served_agent:agent",
        f"--oidc-issuer={stack.provider.issuer}",
        f"--oidc-audience={stack.audience}",  # the tokens the stack's provider issues
    )
    agent.start()
    try:
        assert send(agent, stack.provider.token("alice")).status_code == 200
        body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        assert httpx.post(agent.url, json=body, headers=A2A_HEADERS).status_code == 401
    finally:
        agent.stop()


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--oidc-audience=https://a.example/"], "--oidc-audience needs --oidc-issuer"),
        (["--oidc-issuer=http://login.example.com"], "must be an https URL"),
        (["--oidc-issuer=https://login.example.com", "--oidc-retry=600"], "at most 60"),
    ],
)
def test_wrong_oidc_flags_are_a_usage_error(tmp_path: Path, flags: list[str], said: str) -> None:
    store = f"sqlite:///{tmp_path / 'echo.db'}"
    command = [sys.executable, "-m", "servers", "echo", f"--port={free_port()}"]
    done = subprocess.run(
        [*command, f"--store={store}", *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 64, done.stderr
    assert said in done.stderr


def test_a_token_whose_subject_is_an_api_keys_name_is_refused(stack: Stack) -> None:
    """An issuer's subject never becomes a key holder: "robot" is a key's name here, and a
    token naming it — however it got that subject — holds nothing of robot's."""
    before = task_count(stack)
    answer = send(stack.agent, stack.provider.sign(stack.provider.claims("robot")))
    assert answer.status_code == 401, answer.text
    assert "an API key's name" in answer.json()["error"]["message"]
    assert task_count(stack) == before


def test_a_header_nested_past_the_parsers_depth_is_refused_on_every_route(stack: Stack) -> None:
    deep = _b64(b"[" * 5000)  # json.loads raises RecursionError on it
    headers = {**A2A_HEADERS, "Authorization": f"Bearer {deep}.e30.c2ln"}
    before = task_count(stack)
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "x"}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    sent = httpx.post(stack.agent.url, json=body, headers=headers, timeout=30)
    assert sent.status_code == 401, sent.text
    assert sent.json()["error"]["code"] == -32101
    for path in (".well-known/agent-card.json", "health", "metrics", "tasks/x"):
        answer = httpx.get(stack.agent.url + path, headers=headers, timeout=30)
        assert answer.status_code < 500, (path, answer.status_code, answer.text)
    assert "RecursionError" not in stack.agent._log().read_text()
    assert task_count(stack) == before
