"""The MCP tool client's rules that need no server: only configured names are called; a
server nobody listens on fails a call at once (an unkeyed one tried once, a keyed one
`attempts` times), and its breaker then opens, failing calls without trying."""

from __future__ import annotations

import pytest

from a2a_handoff.client.mcp_tools import McpTools
from a2a_handoff.errors import ToolCallError
from tests.support import free_port

pytestmark = pytest.mark.anyio


async def test_only_a_configured_name_is_called() -> None:
    tools = McpTools({"calc": f"http://127.0.0.1:{free_port()}/mcp"})
    with pytest.raises(ToolCallError) as caught:
        await tools.call("http://127.0.0.1:1/mcp", "add", {"a": 1})
    assert caught.value.kind == "unknown_server"
    assert "(configured: calc)" in str(caught.value)
    assert tools.snapshot()["calc"]["consecutiveFailures"] == 0  # nothing was tried
    await tools.aclose()


async def test_a_dead_server_fails_at_once_then_its_breaker_opens() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    tools = McpTools({"calc": url}, attempts=3, breaker_threshold=4, breaker_cooldown=60)
    with pytest.raises(ToolCallError) as once:
        await tools.call("calc", "add")
    assert once.value.kind == "unreachable"
    assert str(once.value) == f"MCP server calc ({url}): add failed: connection refused"
    with pytest.raises(ToolCallError) as keyed:
        await tools.call("calc", "add", idempotency_key="k")
    assert str(keyed.value).endswith("connection refused (3 attempts)")
    assert tools.snapshot()["calc"] == {"url": url, "state": "open", "consecutiveFailures": 4}
    with pytest.raises(ToolCallError) as fast:
        await tools.call("calc", "add", idempotency_key="k")
    assert fast.value.kind == "circuit_open"
    await tools.aclose()
