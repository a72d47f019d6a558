"""AgentClient addresses the tenant the agent's card names: once it read the card, every
call and stream to that agent carries the tenant of the interface its calls go to (unless
the call names one itself); a card naming none, or not read, leaves calls untenanted."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from a2a_handoff.client.client import tenant_of_card, with_tenant
from a2a_handoff.protocol.agent_card import AgentCard, build_card, named_tenant
from tests.a2a_handoff.client.test_client import TASK, URL, agent_client, message, ok, sse_event

pytestmark = pytest.mark.anyio

OTHER = "http://b.test:8000/"
OTHER_REPLICA = "http://a.test:8001/"


class Agent:
    """Serves a card (its interfaces naming `tenant`, or none) and answers every call
    with TASK (a stream: one event); keeps what it was sent."""

    def __init__(self, tenant: str | None) -> None:
        card = build_card("billing", URL, tenant=tenant)
        self.card = card.model_dump(by_alias=True, exclude_none=True)
        self.cards_read = 0
        self.calls: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            self.cards_read += 1
            return httpx.Response(200, json=self.card)
        call = json.loads(request.content)
        self.calls.append(call)
        if request.headers.get("Accept") == "text/event-stream":
            body = sse_event(1, {"task": TASK})
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, text=body)
        return httpx.Response(
            200, json=ok({"task": TASK} if call["method"] == "SendMessage" else TASK)
        )

    def tenants(self) -> list[str | None]:
        return [call["params"].get("tenant") for call in self.calls]


async def test_every_call_to_an_agent_whose_card_names_a_tenant_carries_it() -> None:
    agent = Agent("acme")
    async with agent_client(agent) as client:
        await client.get_task(URL, "t")  # before the card is read: nothing to follow
        await client.card(URL)
        await client.get_task(URL, "t")
        await client.send(URL, message())
        await client.list_tasks(URL)  # no params of its own: `{"tenant": …}` alone
        await client.call_json(URL, "GetTask", ' { "id" : "t" }')
        await client.call_json(URL, "ListTasks", "{}")
        _ = [item async for item in client.stream(URL, message())]
        _ = [item async for item in client.subscribe(URL, "t")]
    assert agent.tenants() == [None, *["acme"] * 7]
    assert agent.calls[2]["params"]["message"]["messageId"] == "m-1"  # the params kept
    assert agent.calls[4]["params"] == {"tenant": "acme", "id": "t"}
    assert agent.calls[5]["params"] == {"tenant": "acme"}


async def test_a_call_that_names_its_tenant_keeps_it() -> None:
    agent = Agent("acme")
    async with agent_client(agent) as client:
        await client.card(URL)
        await client.list_tasks(URL, tenant="globex")
        await client.call(URL, "GetTask", {"id": "t", "tenant": ""})
        await client.call_json(URL, "GetTask", '{"id":"t"}', card_tenant=False)
        _ = [i async for i in client._sse(URL, "SubscribeToTask", {"id": "t", "tenant": "x"}, None)]
    assert agent.tenants() == ["globex", "", None, "x"]
    assert all(list(call["params"]).count("tenant") <= 1 for call in agent.calls)


async def test_a_card_naming_no_tenant_leaves_calls_untenanted() -> None:
    agent = Agent(None)
    async with agent_client(agent) as client:
        await client.card(URL)
        await client.get_task(URL, "t")
        await client.call_json(URL, "GetTask", '{"id":"t"}')
    assert agent.tenants() == [None, None]
    assert all("tenant" not in call["params"] for call in agent.calls)


async def test_a_card_read_anew_that_names_another_tenant_or_none_is_followed() -> None:
    agent = Agent("acme")
    async with agent_client(agent, card_ttl=0) as client:
        await client.card(URL)
        await client.get_task(URL, "t")
        agent.card = build_card("billing", URL).model_dump(by_alias=True, exclude_none=True)
        await client.card(URL)
        await client.get_task(URL, "t")
    assert agent.tenants() == ["acme", None]


async def test_addressed_reads_a_card_once_so_that_a_first_call_finds_its_tenant() -> None:
    agent = Agent("acme")
    async with agent_client(agent, card_ttl=0) as client:
        for _ in range(3):
            await client.addressed(URL)
            await client.get_task(URL, "t")
    assert agent.cards_read == 1  # not read again for each call, even once stale
    assert agent.tenants() == ["acme"] * 3


async def test_a_client_that_reads_cards_reads_one_before_its_first_call_and_stream() -> None:
    calls, streams = Agent("acme"), Agent("acme")
    async with agent_client(calls, read_cards=True, card_ttl=0) as client:
        await client.get_task(URL, "t")  # the first call: the card is read before it
        await client.call_json(URL, "GetTask", '{"id":"t"}')
    async with agent_client(streams, read_cards=True) as client:
        _ = [item async for item in client.subscribe(URL, "t")]  # a stream first
        await client.cancel(URL, "t")
    assert (calls.cards_read, calls.tenants()) == (1, ["acme", "acme"])  # once, even stale
    assert (streams.cards_read, streams.tenants()) == (1, ["acme", "acme"])
    plain = Agent("acme")
    async with agent_client(plain) as client:  # by default, only what was read is followed
        await client.get_task(URL, "t")
    assert (plain.cards_read, plain.tenants()) == (0, [None])


async def test_each_agent_is_called_in_the_tenant_its_own_card_names() -> None:
    acme, other = Agent("acme"), Agent(None)

    def route(request: httpx.Request) -> httpx.Response:
        return (acme if request.url.host == "a.test" else other)(request)

    async with agent_client(route) as client:
        await client.card(URL)
        await client.card(OTHER)
        await client.get_task(URL, "t")
        await client.get_task(OTHER, "t")
    assert acme.tenants() == ["acme"]
    assert other.tenants() == [None]


async def test_a_replica_whose_card_was_not_read_is_called_in_the_addresss_tenant() -> None:
    agent = Agent("acme")
    down = True

    def replicas(request: httpx.Request) -> httpx.Response:
        if request.url.port == 8000 and request.method == "POST" and down:
            raise httpx.ConnectError("down", request=request)
        return agent(request)

    address = f"{URL},{OTHER_REPLICA}"
    async with agent_client(replicas) as client:
        await client.card(address)  # read from the first replica
        await client.get_task(address, "t")  # fails over to the second, never read
        down = False
        _ = [item async for item in client._sse(OTHER_REPLICA, "SubscribeToTask", {}, None)]
    assert agent.tenants() == ["acme", None]  # the second replica alone: its card unread
    assert agent.cards_read == 1


def test_the_tenant_followed_is_the_interface_the_calls_go_to() -> None:
    card = build_card("billing", URL)
    assert tenant_of_card(card) == ""
    assert tenant_of_card(named_tenant(card, "acme")) == "acme"
    rest, jsonrpc = card.supported_interfaces[1], card.supported_interfaces[0]
    grpc = jsonrpc.model_copy(update={"protocol_binding": "GRPC", "tenant": "over-grpc"})
    both = AgentCard.model_validate(
        {
            **card.model_dump(by_alias=True),
            "supportedInterfaces": [
                rest.model_copy(update={"tenant": "rest"}).model_dump(by_alias=True),
                grpc.model_dump(by_alias=True),
                jsonrpc.model_copy(update={"tenant": "rpc"}).model_dump(by_alias=True),
            ],
        }
    )
    assert tenant_of_card(both) == "rpc"  # JSON-RPC preferred, where the calls go
    grpc_only = both.model_copy(update={"supported_interfaces": [rest, grpc]})
    assert tenant_of_card(grpc_only) == "over-grpc"  # gRPC alone: its interface's


def test_a_tenant_is_put_first_into_params_already_encoded() -> None:
    assert json.loads(with_tenant("{}", "acme")) == {"tenant": "acme"}
    assert json.loads(with_tenant(" { } ", "acme")) == {"tenant": "acme"}
    assert json.loads(with_tenant('{"id":"t","n":{"a":1}}', "a.b")) == {
        "tenant": "a.b",
        "id": "t",
        "n": {"a": 1},
    }
    assert with_tenant('{"id":"t"}', 'x"y') == '{"tenant":"x\\"y","id":"t"}'  # encoded


async def test_an_agents_client_reads_cards_before_calls() -> None:
    """What makes an agent's first call after a restart (a notice, a sub-task's follow-up, a
    withdrawal) go to the tenant the card names."""
    from a2a_handoff.server._wiring import default_client

    client = default_client(None)
    assert client.read_cards
    await client.aclose()
