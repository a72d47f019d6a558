"""Why an agent could not be reached, in a person's words (issue 17): real sockets where the
machine allows (a refused connection on 127.0.0.1), httpx's own exception chains otherwise."""

from __future__ import annotations

import socket

import httpx
import pytest

from a2a_handoff import AgentClient, RetryPolicy
from a2a_handoff.client.reasons import reason
from a2a_handoff.errors import CircuitOpenError, UnavailableError
from tests.support import free_port

pytestmark = pytest.mark.anyio


async def test_a_refused_connection_reads_connection_refused() -> None:
    url = f"http://127.0.0.1:{free_port()}/"
    client = AgentClient(
        httpx.AsyncClient(), retry=RetryPolicy(attempts=2, wait=False), breaker_threshold=2
    )
    try:
        with pytest.raises(UnavailableError) as first:
            await client.get_task(url, "t")
        assert str(first.value) == f"cannot reach {url} (connection refused)"
        # Now the breaker is why the call is not made, and only now it says so.
        with pytest.raises(CircuitOpenError) as second:
            await client.get_task(url, "t")
        assert f"not calling {url.rstrip('/')}:" in str(second.value)
        assert "failed 2 times in a row (last: connection refused)" in str(second.value)
    finally:
        await client.aclose()


def test_a_name_that_does_not_resolve_reads_host_name_not_found() -> None:
    # httpx raises ConnectError from the resolver's gaierror (seen on this machine's resolver;
    # the tests call no other host than 127.0.0.1, so the chain is built as httpx builds it).
    error = httpx.ConnectError("[Errno -2] Name or service not known")
    error.__cause__ = socket.gaierror(-2, "Name or service not known")
    assert reason(error) == "host name not found"


def test_timeouts_and_broken_answers_read_as_such() -> None:
    assert reason(httpx.ConnectTimeout("")) == "connection timed out"
    assert reason(httpx.ReadTimeout("")) == "no answer in time"
    assert reason(httpx.RemoteProtocolError("x")) == "the connection closed before the answer"
    assert reason(httpx.ReadError("")) == "the connection broke mid-answer"
