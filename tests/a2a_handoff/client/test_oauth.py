"""The token cache of `client.oauth` on a clock the tests move: when a token is kept and when
it is replaced, one request for concurrent callers, refusals remembered, bad answers refused,
secrets never shown. The token endpoint is an `httpx.MockTransport` here; tests/integration/
test_oauth_out.py runs a real one with real agents."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import httpx
import pytest

from a2a_handoff.client import ClientCredentials, OAuth2Tokens, read_credential
from a2a_handoff.client.oauth import check_token_url
from a2a_handoff.errors import ConfigError, TokenError
from a2a_handoff.secrets import SecretError

pytestmark = pytest.mark.anyio

SECRET = "the-client-secret"
GRANT = ClientCredentials(
    token_url="https://idp.example/token",
    client_id="triage",
    client_secret=SECRET,
    audience="https://billing.example/",
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Endpoint:
    """A token endpoint: `answer(n)` makes the n-th answer (1-based); requests are kept."""

    def __init__(self, answer: Callable[[int], httpx.Response] | None = None) -> None:
        self.requests: list[httpx.Request] = []
        self.answer = answer or (lambda n: issued(n))
        self.gate: asyncio.Event | None = None  # set: answers wait for it

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.gate is not None:
            await self.gate.wait()
        return self.answer(len(self.requests))

    def form(self, n: int = 0) -> dict[str, str]:
        return dict(parse_qsl(self.requests[n].content.decode()))


def issued(n: int, **extra: Any) -> httpx.Response:
    return httpx.Response(200, json={"access_token": f"token-{n}", "token_type": "Bearer", **extra})


def tokens(
    endpoint: Endpoint, clock: Clock | None = None, grant: ClientCredentials = GRANT
) -> OAuth2Tokens:
    http = httpx.AsyncClient(transport=httpx.MockTransport(endpoint))
    return OAuth2Tokens(grant, http=http, clock=clock or Clock())


async def test_a_token_is_kept_until_60_s_before_it_expires() -> None:
    clock = Clock()
    endpoint = Endpoint(lambda n: issued(n, expires_in=3600))
    source = tokens(endpoint, clock)
    assert await source.token() == "token-1"
    clock.now += 3539.9
    assert await source.token() == "token-1"
    clock.now += 0.1
    assert await source.token() == "token-2"
    assert len(endpoint.requests) == 2


async def test_a_token_without_expires_in_is_taken_to_live_300_s() -> None:
    clock = Clock()
    endpoint = Endpoint()
    source = tokens(endpoint, clock)
    await source.token()
    clock.now += 239
    assert await source.token() == "token-1"
    clock.now += 1
    assert await source.token() == "token-2"


async def test_a_short_lived_token_serves_only_the_calls_that_waited_for_it() -> None:
    endpoint = Endpoint(lambda n: issued(n, expires_in=30))
    endpoint.gate = asyncio.Event()
    source = tokens(endpoint)
    waiting = [asyncio.create_task(source.token()) for _ in range(10)]
    await asyncio.sleep(0)
    endpoint.gate.set()
    assert set(await asyncio.gather(*waiting)) == {"token-1"}
    assert await source.token() == "token-2"  # a new call: a new token


async def test_concurrent_calls_make_one_request() -> None:
    endpoint = Endpoint(lambda n: issued(n, expires_in=3600))
    endpoint.gate = asyncio.Event()
    source = tokens(endpoint)
    waiting = [asyncio.create_task(source.token()) for _ in range(50)]
    await asyncio.sleep(0.01)
    assert len(endpoint.requests) == 1
    endpoint.gate.set()
    assert set(await asyncio.gather(*waiting)) == {"token-1"}
    assert source.requests == 1


async def test_concurrent_calls_share_a_failure_and_the_next_call_asks_again() -> None:
    endpoint = Endpoint(lambda n: httpx.Response(503) if n == 1 else issued(n))
    endpoint.gate = asyncio.Event()
    source = tokens(endpoint)
    waiting = [asyncio.create_task(source.token()) for _ in range(10)]
    await asyncio.sleep(0.01)
    endpoint.gate.set()
    outcomes = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(o, TokenError) and not o.refused for o in outcomes)
    assert "answered HTTP 503" in str(outcomes[0])
    assert len(endpoint.requests) == 1
    assert await source.token() == "token-2"  # unreachable is not remembered


async def test_a_refusal_is_remembered_for_30_s() -> None:
    clock = Clock()
    refusal = {"error": "invalid_client", "error_description": "bad secret"}
    endpoint = Endpoint(lambda n: httpx.Response(401, json=refusal) if n == 1 else issued(n))
    source = tokens(endpoint, clock)
    with pytest.raises(TokenError) as first:
        await source.token()
    assert first.value.refused
    assert "refused: HTTP 401 (invalid_client bad secret)" in str(first.value)
    clock.now += 29.9
    for _ in range(5):
        with pytest.raises(TokenError) as again:
            await source.token()
        assert again.value is first.value
    assert len(endpoint.requests) == 1
    clock.now += 0.1
    assert await source.token() == "token-2"


async def test_refresh_replaces_only_the_token_refused() -> None:
    endpoint = Endpoint(lambda n: issued(n, expires_in=3600))
    source = tokens(endpoint)
    assert await source.token() == "token-1"
    assert await source.refresh("token-1") == "token-2"
    # Another call refused with token-1 too: token-2 is already its replacement.
    assert await source.refresh("token-1") == "token-2"
    assert await source.token() == "token-2"
    assert len(endpoint.requests) == 2


async def test_calls_refused_together_share_one_replacement() -> None:
    endpoint = Endpoint(lambda n: issued(n, expires_in=3600))
    source = tokens(endpoint)
    await source.token()
    endpoint.gate = asyncio.Event()
    waiting = [asyncio.create_task(source.refresh("token-1")) for _ in range(10)]
    await asyncio.sleep(0.01)
    endpoint.gate.set()
    assert set(await asyncio.gather(*waiting)) == {"token-2"}
    assert len(endpoint.requests) == 2


async def test_a_cancelled_caller_leaves_the_others_a_token() -> None:
    endpoint = Endpoint(lambda n: issued(n, expires_in=3600))
    endpoint.gate = asyncio.Event()
    source = tokens(endpoint)
    first = asyncio.create_task(source.token())
    await asyncio.sleep(0.01)
    second = asyncio.create_task(source.token())
    await asyncio.sleep(0.01)
    first.cancel()
    await asyncio.sleep(0.01)
    endpoint.gate.set()
    assert await second == "token-2"
    assert first.cancelled()


async def test_the_request_names_the_audience_and_authenticates_with_basic() -> None:
    endpoint = Endpoint()
    await tokens(endpoint).token()
    request = endpoint.requests[0]
    assert request.method == "POST"
    assert request.headers["content-type"] == "application/x-www-form-urlencoded"
    assert endpoint.form() == {
        "grant_type": "client_credentials",
        "audience": "https://billing.example/",
        "resource": "https://billing.example/",
    }
    scheme, _, encoded = request.headers["authorization"].partition(" ")
    assert scheme == "Basic"
    assert base64.b64decode(encoded).decode() == f"triage:{SECRET}"


async def test_an_audience_that_is_not_a_uri_is_not_sent_as_resource() -> None:
    grant = ClientCredentials(
        token_url="https://idp.example/token",
        client_id="an id:with/specials",
        client_secret="p@ss:word",
        audience="billing",
        scope="a2a tasks",
    )
    endpoint = Endpoint()
    await tokens(endpoint, grant=grant).token()
    assert endpoint.form() == {
        "grant_type": "client_credentials",
        "audience": "billing",
        "scope": "a2a tasks",
    }
    encoded = endpoint.requests[0].headers["authorization"].removeprefix("Basic ")
    # RFC 6749 §2.3.1: id and secret form-encoded before they are joined.
    assert base64.b64decode(encoded).decode() == "an+id%3Awith%2Fspecials:p%40ss%3Aword"


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (httpx.Response(200, json={"access_token": "t", "token_type": "DPoP"}), "not Bearer"),
        (httpx.Response(200, json={"token_type": "Bearer"}), "usable access_token"),
        (httpx.Response(200, json={"access_token": "a b"}), "usable access_token"),
        (httpx.Response(200, json={"access_token": "t", "expires_in": -1}), "expires_in"),
        (httpx.Response(200, json={"access_token": "t", "expires_in": "soon"}), "expires_in"),
        (httpx.Response(200, json=["t"]), "without a JSON object"),
        (httpx.Response(200, content=b"<html>"), "without a JSON object"),
        (httpx.Response(200, content=b"x" * (64 * 1024 + 1)), "more than 65536 bytes"),
        (httpx.Response(302, headers={"Location": "http://evil.example/"}), "HTTP 302"),
    ],
)
async def test_a_bad_answer_is_refused(answer: httpx.Response, said: str) -> None:
    source = tokens(Endpoint(lambda n: answer))
    with pytest.raises(TokenError) as refused:
        await source.token()
    assert said in str(refused.value)


async def test_an_unreachable_endpoint_is_named() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    http = httpx.AsyncClient(transport=httpx.MockTransport(down))
    with pytest.raises(TokenError) as failed:
        await OAuth2Tokens(GRANT, http=http).token()
    assert "https://idp.example/token unreachable (ConnectError)" in str(failed.value)
    assert not failed.value.refused


async def test_the_secret_and_tokens_are_never_shown(caplog: pytest.LogCaptureFixture) -> None:
    echoed = {"error": "invalid_client", "error_description": f"bad secret {SECRET}"}
    endpoint = Endpoint(lambda n: httpx.Response(400, json=echoed) if n == 1 else issued(n))
    clock = Clock()
    source = tokens(endpoint, clock)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(TokenError) as refused:
        await source.token()
    clock.now += 60
    assert await source.token() == "token-2"
    assert SECRET not in str(refused.value)
    assert "***" in str(refused.value)
    assert "OAuth2 token for triage from https://idp.example/token" in caplog.text
    assert SECRET not in caplog.text
    assert "token-2" not in caplog.text
    assert SECRET not in repr(GRANT)
    assert SECRET not in repr(source)


@pytest.mark.parametrize(
    "url",
    [
        "https://idp.example/token",
        "http://127.0.0.1:8080/token",
        "http://127.1.2.3/token",
        "http://[::1]:9000/token",
        "http://localhost/token",
    ],
)
def test_a_token_url_that_may_carry_the_secret(url: str) -> None:
    assert check_token_url(url) == url


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://idp.example/token", "plain http"),
        ("http://10.0.0.1/token", "plain http"),
        ("http://localhost.evil.example/token", "plain http"),
        ("ftp://idp.example/token", r"not an http\(s\) URL"),
        ("idp.example/token", r"not an http\(s\) URL"),
        ("https://user:pw@idp.example/token", "no credentials"),
    ],
)
def test_a_token_url_that_may_not(url: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        ClientCredentials(url, "triage", SECRET, "https://billing.example/")


def write(path: Path, document: object, mode: int = 0o600) -> Path:
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    path.chmod(mode)
    return path


FILE = {
    "token_url": "https://idp.example/token",
    "client_id": "triage",
    "client_secret": SECRET,
    "audience": "https://billing.example/",
}


def test_the_client_file_is_read(tmp_path: Path) -> None:
    read = ClientCredentials.from_file(write(tmp_path / "c.json", {**FILE, "scope": "a2a"}))
    assert read == ClientCredentials(**FILE, scope="a2a")


@pytest.mark.parametrize(
    ("document", "said"),
    [
        ({**FILE, "client-secret": "x"}, "unknown \\['client-secret'\\]"),
        ({k: v for k, v in FILE.items() if k != "audience"}, "missing \\['audience'\\]"),
        ({**FILE, "client_id": ""}, "client_id: a non-empty string"),
        ({**FILE, "client_secret": 42}, "client_secret: a non-empty string"),
        ({**FILE, "scope": ""}, "scope"),
        ("{not json", "is not JSON"),
        (["a list"], "must hold a JSON object"),
    ],
)
def test_a_bad_client_file_is_refused(tmp_path: Path, document: object, said: str) -> None:
    with pytest.raises(ConfigError, match=said) as refused:
        ClientCredentials.from_file(write(tmp_path / "c.json", document))
    assert SECRET not in str(refused.value)


def test_a_client_file_others_can_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("A2A_ALLOW_INSECURE_FILES", raising=False)
    path = write(tmp_path / "c.json", FILE, mode=0o640)
    with pytest.raises(SecretError, match="chmod 600"):
        ClientCredentials.from_file(path, "--credential billing")
    monkeypatch.setenv("A2A_ALLOW_INSECURE_FILES", "1")
    assert ClientCredentials.from_file(path).client_id == "triage"


def test_a_credential_as_a_command_line_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = write(tmp_path / "c.json", FILE)
    source = read_credential(f"oauth2:@{client}", "--credential billing")
    assert isinstance(source, OAuth2Tokens)
    assert source.credentials.client_id == "triage"
    monkeypatch.setenv("BILLING_KEY", "a-key")
    assert read_credential("env:BILLING_KEY", "--credential billing") == "a-key"
    for wrong in ("oauth2:env:BILLING_KEY", "oauth2:@", "oauth2:" + str(client)):
        with pytest.raises(ConfigError, match="oauth2:@FILE"):
            read_credential(wrong, "--credential billing")
    with pytest.raises(SecretError, match="visible to every local user"):
        read_credential("a-literal-key", "--credential billing")


async def test_closing_closes_only_its_own_client() -> None:
    given = httpx.AsyncClient(transport=httpx.MockTransport(Endpoint()))
    await OAuth2Tokens(GRANT, http=given).aclose()
    assert not given.is_closed
    await given.aclose()
    own = OAuth2Tokens(GRANT)
    await own.aclose()  # nothing opened yet: nothing to close
