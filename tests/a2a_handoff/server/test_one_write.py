"""A response's head waits for its body and goes out with it, in order, never held for long."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from a2a_handoff.server._one_write import OneWrite

pytestmark = pytest.mark.anyio

HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


class Wire(asyncio.Transport):
    """A transport that keeps what is written to it, one entry per write."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.sent.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


async def test_the_head_and_the_body_go_in_one_write() -> None:
    wire = Wire()
    out = OneWrite(wire, asyncio.get_running_loop())
    out.write(HEAD)
    assert wire.sent == []
    out.write(b"{}")
    out.write(b"more")
    assert wire.sent == [HEAD + b"{}", b"more"]
    await asyncio.sleep(0)  # the scheduled flush finds nothing held
    assert wire.sent == [HEAD + b"{}", b"more"]


async def test_a_head_without_its_body_goes_on_the_next_turn() -> None:
    wire = Wire()
    out = OneWrite(wire, asyncio.get_running_loop())
    out.write(HEAD)
    await asyncio.sleep(0)
    assert wire.sent == [HEAD]
    out.write(b"data: 1\n\n")
    assert wire.sent == [HEAD, b"data: 1\n\n"]


async def test_a_continue_is_not_held_and_anything_else_asked_flushes_first() -> None:
    wire = Wire()
    out = OneWrite(wire, asyncio.get_running_loop())
    out.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert wire.sent == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    out.write(HEAD)
    out.close()  # the head is sent before the connection closes
    assert wire.sent[-1] == HEAD
    assert wire.closed
    await asyncio.sleep(0)
    assert wire.sent.count(HEAD) == 1


async def test_nothing_is_written_to_a_closed_connection() -> None:
    wire = Wire()
    out = OneWrite(wire, asyncio.get_running_loop())
    out.write(HEAD)
    wire.closed = True  # the client went away before the body
    await asyncio.sleep(0)
    assert wire.sent == []
