"""Tenants in the service: a caller's tenant scopes the owner its tasks are stored under
(`results.tenant_owner`), so nothing of one tenant reaches a caller of another — not through
a principal that starts with the separator either (the dedupe keys joining the owner to
ids that hold no control character stay apart too); an operator sees every task of the tenant
it calls in, and nothing of another."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from a2a_handoff import Agent, MemoryTaskStore, Reply, TaskContext
from a2a_handoff.auth import ApiKeyAuth, parse_keys
from a2a_handoff.errors import HandoffError, InvalidParamsError, TaskNotFoundError
from a2a_handoff.protocol.models import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    SendMessageRequest,
)
from a2a_handoff.server import AgentService, Caller, TaskView, TrustConfig, create_app
from a2a_handoff.server._call import tenant_of
from a2a_handoff.stores.records import owner_principal, owner_tenant, tenant_owner
from servers.echo import EchoAgent, echo_card

pytestmark = pytest.mark.anyio

URL = "http://agent.test/"


def send(text: str) -> SendMessageRequest:
    message: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    return SendMessageRequest.model_validate({"message": message})


async def sent_task(service: AgentService, request: SendMessageRequest, caller: Caller) -> str:
    view = await service.send_message(request, caller)
    assert isinstance(view, TaskView)
    return view.task.id


def test_each_tenant_and_principal_has_an_owner_of_its_own() -> None:
    # Tenants as `tenant_of` lets them through: no control character.
    pairs = [
        ("", "alice"),
        ("", ""),
        ("", "\x1facme\x1falice"),  # a principal shaped like a tenant's owner
        ("", "\x1f"),
        ("acme", "alice"),
        ("acme", ""),
        ("acme", "\x1falice"),
    ]
    owners = [tenant_owner(tenant, principal) for tenant, principal in pairs]
    assert len(set(owners)) == len(owners)
    assert [(owner_tenant(o), owner_principal(o)) for o in owners] == pairs
    assert tenant_owner("", "alice") == "alice"  # tasks stored before tenants stay alice's


def test_a_tenant_name_is_checked_and_a_path_and_body_must_agree() -> None:
    assert tenant_of({}) == ""
    assert tenant_of({"tenant": ""}) == ""
    assert tenant_of({"tenant": "acme-1.eu_x~y"}) == "acme-1.eu_x~y"
    assert tenant_of({}, "acme") == "acme"
    assert tenant_of({"tenant": "acme"}, "acme") == "acme"
    for bad in ("a/b", "-x", ".x", "tasks", "extendedAgentCard", "x" * 129, "a\x1fb", 5, ["a"]):
        with pytest.raises(InvalidParamsError, match="tenant"):
            tenant_of({"tenant": bad})
    with pytest.raises(InvalidParamsError, match="another tenant than the path"):
        tenant_of({"tenant": "globex"}, "acme")


async def test_operators_see_every_task_of_the_tenant_they_call_in_and_nothing_else() -> None:
    auth = ApiKeyAuth.from_keys({"alice": "k-alice", "op": "k-op"})
    trust = TrustConfig(auth=auth, operators=["op"])
    store = MemoryTaskStore()
    async with AgentService(EchoAgent(), echo_card(URL), store, trust=trust) as service:
        acme = await sent_task(service, send("hello"), Caller("alice", tenant="acme"))
        mine = await sent_task(service, send("hello"), Caller("op", tenant="globex"))
        default = await sent_task(service, send("hello"), Caller("alice"))
        in_acme, in_globex, in_default = (Caller("op", tenant=t) for t in ("acme", "globex", ""))
        # In a tenant, an operator sees and answers every task of it: alice's too.
        assert (await service.get_task(GetTaskRequest(id=acme), in_acme)).task.id == acme
        page = await service.list_tasks(ListTasksRequest(), in_acme)
        assert [view.task.id for view in page.tasks] == [acme]
        assert page.total_size == 1
        # Nothing of another tenant: not from a named one, not from the default one.
        for operator, theirs in ((in_globex, {mine}), (in_default, {default})):
            for other in {acme, mine, default} - theirs:
                with pytest.raises(TaskNotFoundError):
                    await service.get_task(GetTaskRequest(id=other), operator)
                with pytest.raises(TaskNotFoundError):
                    await service.cancel_task(CancelTaskRequest(id=other), operator)
            page = await service.list_tasks(ListTasksRequest(), operator)
            assert {view.task.id for view in page.tasks} == theirs
            assert page.total_size == len(theirs)


class WhoAgent(Agent):
    """Answers with the principal and tenant its handler is told."""

    async def handle(self, ctx: TaskContext) -> Reply:
        return Reply(f"{ctx.principal!r} in {ctx.tenant!r}")


async def test_a_handler_is_told_the_principal_and_the_tenant_apart() -> None:
    auth = ApiKeyAuth.from_keys({"alice": "k-alice"})
    trust = TrustConfig(auth=auth)
    async with AgentService(WhoAgent(), echo_card(URL), MemoryTaskStore(), trust=trust) as service:
        for caller, said in (
            (Caller("alice", tenant="acme"), "'alice' in 'acme'"),
            (Caller("alice"), "'alice' in ''"),
        ):
            reply = await service.send_message(send("who?"), caller)
            assert isinstance(reply, Message)
            assert reply.parts[0].text == said


async def test_a_card_interface_names_its_tenant_and_its_clients_reach_it() -> None:
    card = echo_card(URL)
    interfaces = [i.model_copy(update={"tenant": "acme"}) for i in card.supported_interfaces]
    card = card.model_copy(update={"supported_interfaces": interfaces})
    app = create_app(EchoAgent(), card, MemoryTaskStore())
    headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=URL) as http,
    ):
        served = (await http.get("/.well-known/agent-card.json")).json()
        assert {i["tenant"] for i in served["supportedInterfaces"]} == {"acme"}
        # A client following the card: the path over HTTP+JSON, the param over JSON-RPC.
        body = {"message": send("hello").message.dump()}
        made = await http.post("/acme/message:send", json=body, headers=headers)
        task_id = made.json()["task"]["id"]
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask"}
        params = {"id": task_id, "tenant": "acme"}
        got = await http.post("/", json={**rpc, "params": params}, headers=headers)
        assert got.json()["result"]["id"] == task_id
        elsewhere = await http.post("/", json={**rpc, "params": {"id": task_id}}, headers=headers)
        assert elsewhere.json()["error"]["code"] == -32001
        # `/tasks/{id}` stays a task's path: "tasks" is no tenant.
        task_named_tasks = await http.get("/tasks/tasks", headers=headers)
        assert task_named_tasks.json()["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"
        assert (await http.get(f"/acme/tasks/{task_id}", headers=headers)).status_code == 200


def test_an_api_key_principal_holding_a_control_character_is_refused() -> None:
    """Stored owners fold a tenant in with a control character: no principal may hold one."""
    with pytest.raises(HandoffError, match="control character"):
        parse_keys("\x1facme\x1falice=k1")
    assert parse_keys("alice=k1") == {"alice": "k1"}
