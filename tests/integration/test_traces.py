"""One user message is one trace across triage, billing and the human agent (in-memory
exporter), and a handler's exception is logged with its traceback and the task's ids.

The three agents are real uvicorn servers on 127.0.0.1, in this process, so that one
in-memory exporter sees every agent's spans (given to the library with
`tracing.use_provider`: the process-wide provider stays untouched for other tests).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import random
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from starlette.applications import Starlette

from a2a_handoff import (
    Agent,
    HandoffConfig,
    TaskContext,
    TrustConfig,
    build_card,
    create_app,
)
from a2a_handoff.observe import logs, tracing
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.stores import open_store
from servers.billing import POLICY, BillingAgent, billing_card
from servers.human import HumanAgent, decision_message, human_card
from servers.triage import SCOPE, TriageAgent, triage_card
from tests.support import A2A_HEADERS, free_port

pytestmark = pytest.mark.anyio

BIG_REFUND = "I was charged twice, I want a refund of $750 for order 4242"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    try:
        yield exporter
    finally:
        tracing.use_provider(None)


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


async def rpc(http: httpx.AsyncClient, url: str, method: str, params: Any, **headers: str) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    reply = (await http.post(url, json=body, headers={**A2A_HEADERS, **headers})).json()
    assert "result" in reply, reply
    return reply["result"]


async def poll(check: Any, seconds: float = 20.0) -> Any:
    for _ in range(int(seconds / 0.05)):
        found = await check()
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met")


async def escalated_refund(tmp_path: Path, traceparent: str) -> None:
    """A refund too big for billing, from triage to billing to the human agent, approved by
    the operator (a request of its own, no traceparent) and completed at billing."""
    trace_id = traceparent.split("-")[1]
    ports = {name: free_port() for name in ("triage", "billing", "human")}
    url = {name: f"http://127.0.0.1:{port}/" for name, port in ports.items()}
    store = {name: open_store(f"sqlite:///{tmp_path / name}.db") for name in ports}
    human = create_app(
        HumanAgent(),
        human_card(url["human"]),
        store["human"],
        trust=TrustConfig(trusted=[f"billing={url['billing']}"]),
    )
    billing = create_app(
        BillingAgent(),
        billing_card(url["billing"]),
        store["billing"],
        handoff=HandoffConfig(routes={"human": url["human"]}),
        escalation=POLICY,
        trust=TrustConfig(trusted=[f"triage={url['triage']}"]),
    )
    triage = create_app(
        TriageAgent(),
        triage_card(url["triage"]),
        store["triage"],
        handoff=HandoffConfig(routes={"billing": url["billing"]}, scope=SCOPE),
    )
    apps = [(triage, ports["triage"]), (billing, ports["billing"]), (human, ports["human"])]
    async with serving(*apps), httpx.AsyncClient(timeout=30) as http:
        message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": BIG_REFUND}]}
        sent = await rpc(
            http, url["triage"], "SendMessage", {"message": message}, traceparent=traceparent
        )
        context = sent["task"]["contextId"]

        async def waiting() -> list[dict[str, Any]]:
            page = await rpc(http, url["human"], "ListTasks", {"contextId": context})
            return [t for t in page["tasks"] if t["status"]["state"].endswith("INPUT_REQUIRED")]

        escalation = (await poll(waiting))[0]
        # The envelope's traceId, carried (signed) to the human agent, is the trace's id.
        handoff = escalation["metadata"][URI]["handoff"]
        assert handoff["traceId"] == trace_id
        # The operator answers (a request of its own, no traceparent): the return goes on in
        # the conversation's trace.
        decision = decision_message(
            "approved",
            "verified",
            task_id=escalation["id"],
            context_id=context,  # type: ignore[arg-type]
        )
        await rpc(http, url["human"], "SendMessage", {"message": decision.dump()})

        async def refunded() -> bool:
            page = await rpc(http, url["billing"], "ListTasks", {"contextId": context})
            return any(t["status"]["state"].endswith("COMPLETED") for t in page["tasks"])

        await poll(refunded)
        await asyncio.sleep(0.3)  # the return's termination lands just after


async def test_one_trace_spans_three_agents(spans: InMemorySpanExporter, tmp_path: Path) -> None:
    trace_id = f"{random.getrandbits(128):032x}"
    await escalated_refund(tmp_path, f"00-{trace_id}-{random.getrandbits(64):016x}-01")
    ours = [s for s in spans.get_finished_spans() if s.context.trace_id == int(trace_id, 16)]
    by_agent: dict[str, set[str]] = {}
    for span in ours:
        by_agent.setdefault(str(span.attributes.get("a2a.agent")), set()).add(span.name)
    assert set(by_agent) == {"triage", "billing", "human"}
    chain = {
        "a2a.receive",
        "a2a.handler",
        "a2a.gate",
        "a2a.checkpoint",
        "a2a.deliver",
        "a2a.create",
        "a2a.terminate",
    }
    assert chain <= by_agent["triage"]
    assert chain <= by_agent["billing"]
    assert chain | {"a2a.escalation_wait"} <= by_agent["human"]
    # The spans form one tree per agent hop: every receive on billing and human has a parent
    # in the trace (the caller's create span), none is a root but triage's.
    roots = [s for s in ours if s.parent is None or s.parent.is_remote]
    assert {str(s.attributes.get("a2a.agent")) for s in roots} >= {"triage"}
    creates = {s.context.span_id for s in ours if s.name == "a2a.create"}
    received = [
        s
        for s in ours
        if s.name == "a2a.receive"
        and s.attributes.get("a2a.agent") in ("billing", "human")
        and s.parent is not None
    ]
    assert any(s.parent is not None and s.parent.span_id in creates for s in received)


class Raising:
    async def handle(self, ctx: TaskContext) -> None:
        raise LookupError("no such order: 99")


async def test_a_handler_exception_is_logged_with_its_traceback_and_ids(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    agent: Agent = Raising()
    app = create_app(agent, build_card("broken", url), open_store(f"sqlite:///{tmp_path}/b.db"))
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logs.json_formatter())
    logger = logging.getLogger("a2a_handoff")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        async with serving((app, port)), httpx.AsyncClient(timeout=30) as http:
            message = {"messageId": "m-2", "role": "ROLE_USER", "parts": [{"text": "order 99"}]}
            task = (await rpc(http, url, "SendMessage", {"message": message}))["task"]
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    lines = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    raised = next(e for e in lines if e.get("event") == "handler.exception")
    assert raised["task_id"] == task["id"]
    assert raised["context_id"] == task["contextId"]
    assert raised["agent"] == "broken"
    assert raised["level"] == "ERROR"
    assert "Traceback" in raised["exc_info"]
    assert "LookupError: no such order: 99" in raised["exc_info"]
    assert "in handle" in raised["exc_info"]


async def test_a_sampled_trace_is_kept_whole_and_a_dropped_one_leaves_nothing(
    tmp_path: Path,
) -> None:
    # One trace in two kept, by trace id (the usual production sampler): the decision the
    # caller made (traceparent's flags) holds on every agent, and for the parts of the chain
    # that run in no request of the trace — the operator's answer, its return — too.
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.5)))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    kept, dropped = (
        f"{random.getrandbits(64):016x}{1:016x}",
        f"{random.getrandbits(64):016x}{'f' * 16}",
    )
    tracing.use_provider(provider)
    try:
        for trace_id, flags in ((kept, "01"), (dropped, "00")):
            (tmp_path / flags).mkdir()
            await escalated_refund(tmp_path / flags, f"00-{trace_id}-{1:016x}-{flags}")
    finally:
        tracing.use_provider(None)
    recorded: dict[str, dict[str, set[str]]] = {}
    for span in exporter.get_finished_spans():
        agents = recorded.setdefault(f"{span.context.trace_id:032x}", {})
        agents.setdefault(str(span.attributes.get("a2a.agent")), set()).add(span.name)
    assert dropped not in recorded
    assert set(recorded[kept]) == {"triage", "billing", "human"}
    assert "a2a.escalation_wait" in recorded[kept]["human"]
    assert {"a2a.receive", "a2a.handler", "a2a.create", "a2a.terminate"} <= recorded[kept][
        "billing"
    ]


async def test_no_span_is_started_within_a_dropped_one() -> None:
    asked: list[str] = []

    class Dropping(Sampler):
        def should_sample(
            self, parent_context: Any, trace_id: int, name: str, *args: Any, **kwargs: Any
        ) -> SamplingResult:
            asked.append(name)
            return SamplingResult(Decision.DROP)

        def get_description(self) -> str:
            return "drops every span"

    tracing.use_provider(TracerProvider(sampler=Dropping()))
    try:
        with tracing.span("a2a.receive", "http.route", "/"):
            assert tracing.current_trace_id() is not None  # log lines still carry the id
            with (
                tracing.span("a2a.handler", "a2a.task_id", "t-1"),
                tracing.span("a2a.gate", "a2a.target", "billing"),
            ):
                pass
    finally:
        tracing.use_provider(None)
    assert asked == ["a2a.receive"]


@asynccontextmanager
async def sampled_echo(
    keys: dict[str, str], trust: TrustConfig
) -> AsyncIterator[tuple[InMemorySpanExporter, Any]]:
    """An echo agent whose own sampler keeps no new trace, under `keys`: the exporter of
    what it records, and `send(key)` — a GetTask with a sampled `traceparent`."""
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    from a2a_handoff import ApiKeyAuth
    from servers.echo import EchoAgent, echo_card

    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ParentBased(ALWAYS_OFF))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    trust = replace(trust, auth=ApiKeyAuth.from_keys(keys))
    app = create_app(EchoAgent(), echo_card(url), open_store("memory://"), trust=trust)
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}
    tracing.use_provider(provider)
    try:
        async with serving((app, port)), httpx.AsyncClient(timeout=10) as http:

            async def send(key: str | None) -> httpx.Response:
                sampled = f"00-{random.getrandbits(128):032x}-{1:016x}-01"
                headers = {**A2A_HEADERS, "traceparent": sampled}
                if key is not None:
                    headers["X-API-Key"] = key
                return await http.post(url, json=body, headers=headers)

            yield exporter, send
    finally:
        tracing.use_provider(None)


async def test_only_an_authenticated_callers_traceparent_decides_what_is_recorded() -> None:
    # Before: any caller, even one answered 401, made the agent record and export spans by
    # sending a sampled traceparent. The agent's own sampler here keeps no new trace.
    async with sampled_echo({"alice": "alice-key"}, TrustConfig()) as (exporter, send):
        for key in (None, "wrong-key") * 10:
            assert (await send(key)).status_code == 401
        assert exporter.get_finished_spans() == ()
        answer = await send("alice-key")
        assert answer.json()["error"]["code"] == -32001
        assert [s.name for s in exporter.get_finished_spans()] == ["a2a.receive"]


async def test_a_users_traceparent_is_followed_within_a_rate_a_trusted_agents_always() -> None:
    # Before: any key holder made the agent record and export every span of every request
    # by sending a sampled traceparent (about 40% of its throughput).
    keys = {"alice": "alice-key", "triage": "triage-key"}
    trust = TrustConfig(trusted=["triage=http://127.0.0.1:9/"])
    loop = asyncio.get_running_loop()
    async with sampled_echo(keys, trust) as (exporter, send):
        began = loop.time()
        for _ in range(60):
            await send("alice-key")
        took = loop.time() - began
        followed = len(exporter.get_finished_spans())
        # A bucket of 10, refilled at 10 a second: never more than that.
        assert 10 <= followed <= 10 + int(took * 10) + 1, (followed, took)
        exporter.clear()
        for _ in range(30):
            await send("triage-key")
        assert len(exporter.get_finished_spans()) == 30
