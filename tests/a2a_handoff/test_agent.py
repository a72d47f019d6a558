"""The agent API's additions, served in process: direct replies, artifact chunks, raw bytes,
message-id deduplication as a switch, and handlers refused at `create_app`."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx
import pytest

from a2a_handoff import (
    Completed,
    InputRequired,
    MemoryTaskStore,
    Outcome,
    Part,
    Reply,
    TaskContext,
    build_card,
    create_app,
    skill,
)
from a2a_handoff.protocol import AgentProvider
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.models import Artifact
from servers.echo import echo_card
from tests.a2a_handoff.server.test_methods import URL, Client, serve

pytestmark = pytest.mark.anyio


class Replier:
    """`reply`: a direct Message; `late`: a reply after the task was written; `chunks`:
    an artifact in chunks; `ask`: input required."""

    def __init__(self) -> None:
        self.runs = 0

    async def handle(self, ctx: TaskContext) -> Outcome | None:
        self.runs += 1
        if ctx.text == "reply":
            return Reply("just a message", data={"n": 1})
        if ctx.text == "late":
            await asyncio.sleep(0.05)  # e.g. a model thinking: nothing emitted yet
            return Reply("after a wait")
        if ctx.text == "emitted":
            await ctx.status("thinking")  # task state emitted: the task exists now
            return Reply("too late for a message")
        if ctx.text == "chunks":
            async with ctx.artifact_stream("answer", description="streamed") as stream:
                for word in ("Hello", ", ", "world"):
                    await stream.write(word)
                    await asyncio.sleep(0)
                await stream.write(data={"done": True})
            return Completed()
        if ctx.text == "ask":
            return InputRequired("more?")
        return None


async def sse_items(client: Client, method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    body = {"jsonrpc": "2.0", "id": 3, "method": method, "params": params}
    items = []
    async with client.http.stream("POST", URL, json=body, headers={"A2A-Version": "1.0"}) as r:
        async for line in r.aiter_lines():
            if line.startswith("data:"):
                items.append(json.loads(line[5:])["result"])
    return items


async def test_a_reply_is_a_direct_message_and_its_receipt_answers_a_repeat() -> None:
    agent = Replier()
    async for client in serve(agent, MemoryTaskStore()):
        result = (await client.send("reply", context_id="ctx-1"))["result"]
        assert "task" not in result
        message = result["message"]
        assert message["role"] == "ROLE_AGENT"
        assert message["parts"] == [{"text": "just a message"}, {"data": {"n": 1}}]
        assert message["contextId"] == "ctx-1"
        assert "taskId" not in message
        # The task written before the handler ran is the reply's receipt, completed with it.
        (receipt,) = (await client.call("ListTasks", {}))["result"]["tasks"]
        assert receipt["status"]["state"] == "TASK_STATE_COMPLETED"
        assert receipt["status"]["message"]["messageId"] == message["messageId"]
        assert receipt["metadata"][URI]["reply"] is True
        # The same message id is answered with the same Message: the handler runs once.
        first = (await client.send("reply", message_id="again"))["result"]["message"]
        again = (await client.send("reply", message_id="again"))["result"]["message"]
        assert again == first
        assert agent.runs == 2


async def test_a_streamed_reply_is_one_message_then_the_stream_closes() -> None:
    async for client in serve(Replier(), MemoryTaskStore()):
        params = {"message": {"messageId": "s1", "role": "ROLE_USER", "parts": [{"text": "reply"}]}}
        items = await sse_items(client, "SendStreamingMessage", params)
        assert len(items) == 1
        assert items[0]["message"]["parts"][0] == {"text": "just a message"}


async def test_a_blocking_send_may_be_replied_after_the_handler_waited() -> None:
    async for client in serve(Replier(), MemoryTaskStore()):
        result = (await client.send("late"))["result"]
        assert result["message"]["parts"] == [{"text": "after a wait"}]
        assert "taskId" not in result["message"]


async def test_a_reply_after_the_task_was_written_completes_it_with_the_message() -> None:
    async for client in serve(Replier(), MemoryTaskStore()):
        task = (await client.send("emitted"))["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["status"]["message"]["parts"] == [{"text": "too late for a message"}]
        assert task["status"]["message"]["taskId"] == task["id"]
        # returnImmediately answers with the task at once: a later reply completes it.
        started = (await client.send("late", returnImmediately=True))["result"]["task"]
        await asyncio.sleep(0.2)
        done = await client.task(started["id"])
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        assert done["status"]["message"]["parts"] == [{"text": "after a wait"}]


async def test_a_reply_to_a_follow_up_completes_the_task() -> None:
    async for client in serve(Replier(), MemoryTaskStore()):
        task = (await client.send("ask"))["result"]["task"]
        done = (await client.send("reply", task_id=task["id"]))["result"]["task"]
        assert done["id"] == task["id"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        assert done["status"]["message"]["parts"][0] == {"text": "just a message"}


async def test_artifact_chunks_are_events_and_one_stored_artifact() -> None:
    async for client in serve(Replier(), MemoryTaskStore()):
        params = {
            "message": {"messageId": "c1", "role": "ROLE_USER", "parts": [{"text": "chunks"}]}
        }
        items = await sse_items(client, "SendStreamingMessage", params)
        updates = [i["artifactUpdate"] for i in items if "artifactUpdate" in i]
        assert len({u["artifact"]["artifactId"] for u in updates}) == 1
        assert [u.get("append", False) for u in updates] == [False, True, True, True, True]
        assert [u["lastChunk"] for u in updates] == [False, False, False, False, True]
        assert updates[0]["artifact"]["name"] == "answer"
        assert [u["artifact"]["parts"] for u in updates[:3]] == [
            [{"text": "Hello"}],
            [{"text": ", "}],
            [{"text": "world"}],
        ]
        task_id = items[0]["task"]["id"]
        stored = await client.task(task_id)
        assert len(stored["artifacts"]) == 1
        artifact = stored["artifacts"][0]
        assert artifact["artifactId"] == updates[0]["artifact"]["artifactId"]
        assert artifact["name"] == "answer"
        assert artifact["description"] == "streamed"
        # Text runs are joined; the data chunk stays a part of its own; the closing "" too.
        assert artifact["parts"] == [
            {"text": "Hello, world"},
            {"data": {"done": True}},
            {"text": ""},
        ]


async def test_appending_to_an_unknown_artifact_fails_the_task() -> None:
    class Bad:
        async def handle(self, ctx: TaskContext) -> Outcome | None:
            await ctx.artifact(text="x", artifact_id="nope", append=True)
            return None

    async for client in serve(Bad(), MemoryTaskStore()):
        task = (await client.send("hi"))["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert "nope" in task["status"]["message"]["parts"][0]["text"]


async def test_raw_bytes_are_encoded_and_decoded() -> None:
    part = Part(raw=b"\x00\xffbinary", filename="b.bin", media_type="application/octet-stream")
    assert part.raw == base64.b64encode(b"\x00\xffbinary").decode()
    assert part.raw_bytes == b"\x00\xffbinary"
    assert part.dump()["raw"] == part.raw
    assert Part(raw=bytearray(b"ab")).raw_bytes == b"ab"
    assert Part(text="t").raw_bytes is None
    with pytest.raises(ValueError, match="base64"):
        Part(raw="not base64!")
    artifact = Artifact(artifact_id="a", parts=[Part(raw=memoryview(b"mv"))])
    assert artifact.parts[0].raw_bytes == b"mv"


async def test_message_ids_deduplicate_unless_switched_off() -> None:
    agent = Replier()
    async for client in serve(agent, MemoryTaskStore()):  # the default: on
        a = (await client.send("hi", message_id="same"))["result"]["task"]
        b = (await client.send("hi", message_id="same"))["result"]["task"]
        assert a["id"] == b["id"]
    app = create_app(agent, echo_card(URL), MemoryTaskStore(), dedupe_message_ids=False)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=URL) as http,
    ):
        client = Client(http)
        a = (await client.send("hi", message_id="same"))["result"]["task"]
        b = (await client.send("hi", message_id="same"))["result"]["task"]
        assert a["id"] != b["id"]
        # A follow-up reusing an id of the task's history is run too (not dropped).
        asked = (await client.send("ask", message_id="q"))["result"]["task"]
        again = (await client.send("ask", message_id="q", task_id=asked["id"]))["result"]["task"]
        assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        users = [m for m in (await client.task(asked["id"]))["history"] if m["role"] == "ROLE_USER"]
        assert len(users) == 2


def test_a_handler_that_is_not_async_is_refused_at_create_app() -> None:
    class Sync:
        def handle(self, ctx: TaskContext) -> None:
            return None

    with pytest.raises(TypeError, match="must be an async method"):
        create_app(Sync(), echo_card(URL), MemoryTaskStore())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be an async method"):
        create_app(object(), echo_card(URL), MemoryTaskStore())  # type: ignore[arg-type]


def test_build_card_takes_modes_provider_links_skills_and_flags() -> None:
    card = build_card(
        "writer",
        "http://127.0.0.1:9000/",
        input_modes=["text/plain", "application/json"],
        output_modes=["text/markdown"],
        provider=AgentProvider(organization="Example Co", url="https://example.com"),
        documentation_url="https://example.com/docs",
        icon_url="https://example.com/icon.png",
        skills=[skill("write", "Writes", "text", examples=["write a haiku"])],
        streaming=False,
        push_notifications=False,
        extended_agent_card=False,
        capabilities=["drafting"],
    ).dump()
    assert card["defaultInputModes"] == ["text/plain", "application/json"]
    assert card["defaultOutputModes"] == ["text/markdown"]
    assert card["provider"] == {"organization": "Example Co", "url": "https://example.com"}
    assert card["documentationUrl"] == "https://example.com/docs"
    assert card["iconUrl"] == "https://example.com/icon.png"
    assert card["skills"][0]["examples"] == ["write a haiku"]
    assert card["capabilities"]["streaming"] is False
    assert card["capabilities"]["extendedAgentCard"] is False
    [extension] = card["capabilities"]["extensions"]
    assert extension["params"]["capabilities"] == ["drafting"]
    assert [(i["protocolBinding"], i["url"]) for i in card["supportedInterfaces"]] == [
        ("JSONRPC", "http://127.0.0.1:9000/"),
        ("HTTP+JSON", "http://127.0.0.1:9000"),
    ]
    only_rpc = build_card("w", "http://127.0.0.1:9000/", http_json=False).dump()
    assert [i["protocolBinding"] for i in only_rpc["supportedInterfaces"]] == ["JSONRPC"]
