"""The server defends itself: slow, silent, greedy and non-reading clients against a real
uvicorn process (raw sockets on 127.0.0.1), while a normal request is still answered."""

from __future__ import annotations

import contextlib
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.integration.handoff_support import message, result
from tests.support import AgentProcess

CAP = 40
LIMITS = (
    "--header-timeout",
    "1",
    "--body-timeout",
    "1",
    "--write-timeout",
    "1",
    "--keep-alive",
    "1",
    "--max-connections",
    str(CAP),
    "--max-streams",
    "3",
)


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    """One echo agent with short limits, shared by the module's tests (each leaves it idle)."""
    tmp = tmp_path_factory.mktemp("limits")
    agent = AgentProcess("echo", f"sqlite:///{tmp / 'echo.db'}", extra=LIMITS)
    agent.log_path = tmp / "echo.log"
    agent.start()
    try:
        yield agent
    finally:
        agent.stop()
        log = Path(agent.log_path).read_text()
        assert "Traceback" not in log, log[-3000:]


def connect(agent: AgentProcess, first: bytes = b"", rcvbuf: int = 0) -> socket.socket:
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(("127.0.0.1", agent.port))
    if first:
        sock.sendall(first)
    return sock


def answer_of(sock: socket.socket, wait: float = 5.0) -> bytes:
    """What the server sends until it closes (b"" for a plain close), within `wait` s."""
    sock.settimeout(wait)
    data = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            data += chunk
    return data


def normal_request(agent: AgentProcess) -> None:
    with httpx.Client(timeout=5) as http:  # a fresh connection: no slot held afterwards
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message("hi")}
        reply = http.post(agent.url, json=body, headers={"A2A-Version": "1.0"}).json()
    assert result(reply)["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def server_sockets(agent: AgentProcess) -> dict[int, int]:
    """The server's TCP connections on its port: client port → bytes queued to send (the
    kernel's send queue, from /proc/net/tcp)."""
    queued: dict[int, int] = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state, queues = fields[1], fields[2], fields[3], fields[4]
        if int(local.split(":")[1], 16) == agent.port and state == "01":  # ESTABLISHED
            queued[int(remote.split(":")[1], 16)] = int(queues.split(":")[0], 16)
    return queued


def test_slow_and_silent_clients_are_closed_and_others_still_served(agent: AgentProcess) -> None:
    head = (
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nA2A-Version: 1.0\r\n"
        b"Content-Type: application/json\r\n"
    )
    silent = [connect(agent) for _ in range(8)]
    half_heads = [connect(agent, head) for _ in range(8)]
    half_bodies = [
        connect(agent, head + b"Content-Length: 100\r\n\r\n" + b'{"jsonrpc"') for _ in range(8)
    ]
    normal_request(agent)  # answered while they hang
    started = time.monotonic()
    for sock in silent:
        assert answer_of(sock) == b""  # never said anything: just closed
    for sock in half_heads + half_bodies:
        assert answer_of(sock).startswith(b"HTTP/1.1 408 ")
    assert time.monotonic() - started < 4.0  # the 1 s timeouts, not the 5 s answer_of wait
    # A head sent after a first request on the same connection has the same limit.
    again = connect(agent)
    again.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    again.settimeout(5)
    assert again.recv(65536).startswith(b"HTTP/1.1 200 ")
    again.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    assert b"HTTP/1.1 408 " in answer_of(again)
    for sock in [*silent, *half_heads, *half_bodies, again]:
        sock.close()
    assert len(server_sockets(agent)) <= 1  # at most the support client's keep-alive
    normal_request(agent)


def test_a_request_head_over_64_kib_is_refused_with_431(agent: AgentProcess) -> None:
    sock = connect(agent, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
    with contextlib.suppress(ConnectionResetError, BrokenPipeError):
        for _ in range(80):
            sock.sendall(b"x" * 1024)
    assert answer_of(sock).startswith(b"HTTP/1.1 431 ")
    sock.close()
    normal_request(agent)


def test_connections_over_the_cap_are_refused_at_once_with_503(agent: AgentProcess) -> None:
    held = [connect(agent) for _ in range(CAP + 10)]
    try:
        refused = []
        for sock in held:
            sock.settimeout(0.5)
            with contextlib.suppress(TimeoutError):
                data = sock.recv(65536)
                if data.startswith(b"HTTP/1.1 503 "):
                    assert b"retry-after: 1" in data.lower()
                    refused.append(sock)
        # The cap counts every connection: the support client's too, and one an earlier test
        # closed that the server has not seen go yet. The ones refused are the last to come.
        assert 9 <= len(refused) <= 12
        assert refused == held[-len(refused) :]
        # The slots free once the silent ones hit the header timeout: served again.
        time.sleep(1.5)
        normal_request(agent)
    finally:
        for sock in held:
            sock.close()


def test_clients_that_never_read_are_dropped_with_their_queued_answers(
    agent: AgentProcess,
) -> None:
    big = "x" * 800_000
    task = result(agent.rpc("SendMessage", message(big)))["task"]  # ~1.6 MB: text + artifact
    request = (
        b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"'
        + task["id"].encode()
        + b'"}}'
    )
    head = (
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nA2A-Version: 1.0\r\n"
        b"Content-Type: application/json\r\nContent-Length: "
        + str(len(request)).encode()
        + b"\r\n\r\n"
    )
    server = psutil.Process(agent.proc.pid if agent.proc else 0)
    before = server.memory_info().rss
    readers = [connect(agent, head + request, rcvbuf=4096) for _ in range(30)]
    ports = {sock.getsockname()[1] for sock in readers}
    peak_rss, peak_queued = before, 0
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        normal_request(agent)  # still answered
        mine = {p: q for p, q in server_sockets(agent).items() if p in ports}
        peak_rss = max(peak_rss, server.memory_info().rss)
        peak_queued = max(peak_queued, sum(mine.values()))
        if not mine:
            break
        time.sleep(0.2)
    assert not mine, f"{len(mine)} non-reading connection(s) still held"
    # Bounded: never more than ~0.5 MiB queued in the kernel per connection (unbounded, the
    # whole answers would sit there: 30 x 1.6 MB), and the process did not keep them either.
    assert peak_queued < 30 * 600_000
    assert peak_rss - before < 80 * 2**20
    for sock in readers:
        with contextlib.suppress(OSError):
            answer_of(sock, 1)  # reset, after at most part of the answer
        sock.close()


def test_streams_over_the_cap_are_refused_before_anything_is_done(agent: AgentProcess) -> None:
    with httpx.Client(timeout=10) as http:
        streams = []
        try:
            for _ in range(3):
                body = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendStreamingMessage",
                    "params": message("sleep:3"),
                }
                stream = http.stream("POST", agent.url, json=body, headers={"A2A-Version": "1.0"})
                response = stream.__enter__()
                assert response.status_code == 200
                streams.append(stream)
            context = f"ctx-{uuid.uuid4()}"
            body = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "SendStreamingMessage",
                "params": message("sleep:3", context),
            }
            refused = http.post(agent.url, json=body, headers={"A2A-Version": "1.0"})
            assert refused.status_code == 503
            assert refused.json()["error"]["code"] == -32106
            assert refused.headers["retry-after"] == "1"
            listed = agent.rpc("ListTasks", {"contextId": context})
            assert result(listed)["tasks"] == []  # refused before the task was created
        finally:
            for stream in streams:
                stream.__exit__(None, None, None)
        time.sleep(0.3)  # the closed streams give their slots back
        body = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "SendStreamingMessage",
            "params": message("hello"),
        }
        with http.stream("POST", agent.url, json=body, headers={"A2A-Version": "1.0"}) as again:
            assert again.status_code == 200
            assert b"TASK_STATE_COMPLETED" in again.read()


def data_segments_in(sock: socket.socket) -> int:
    """Segments carrying data this socket has received (Linux TCP_INFO `tcpi_data_segs_in`)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    return int(struct.unpack_from("I", info, 152)[0])


def test_an_answer_comes_in_one_segment(agent: AgentProcess) -> None:
    """The status line, headers and JSON body of an answer are one write, not two."""
    body = (
        b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"'
        + str(uuid.uuid4()).encode()
        + b'","role":"ROLE_USER","parts":[{"text":"one"}]}}}'
    )
    sock = connect(agent)
    try:
        sock.sendall(
            b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nA2A-Version: 1.0\r\n"
            b"Content-Type: application/json\r\nConnection: close\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        answer = answer_of(sock)
        assert answer.startswith(b"HTTP/1.1 200 ")
        assert b"TASK_STATE_COMPLETED" in answer
        assert data_segments_in(sock) == 1, answer[:300]
    finally:
        sock.close()
