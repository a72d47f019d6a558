"""The agent the A2A conformance kit (a2a-tck, `scripts/tck`) runs against, on our public API.

It does what the kit's scenarios (`scenarios/*.feature` of the kit) say an agent under test
does for each `messageId` prefix — longest prefix first, since `tck-artifact-file-url` also
starts with `tck-artifact-file`:

    tck-complete-task            COMPLETED, status message "Hello from TCK"
    tck-input-required           INPUT_REQUIRED (a follow-up with another prefix goes on)
    tck-artifact-text|file|file-url|data   the named artifact, COMPLETED
    tck-message-response         a direct Message, "Direct message response" (no task)
    tck-reject-task              REJECTED "rejected"
    tck-stream-001|003|ordering-001|artifact-text   WORKING, a text artifact, COMPLETED
    tck-stream-002               COMPLETED
    tck-stream-artifact-file     WORKING, a file artifact, COMPLETED
    tck-stream-artifact-chunked  WORKING, "chunk-1 " then "chunk-2" (append, lastChunk)
    test-resubscribe-message-id  WORKING for twice the streaming timeout, COMPLETED
    anything else                COMPLETED, "Unhandled messageId prefix: …"

The kit reuses each scenario's messageId for a whole run, so the app is made with
`dedupe_message_ids=False` (our agents otherwise answer a repeated id with its first task).

    python -m tests.tck_agent --port P [--store URL] [--grpc-port G]
"""

from __future__ import annotations

import argparse
import asyncio
import os

import uvicorn
from starlette.applications import Starlette

from a2a_handoff import (
    Completed,
    GrpcConfig,
    InputRequired,
    Outcome,
    Part,
    PushSettings,
    Rejected,
    Reply,
    TaskContext,
    build_card,
    create_app,
    open_store,
    skill,
)

STREAMING_TIMEOUT = float(os.environ.get("TCK_STREAMING_TIMEOUT", "2.0"))
FILE = {"filename": "output.txt", "media_type": "text/plain"}

_STREAMED_TEXT = {
    "tck-stream-artifact-text": "Streamed text content",
    "tck-stream-ordering-001": "Ordered output",
    "tck-stream-001": "Stream hello from TCK",
    "tck-stream-003": "Stream task lifecycle",
}


class TckAgent:
    """One branch per scenario prefix."""

    async def handle(self, ctx: TaskContext) -> Outcome | None:
        mid = ctx.message.message_id
        if mid.startswith("tck-message-response"):
            return Reply("Direct message response")
        if mid.startswith("tck-stream-artifact-chunked"):
            await ctx.status("working")
            async with ctx.artifact_stream("chunked") as stream:
                await stream.write("chunk-1 ")
                await stream.write("chunk-2", last=True)
            return Completed()
        if mid.startswith("test-resubscribe-message-id"):
            await ctx.status("working")
            await asyncio.sleep(2 * STREAMING_TIMEOUT)
            return Completed()
        for prefix, text in _STREAMED_TEXT.items():
            if mid.startswith(prefix):
                await ctx.status("working")
                await ctx.artifact(text=text)
                return Completed()
        if mid.startswith("tck-stream-artifact-file"):
            await ctx.status("working")
            await ctx.artifact(Part(raw=b"TCK file content", **FILE))
            return Completed()
        if mid.startswith("tck-stream-002"):
            return Completed()
        if mid.startswith("tck-artifact-file-url"):
            await ctx.artifact(Part(url="https://example.com/output.txt", **FILE))
            return Completed()
        if mid.startswith("tck-artifact-file"):
            await ctx.artifact(Part(raw=b"TCK file content", **FILE))
            return Completed()
        if mid.startswith("tck-artifact-text"):
            await ctx.artifact(text="Generated text content")
            return Completed()
        if mid.startswith("tck-artifact-data"):
            await ctx.artifact(data={"key": "value", "count": 42})
            return Completed()
        if mid.startswith("tck-input-required"):
            return InputRequired("TCK needs input")
        if mid.startswith("tck-reject-task"):
            return Rejected("rejected")
        if mid.startswith("tck-complete-task"):
            return Completed("Hello from TCK")
        return Completed(f"Unhandled messageId prefix: {mid}")


def tck_app(url: str, store: str = "memory://", grpc_port: int | None = None) -> Starlette:
    card = build_card(
        "tck-sut",
        url,
        description="a2a-handoff, as the A2A conformance kit tests it",
        skills=[skill("tck", "Behaves as the conformance kit's scenarios say", "tck")],
    )
    signed_in = skill("tck-extended", "Seen only in the authenticated extended card", "tck")
    extended = card.model_copy(update={"skills": [*card.skills, signed_in]})
    # The kit's webhook receiver listens on this machine (`localhost` by default).
    push = PushSettings(allow=("localhost", "127.0.0.1", "::1"), retry_max=2.0)
    return create_app(
        TckAgent(),
        card,
        open_store(store),
        dedupe_message_ids=False,
        extended_card=extended,
        push=push,
        grpc=None if grpc_port is None else GrpcConfig(port=grpc_port),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--store", default="memory://")
    parser.add_argument("--grpc-port", type=int, default=None, help="serve gRPC too")
    args = parser.parse_args()
    app = tck_app(f"http://127.0.0.1:{args.port}/", args.store, args.grpc_port)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
