"""The gRPC transport's answers: a status read back as the answer the JSON-RPC face gives
the same error, a handed-off task shown TRANSFERRED to an extension client, and which cards
send calls over gRPC."""

from __future__ import annotations

import json
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest

from a2a_handoff.client.client import AgentClient, dialable, grpc_address
from a2a_handoff.client.grpc_transport import _rendered, answer_of
from a2a_handoff.errors import (
    AuthenticationError,
    HandoffProcessingError,
    InternalError,
    InvalidParamsError,
    RpcError,
    StoreUnavailableError,
    TaskNotCancelableError,
    TaskNotFoundError,
    TooManyStreamsError,
    UnavailableError,
)
from a2a_handoff.protocol.agent_card import AgentInterface, build_card
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.server._grpc import codec
from a2a_handoff.server._jsonrpc import error_response

ERRORS = [
    TaskNotFoundError("task t not found", metadata={"taskId": "t"}),
    TaskNotCancelableError("task t is completed"),
    HandoffProcessingError(),
    StoreUnavailableError(),
    TooManyStreamsError(),
    AuthenticationError(),
    InvalidParamsError("message.parts: Field required"),
    InternalError(),
]


def failed(code: grpc.StatusCode, details: str, *trailers: tuple[str, Any]) -> Any:
    return grpc.aio.AioRpcError(
        code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailers), details=details
    )


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_a_status_the_face_sends_reads_as_the_json_rpc_face_answers(error: RpcError) -> None:
    code, message, trailers = codec.status_of(error)  # the server's gRPC face
    status, body = answer_of(failed(code, message, *trailers))
    over_http = error_response(1, error)  # the server's JSON-RPC face
    assert status == over_http.status_code
    assert json.loads(body)["error"] == json.loads(bytes(over_http.body))["error"]


def test_a_broken_connection_and_a_deadline_are_transport_errors() -> None:
    with pytest.raises(httpx.ReadError):
        answer_of(failed(grpc.StatusCode.UNAVAILABLE, "Socket closed"))
    with pytest.raises(httpx.ReadError):
        answer_of(failed(grpc.StatusCode.CANCELLED, "Cancelled"))
    with pytest.raises(httpx.ReadTimeout):
        answer_of(failed(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"))


def test_a_status_without_details_is_named_by_its_code() -> None:
    status, body = answer_of(failed(grpc.StatusCode.UNIMPLEMENTED, "Method not found!"))
    assert (status, json.loads(body)["error"]["code"]) == (200, -32601)
    status, body = answer_of(failed(grpc.StatusCode.RESOURCE_EXHAUSTED, "too large"))
    assert (status, json.loads(body)["error"]["code"]) == (413, -32100)
    status, body = answer_of(failed(grpc.StatusCode.PERMISSION_DENIED, "no"))
    assert (status, json.loads(body)["error"]) == (200, {"code": -32603, "message": "no"})


def test_an_error_info_of_another_domain_is_kept_as_the_data() -> None:
    class Theirs(InvalidParamsError):  # another library's reason, under the same code
        reason = "QUOTA_TOO_SMALL"
        domain = "example.com"

    code, message, trailers = codec.status_of(Theirs("quota"))
    status, body = answer_of(failed(code, message, *trailers))
    error = json.loads(body)["error"]
    assert (status, error["code"], error["message"]) == (200, -32602, "quota")
    assert error["data"][0]["reason"] == "QUOTA_TOO_SMALL"
    assert error["data"][0]["domain"] == "example.com"


def handed_off(state: str) -> dict[str, Any]:
    pointer = {"state": "TRANSFERRED", "transfer": {"agentName": "billing", "taskId": "s"}}
    return {"id": "t", "contextId": "c", "status": {"state": state}, "metadata": {URI: pointer}}


def test_a_handed_off_task_is_transferred_only_for_an_extension_client() -> None:
    assert _rendered({"task": handed_off("TASK_STATE_COMPLETED")}, True)["task"]["status"] == {
        "state": "TASK_STATE_TRANSFERRED"
    }
    assert _rendered({"tasks": [handed_off("TASK_STATE_COMPLETED")]}, True)["tasks"][0][
        "status"
    ] == {"state": "TASK_STATE_TRANSFERRED"}
    plain = _rendered(handed_off("TASK_STATE_COMPLETED"), False)
    assert plain["status"] == {"state": "TASK_STATE_COMPLETED"}
    failed_task = _rendered(handed_off("TASK_STATE_FAILED"), True)  # the pointer, not the state
    assert failed_task["status"] == {"state": "TASK_STATE_FAILED"}


def test_calls_go_over_grpc_only_when_the_card_offers_no_json_rpc() -> None:
    card = build_card("billing", "http://127.0.0.1:8102/")
    grpc_interface = AgentInterface(url="127.0.0.1:50051", protocol_binding="GRPC")

    def offering(*interfaces: AgentInterface) -> Any:
        return card.model_copy(update={"supported_interfaces": list(interfaces)})

    assert grpc_address(card) is None  # JSON-RPC (and HTTP+JSON)
    assert grpc_address(offering(*card.supported_interfaces, grpc_interface)) is None
    assert grpc_address(offering(grpc_interface)) == "127.0.0.1:50051"
    assert dialable("127.0.0.1:50051")
    assert dialable("[::1]:50051")
    assert dialable("billing.example.com:443")
    assert not dialable("grpc://[::1]:50051")  # the card names a bare host:port


@pytest.mark.parametrize(
    "address",
    [
        "unix:///var/run/docker.sock",
        "unix-abstract:agent",
        "dns:///10.0.0.5:6379",
        "127.0.0.1",  # no port
        "127.0.0.1:0",
        "127.0.0.1:99999",
        "user@127.0.0.1:50051",
        "127.0.0.1:50051,127.0.0.2:50051",
        "127.0.0.1:50051/path",
        "",
    ],
)
@pytest.mark.anyio
async def test_a_card_naming_no_host_and_port_for_grpc_is_never_dialed(address: str) -> None:
    card = build_card("billing", "http://127.0.0.1:8102/").model_copy(
        update={"supported_interfaces": [AgentInterface(url=address, protocol_binding="GRPC")]}
    )
    body = card.dump_json().encode()

    def serve(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/.well-known/agent-card.json"  # nothing else is asked
        return httpx.Response(200, content=body)

    url = "http://127.0.0.1:8102/"
    client = AgentClient(httpx.AsyncClient(transport=httpx.MockTransport(serve)))
    try:
        await client.card(url)
        with pytest.raises(UnavailableError) as refused:
            await client.call(url, "GetTask", {"id": "t"}, idempotent=True)
        assert "host:port" in str(refused.value)
        assert client.grpc is None  # no transport made, nothing dialed
    finally:
        await client.aclose()
