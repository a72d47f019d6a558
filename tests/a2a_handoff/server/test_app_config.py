"""`create_app`'s grouped settings (`server.app_config`): a bad value is refused when the object is
made, the defaults are the server's, and an app built from them does what they say."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import FrozenInstanceError
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette

from a2a_handoff import (
    ApiKeyAuth,
    GrpcConfig,
    HandoffConfig,
    LimitsConfig,
    MemoryTaskStore,
    ObservabilityConfig,
    ToolsConfig,
    TrustConfig,
    create_app,
    open_store,
)
from a2a_handoff.errors import AgentUrlError, ConfigError
from a2a_handoff.server import OidcConfig
from a2a_handoff.server import app as app_module
from a2a_handoff.trust.trustlist import TrustedAgent
from servers.billing import BillingAgent, billing_card
from servers.echo import EchoAgent, echo_card
from servers.triage import SCOPE, TriageAgent, triage_card
from tests.support import A2A_HEADERS, free_port

pytestmark = pytest.mark.anyio
URL = "http://echo.test/"


BAD: list[tuple[type[Any], dict[str, Any], str]] = [
    (LimitsConfig, {"max_body": -1}, "max_body must be a whole number of at least 1, not -1"),
    (LimitsConfig, {"max_body": 0}, "max_body must be a whole number of at least 1, not 0"),
    (LimitsConfig, {"max_body": 1.5}, "max_body must be a whole number of at least 1, not 1.5"),
    (LimitsConfig, {"max_streams": 0}, "max_streams must be a whole number of at least 1, not 0"),
    (LimitsConfig, {"sse_ping": 0}, "sse_ping must be a number of seconds above 0, not 0"),
    (
        LimitsConfig,
        {"sse_ping": float("nan")},
        "sse_ping must be a number of seconds above 0, not nan",
    ),
    (HandoffConfig, {"max_hops": -1}, "max_hops must be a whole number of at least 0, not -1"),
    (HandoffConfig, {"max_hops": True}, "max_hops must be a whole number of at least 0, not True"),
    (HandoffConfig, {"ttl_seconds": 0}, "ttl_seconds must be a whole number of at least 1, not 0"),
    (
        HandoffConfig,
        {"recovery_interval": 0},
        "recovery_interval must be a number of seconds above 0, not 0",
    ),
    (
        HandoffConfig,
        {"recovery_interval": "2"},
        "recovery_interval must be a number of seconds above 0, not '2'",
    ),
    (
        HandoffConfig,
        {"return_give_up": -1.0},
        "return_give_up must be a number of seconds 0 or more, not -1.0",
    ),
    (
        HandoffConfig,
        {"scope": "refunds"},
        "scope is a list of names, not one string: write ['refunds']",
    ),
    (HandoffConfig, {"routes": {"": "http://127.0.0.1:1/"}}, "a route needs a name, not ''"),
    (
        TrustConfig,
        {"operators": "alice"},
        "operators is a list of names, not one string: write ['alice']",
    ),
    (TrustConfig, {"operators": ["alice", ""]}, "each of operators needs a name, not ''"),
    (
        TrustConfig,
        {"trusted": "a=http://a/"},
        "trusted is a list of agents, not one string: ['a=http://a/']",
    ),
    (
        TrustConfig,
        {"trusted": [("a", "http://a/")]},
        "trusted takes TrustedAgent or 'NAME=URL', not ('a', 'http://a/')",
    ),
    (
        TrustConfig,
        {"trusted_max_age": -1},
        "trusted_max_age must be a number of seconds 0 or more, not -1",
    ),
    (
        TrustConfig,
        {"keys_reload": -0.5},
        "keys_reload must be a number of seconds 0 or more, not -0.5",
    ),
    (
        ObservabilityConfig,
        {"stale_after": 0},
        "stale_after must be a number of seconds above 0, not 0",
    ),
    (ToolsConfig, {"timeout": 0}, "timeout must be a number of seconds above 0, not 0"),
    (ToolsConfig, {"attempts": 0}, "attempts must be a whole number of at least 1, not 0"),
    (ToolsConfig, {"mcp": {" ": "http://127.0.0.1:1/mcp"}}, "an MCP server needs a name, not ' '"),
]


@pytest.mark.parametrize(("config", "given", "says"), BAD)
def test_a_bad_value_is_refused_when_the_config_is_made(
    config: type[Any], given: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        config(**given)
    assert str(caught.value) == says
    assert isinstance(caught.value, ValueError)  # `except ValueError` catches it too


def test_urls_are_checked_when_the_config_is_made() -> None:
    with pytest.raises(AgentUrlError, match=r"^route billing: 'billing:8102' is not an http"):
        HandoffConfig(routes={"billing": "billing:8102"})
    with pytest.raises(AgentUrlError, match=r"^trusted agent c: 'c:9' is not an http"):
        TrustConfig(trusted=["c=c:9"])
    with pytest.raises(AgentUrlError, match=r"^MCP server calc: 'file:///x' is not an http"):
        ToolsConfig(mcp={"calc": "file:///x"})
    with pytest.raises(AgentUrlError, match=r"^MCP server calc: .* holds a space"):
        ToolsConfig(mcp={"calc": "http://a/mcp, http://b/mcp"})  # one server, one URL


def test_the_defaults_are_the_servers() -> None:
    handoff, trust = HandoffConfig(), TrustConfig()
    assert (handoff.max_hops, handoff.ttl_seconds, handoff.recovery_interval) == (8, 300, 2.0)
    assert handoff.return_give_up is None  # the envelope TTL
    assert (dict(handoff.routes), handoff.scope, dict(handoff.credentials)) == ({}, None, {})
    assert (handoff.client, handoff.contracts) == (None, None)
    assert (trust.auth, trust.identity, trust.trusted, trust.operators) == (None, None, (), ())
    assert (trust.trusted_max_age, trust.keys_reload) == (60.0, 2.0)
    assert LimitsConfig() == LimitsConfig(max_body=1024 * 1024, max_streams=1000, sse_ping=2.0)
    assert ObservabilityConfig() == ObservabilityConfig(metrics_public=False, stale_after=60)
    defaults = inspect.signature(create_app).parameters
    for name, config in [
        ("handoff", HandoffConfig()),
        ("trust", TrustConfig()),
        ("limits", LimitsConfig()),
        ("observability", ObservabilityConfig()),
    ]:
        assert defaults[name].default == config, name
    assert defaults["escalation"].default is None
    assert defaults["dedupe_message_ids"].default is True
    assert defaults["card_v03_fields"].default is defaults["mcp_server"].default is False


def test_a_config_is_frozen_and_keeps_what_it_was_given() -> None:
    routes = {"billing": " http://127.0.0.1:8102/ "}
    handoff = HandoffConfig(routes=routes, scope=["refunds", "refunds"])
    routes["billing"] = "http://elsewhere/"  # the caller's dict changing changes nothing
    assert dict(handoff.routes) == {"billing": "http://127.0.0.1:8102/"}  # checked, stripped
    assert handoff.scope == frozenset({"refunds"})
    with pytest.raises(TypeError):
        handoff.routes["x"] = "http://x/"  # type: ignore[index]
    with pytest.raises(FrozenInstanceError):
        handoff.max_hops = 3  # type: ignore[misc]
    trust = TrustConfig(trusted=["a=http://127.0.0.1:1/", TrustedAgent("b", "http://127.0.0.1:2/")])
    assert trust.trusted_agents() == (
        TrustedAgent("a", "http://127.0.0.1:1/"),
        TrustedAgent("b", "http://127.0.0.1:2/"),
    )


def test_secrets_stay_out_of_a_configs_repr() -> None:
    handoff = HandoffConfig(credentials={"http://127.0.0.1:8102/": "k-secret"})
    trust = TrustConfig(auth=ApiKeyAuth.from_keys({"alice": "k-alice"}))
    assert "k-secret" not in repr(handoff)
    assert "auth" not in repr(trust)


@asynccontextmanager
async def asgi(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url=URL) as http,
    ):
        yield http


def send(text: str, message_id: str = "m-1") -> dict[str, Any]:
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


async def test_limits_max_body_is_enforced_on_both_bindings() -> None:
    app = create_app(
        EchoAgent(), echo_card(URL), MemoryTaskStore(), limits=LimitsConfig(max_body=600)
    )
    async with asgi(app) as http:
        small = json.dumps(send("x" * 100))
        big = json.dumps(send("x" * 600))
        assert len(small) < 600 < len(big)
        fits = await http.post("/", content=small, headers=A2A_HEADERS)
        assert fits.status_code == 200
        assert fits.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        over = await http.post("/", content=big, headers=A2A_HEADERS)
        assert over.status_code == 413
        assert over.json()["error"]["code"] == -32100
        rest = await http.post(
            "/message:send",
            content=json.dumps(send("x" * 600)["params"]),
            headers={**A2A_HEADERS, "Content-Type": "application/json"},
        )
        assert rest.status_code == 413
    default = create_app(EchoAgent(), echo_card(URL), MemoryTaskStore())
    async with asgi(default) as http:  # the default (1 MiB) takes the same body
        assert (await http.post("/", content=big, headers=A2A_HEADERS)).status_code == 200


async def test_observability_metrics_public_opens_metrics_under_auth() -> None:
    auth = TrustConfig(auth=ApiKeyAuth.from_keys({"alice": "k-alice"}))
    closed = create_app(EchoAgent(), echo_card(URL), MemoryTaskStore(), trust=auth)
    async with asgi(closed) as http:
        assert (await http.get("/metrics")).status_code == 401
        keyed = await http.get("/metrics", headers={"X-API-Key": "k-alice"})
        assert keyed.status_code == 200
    public = create_app(
        EchoAgent(),
        echo_card(URL),
        MemoryTaskStore(),
        trust=auth,
        observability=ObservabilityConfig(metrics_public=True),
    )
    async with asgi(public) as http:
        assert (await http.get("/metrics")).status_code == 200
        assert (await http.post("/", json=send("hi"), headers=A2A_HEADERS)).status_code == 401


def test_the_settings_reach_the_runtime() -> None:
    handoff = HandoffConfig(
        routes={"billing": "http://127.0.0.1:8102/"},
        scope=["refunds"],
        max_hops=3,
        ttl_seconds=60,
        recovery_interval=0.5,
        return_give_up=10.0,
    )
    trust = TrustConfig(trusted_max_age=5.0, keys_reload=0)
    app = create_app(
        TriageAgent(), triage_card(URL), MemoryTaskStore(), handoff=handoff, trust=trust
    )
    served = app.state.a2a
    settings = served.manager.handoffs.settings
    assert dict(settings.routes) == {"billing": "http://127.0.0.1:8102/"}
    assert settings.scope == frozenset({"refunds"})
    assert (settings.max_hops, settings.ttl_seconds) == (3, 60)
    assert (settings.recovery_interval, settings.return_give_up) == (0.5, 10.0)
    assert served.trust.reload_every == 0
    assert served.trust.trust_list.max_age == 5.0
    assert HandoffConfig() == app_module._HANDOFF  # the module's defaults are untouched


@asynccontextmanager
async def serving(*apps: tuple[Starlette, int]) -> AsyncIterator[None]:
    servers = [
        uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None))
        for app, port in apps
    ]
    jobs = [asyncio.create_task(s.serve()) for s in servers]
    try:
        for _ in range(500):  # started within 10 s
            if all(s.started for s in servers):
                break
            await asyncio.sleep(0.02)
        yield
    finally:
        for server in servers:
            server.should_exit = True
        await asyncio.gather(*jobs)


async def test_a_handoff_goes_to_the_route_handoff_config_names() -> None:
    ports = {name: free_port() for name in ("triage", "billing")}
    url = {name: f"http://127.0.0.1:{port}/" for name, port in ports.items()}
    triage = create_app(
        TriageAgent(),
        triage_card(url["triage"]),
        open_store("memory://"),
        handoff=HandoffConfig(routes={"billing": url["billing"]}, scope=SCOPE),
    )
    billing = create_app(
        BillingAgent(),
        billing_card(url["billing"]),
        open_store("memory://"),
        trust=TrustConfig(trusted=[f"triage={url['triage']}"]),
    )
    refund = "I was charged twice for order 12345, I want a refund"
    apps = [(triage, ports["triage"]), (billing, ports["billing"])]
    async with serving(*apps), httpx.AsyncClient(timeout=30) as http:
        sent = (await http.post(url["triage"], json=send(refund), headers=A2A_HEADERS)).json()
        context = sent["result"]["task"]["contextId"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "ListTasks"}
        for _ in range(400):  # within 20 s
            page = await http.post(
                url["billing"],
                json={**listing, "params": {"contextId": context}},
                headers=A2A_HEADERS,
            )
            tasks = page.json()["result"]["tasks"]
            if tasks and tasks[0]["status"]["state"] == "TASK_STATE_COMPLETED":
                break
            await asyncio.sleep(0.05)
        assert [t["status"]["state"] for t in tasks] == ["TASK_STATE_COMPLETED"]


def test_grpc_config_checks_its_port() -> None:
    assert GrpcConfig(port=50051).address == "127.0.0.1:50051"
    assert GrpcConfig(port=50051, host="::1").address == "[::1]:50051"
    assert GrpcConfig(port=1, url="a2a.example.com:443").address == "a2a.example.com:443"
    with pytest.raises(ConfigError, match="at most 65535"):
        GrpcConfig(port=70000)
    with pytest.raises(ConfigError, match="at least 0"):
        GrpcConfig(port=-1)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"issuer": "http://login.example.com"}, "must be an https URL"),
        ({"issuer": "ftp://127.0.0.1"}, "must be an https URL"),
        ({"issuer": "https://login.example.com?tenant=1"}, "no query or fragment"),
        ({"issuer": "https://"}, "with a host"),
        ({"issuer": "https://id.example", "leeway": 61}, "at most 60"),
        ({"issuer": "https://id.example", "retry": 61}, "at most 60"),
        ({"issuer": "https://id.example", "retry": -1}, "retry"),
        ({"issuer": "https://id.example", "audience": ""}, "audience"),
        ({"issuer": "https://id.example", "cache_size": 0}, "cache_size"),
    ],
)
def test_an_oidc_config_out_of_range_is_refused_when_made(
    options: dict[str, Any], said: str
) -> None:
    with pytest.raises(ConfigError, match=said):
        OidcConfig(**options)


def test_an_oidc_config_takes_https_and_loopback_http() -> None:
    assert OidcConfig("https://login.example.com/realms/a").retry == 30.0
    assert OidcConfig("http://127.0.0.1:8080", retry=0, leeway=0).leeway == 0
    assert OidcConfig("http://[::1]:8080").audience is None
