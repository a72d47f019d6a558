"""Http11Transport against a scripted HTTP server on 127.0.0.1: pooling, framing, failures."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest

from a2a_handoff.client.client import AgentClient
from a2a_handoff.client.replicas import never_arrived
from a2a_handoff.client.transport import Http11Transport
from a2a_handoff.errors import UnavailableError
from tests.support import free_port

pytestmark = pytest.mark.anyio

Writer = asyncio.StreamWriter
# Answers one request: gets its head and body, writes the response (or not).
Respond = Callable[[bytes, bytes, Writer], Awaitable[None]]


def response(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    head = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def echo_json(head: bytes, body: bytes, writer: Writer) -> None:
    """Answers the request's method, path, body and headers as JSON."""
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ")
    headers = dict(line.split(": ", 1) for line in lines[1:] if line)
    payload = {"method": method, "path": path, "body": body.decode(), "headers": headers}
    writer.write(response(json.dumps(payload).encode(), "Content-Type: application/json"))


class Server:
    """Reads requests one at a time per connection and lets `respond` answer each."""

    def __init__(self, respond: Respond) -> None:
        self.respond = respond
        self.connections = 0
        self.requests = 0
        self.url = ""
        self._server: asyncio.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                self.requests += 1
                await self.respond(head, body, writer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> Server:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/rpc?x=1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()


@asynccontextmanager
async def serving(respond: Respond) -> AsyncIterator[tuple[Server, Http11Transport]]:
    transport = Http11Transport()
    try:
        async with Server(respond) as server:
            yield server, transport
    finally:
        await transport.aclose()


async def test_post_sends_the_request_and_reads_the_whole_answer() -> None:
    async with serving(echo_json) as (server, transport):
        status, body = await transport.post(server.url, b'{"a":1}', {"A2A-Version": "1.0"})
    seen = json.loads(body)
    assert status == 200
    assert (seen["method"], seen["path"], seen["body"]) == ("POST", "/rpc?x=1", '{"a":1}')
    assert seen["headers"]["A2A-Version"] == "1.0"
    assert seen["headers"]["Content-Type"] == "application/json"
    assert seen["headers"]["Host"] == server.url.split("/")[2]


async def test_keep_alive_connections_are_reused() -> None:
    async with serving(echo_json) as (server, transport):
        for _ in range(5):
            await transport.post(server.url, b"{}", {})
        async with httpx.AsyncClient(transport=transport) as client:
            assert (await client.get(server.url)).json()["method"] == "GET"
        assert (server.requests, server.connections) == (6, 1)


async def test_concurrent_calls_use_connections_of_their_own() -> None:
    async def slow(head: bytes, body: bytes, writer: Writer) -> None:
        await asyncio.sleep(0.05)
        writer.write(response(body))

    async with serving(slow) as (server, transport):
        answers = await asyncio.gather(
            *(transport.post(server.url, b'{"n":%d}' % i, {}) for i in range(4))
        )
        assert [body for _, body in answers] == [b'{"n":%d}' % i for i in range(4)]
        assert server.connections == 4
        await transport.post(server.url, b"{}", {})
        assert server.connections == 4  # idle ones went back to the pool


async def test_connection_close_is_not_reused() -> None:
    async def closing(head: bytes, body: bytes, writer: Writer) -> None:
        writer.write(response(b"{}", "Connection: close"))
        await writer.drain()
        writer.close()

    async with serving(closing) as (server, transport):
        for _ in range(3):
            assert await transport.post(server.url, b"{}", {}) == (200, b"{}")
        assert server.connections == 3


async def test_a_connection_the_server_closed_while_idle_is_replaced() -> None:
    async def answer_then_hang_up(head: bytes, body: bytes, writer: Writer) -> None:
        writer.write(response(b"{}"))
        await writer.drain()
        writer.close()  # keep-alive announced, then closed anyway (an idle timeout)

    async with serving(answer_then_hang_up) as (server, transport):
        await transport.post(server.url, b"{}", {})
        await asyncio.sleep(0.05)  # the close reaches the client while the connection idles
        assert await transport.post(server.url, b"{}", {}) == (200, b"{}")
        assert server.connections == 2


async def test_idle_connections_expire() -> None:
    transport = Http11Transport(keepalive_expiry=0.05)
    async with Server(echo_json) as server:
        await transport.post(server.url, b"{}", {})
        await asyncio.sleep(0.1)
        await transport.post(server.url, b"{}", {})
        assert server.connections == 2
    await transport.aclose()


async def test_chunked_and_close_delimited_bodies() -> None:
    async def chunked(head: bytes, body: bytes, writer: Writer) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n")

    async with serving(chunked) as (server, transport):
        assert await transport.post(server.url, b"{}", {}) == (200, b"abcdefg")

    async def until_close(head: bytes, body: bytes, writer: Writer) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nno length")
        await writer.drain()
        writer.close()

    async with serving(until_close) as (server, transport):
        assert await transport.post(server.url, b"{}", {}) == (200, b"no length")


async def test_a_streamed_body_arrives_as_it_is_written() -> None:
    go_on = asyncio.Event()

    async def stream(head: bytes, body: bytes, writer: Writer) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nfirst\n\r\n")
        await writer.drain()
        await go_on.wait()
        writer.write(b"5\r\nlast\n\r\n0\r\n\r\n")

    async with (
        serving(stream) as (server, transport),
        httpx.AsyncClient(transport=transport) as client,
        client.stream("POST", server.url, content=b"{}") as answer,
    ):
        lines = answer.aiter_lines()
        assert await anext(lines) == "first"  # before the server wrote the rest
        go_on.set()
        assert await anext(lines) == "last"


async def test_an_abandoned_stream_closes_its_connection() -> None:
    async def endless(head: bytes, body: bytes, writer: Writer) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(3):
            writer.write(b"2\r\nok\r\n")
        await writer.drain()
        await asyncio.sleep(0.2)

    async with serving(endless) as (server, transport):
        async with (
            httpx.AsyncClient(transport=transport) as client,
            client.stream("POST", server.url, content=b"{}") as answer,
        ):
            assert await anext(answer.aiter_bytes()) == b"ok"
        assert sum(len(idle) for idle in transport._idle.values()) == 0


async def test_refused_connection_is_a_connect_error() -> None:
    transport = Http11Transport()
    url = f"http://127.0.0.1:{free_port()}/"
    with pytest.raises(httpx.ConnectError):
        await transport.post(url, b"{}", {})
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(url)


async def test_the_client_knows_a_refused_call_never_arrived() -> None:
    transport = Http11Transport()
    client = AgentClient(httpx.AsyncClient(transport=transport), direct=transport)
    with pytest.raises(UnavailableError) as caught:
        await client.call(f"http://127.0.0.1:{free_port()}/", "GetTask", {"id": "t"})
    assert never_arrived(caught.value)
    await client.aclose()


async def test_read_timeout_closes_the_connection() -> None:
    async def silent(head: bytes, body: bytes, writer: Writer) -> None:
        await asyncio.sleep(1)

    async with serving(silent) as (server, transport):
        with pytest.raises(httpx.ReadTimeout):
            await transport.post(server.url, b"{}", {}, httpx.Timeout(0.05))
        assert sum(len(idle) for idle in transport._idle.values()) == 0


async def test_a_cancelled_call_does_not_leave_its_connection_in_the_pool() -> None:
    answered = asyncio.Event()

    async def late(head: bytes, body: bytes, writer: Writer) -> None:
        await answered.wait()
        writer.write(response(b"late"))

    async with serving(late) as (server, transport):
        call = asyncio.create_task(transport.post(server.url, b"{}", {}))
        await asyncio.sleep(0.05)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        answered.set()
        assert sum(len(idle) for idle in transport._idle.values()) == 0


async def test_a_malformed_answer_is_a_protocol_error() -> None:
    async def garbage(head: bytes, body: bytes, writer: Writer) -> None:
        writer.write(b"this is not HTTP\r\n\r\n")

    async with serving(garbage) as (server, transport):
        with pytest.raises(httpx.RemoteProtocolError):
            await transport.post(server.url, b"{}", {})


async def test_a_server_hanging_up_mid_answer_is_a_protocol_error() -> None:
    async def cut(head: bytes, body: bytes, writer: Writer) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")
        await writer.drain()
        writer.close()

    async with serving(cut) as (server, transport):
        with pytest.raises(httpx.RemoteProtocolError):
            await transport.post(server.url, b"{}", {})


async def test_other_schemes_go_to_the_fallback_transport() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, json={"via": "fallback"})

    transport = Http11Transport(fallback=httpx.MockTransport(handler))
    status, body = await transport.post("https://agent.test/", b"{}", {})
    assert (status, json.loads(body)) == (200, {"via": "fallback"})
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.get("https://agent.test/card")).json() == {"via": "fallback"}
    assert seen == ["https://agent.test/", "https://agent.test/card"]


async def test_a_closed_transport_refuses_calls() -> None:
    async with serving(echo_json) as (server, transport):
        await transport.aclose()
        with pytest.raises(httpx.ConnectError):
            await transport.post(server.url, b"{}", {})


def threaded_server(answer: bytes, *, then_close: bool) -> tuple[socket.socket, str]:
    """A server in a thread (it runs while the test's event loop is blocked): answers each
    request with `answer`, then closes the connection if `then_close`."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                conn.sendall(answer)
                if not then_close:
                    conn.recv(65536)

    threading.Thread(target=serve, daemon=True).start()
    return listener, f"http://127.0.0.1:{listener.getsockname()[1]}/"


async def test_a_connection_closed_while_the_loop_was_busy_is_not_handed_out() -> None:
    # The server's close arrives while the loop does other work: the connection looks
    # idle and open to the loop, but its socket says otherwise.
    listener, url = threaded_server(response(b"ok"), then_close=True)
    transport = Http11Transport()
    try:
        assert await transport.post(url, b"{}", {}) == (200, b"ok")
        time.sleep(0.1)  # noqa: ASYNC251 - blocks the loop on purpose: it must not see the close
        assert await transport.post(url, b"{}", {}) == (200, b"ok")
    finally:
        listener.close()
        await transport.aclose()


async def test_a_stream_paused_for_a_slow_reader_and_left_complete_is_reused() -> None:
    chunks = b"".join(b"1\r\nx\r\n" for _ in range(100))

    async def many_chunks(head: bytes, body: bytes, writer: Writer) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(chunks + b"0\r\n\r\n")

    async with (
        serving(many_chunks) as (server, transport),
        httpx.AsyncClient(transport=transport) as client,
    ):
        async with client.stream("POST", server.url, content=b"{}") as answer:
            assert await anext(answer.aiter_bytes()) == b"x"
            await asyncio.sleep(0.1)  # the rest arrives and is queued; reading pauses
        assert sum(len(idle) for idle in transport._idle.values()) == 1
        status, body = await asyncio.wait_for(transport.post(server.url, b"{}", {}), 5)
        assert (status, body) == (200, b"x" * 100)
        assert server.connections == 1


async def test_informational_answers_are_skipped() -> None:
    async def continue_first(head: bytes, body: bytes, writer: Writer) -> None:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.05)  # apart: the interim answer is read on its own
        writer.write(response(b"final"))

    async with serving(continue_first) as (server, transport):
        assert await transport.post(server.url, b"{}", {}) == (200, b"final")
        assert await transport.post(server.url, b"{}", {}) == (200, b"final")
        assert server.connections == 1


async def test_head_requests_go_to_httpx_own_transport() -> None:
    async def head(head: bytes, body: bytes, writer: Writer) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")  # no body: HEAD

    async with (
        serving(head) as (server, transport),
        httpx.AsyncClient(transport=transport, timeout=5) as client,
    ):
        answer = await client.head(server.url)
        assert (answer.status_code, answer.content) == (200, b"")


async def test_a_reset_cutting_a_body_without_length_is_an_error() -> None:
    async def reset(head: bytes, body: bytes, writer: Writer) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\npart of it")
        await writer.drain()
        await asyncio.sleep(0.05)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # RST: only a clean close may end such a body

    async with serving(reset) as (server, transport):
        with pytest.raises(httpx.RemoteProtocolError):
            await transport.post(server.url, b"{}", {})


async def test_header_values_with_line_breaks_are_refused() -> None:
    async with serving(echo_json) as (server, transport):
        with pytest.raises(httpx.LocalProtocolError):
            await transport.post(server.url, b"{}", {"X-API-Key": "key\r\nX-Evil: 1"})
        assert server.requests == 0
