"""Every error the library raises, under one root.

    HandoffError
    ├── RpcError                      an error with a JSON-RPC code, sent to the caller
    │   ├── ParseError                -32700  the body is not JSON
    │   ├── InvalidRequestError       -32600  JSON, but not a JSON-RPC request
    │   ├── MethodNotFoundError       -32601
    │   ├── InvalidParamsError        -32602  names the offending field
    │   ├── InternalError             -32603  never carries a traceback
    │   ├── TaskNotFoundError         -32001  also: a task owned by someone else
    │   ├── TaskNotCancelableError    -32002
    │   ├── PushNotificationNotSupportedError -32003
    │   ├── UnsupportedOperationError -32004  e.g. a message to a terminal task
    │   ├── ContentTypeNotSupportedError -32005
    │   ├── InvalidAgentResponseError -32006
    │   ├── ExtendedCardNotConfiguredError -32007
    │   ├── ExtensionSupportRequiredError -32008
    │   ├── VersionNotSupportedError  -32009
    │   ├── PayloadTooLargeError      -32100  (ours: -32100 and below)
    │   ├── AuthenticationError       -32101  sent with HTTP 401
    │   │   └── IssuerUnavailableError -32101  a token's issuer not answering yet (HTTP 503)
    │   ├── HandoffProcessingError    -32102  that handoff is still being created: retry
    │   ├── IdempotencyConflictError  -32103  one key, two different envelopes
    │   ├── TaskBusyError             -32104  another message to the task is being processed
    │   ├── StoreUnavailableError     -32105  the store cannot be reached or written (HTTP 503)
    │   ├── TooManyStreamsError       -32106  the open-stream cap is reached (HTTP 503)
    │   ├── ForeignRequestError       -32107  a Host or Origin not the agent's (HTTP 403)
    │   └── DrainingError             -32108  shutting down: send it elsewhere (HTTP 503)
    ├── RemoteError                   another agent answered with a JSON-RPC error
    ├── UnavailableError (ConnectionError)  another agent could not be reached
    │   └── TokenError                no OAuth2 token to present: the call was not made
    ├── CircuitOpenError (ConnectionError)  its breaker is open: the call was not made
    ├── GateRefused                   the capability gate or a contract refused a handoff
    ├── ModelError                    a language model's endpoint failed or answered nonsense
    ├── ToolCallError                 an MCP tool call failed, or the tool answered isError
    ├── IncompleteEscalationError (ValueError)  an escalation missing what it must say
    ├── ContractError (ValueError)    a handoff contract that cannot be loaded or used
    ├── AgentUrlError (ValueError)    an agent URL given in the configuration cannot be called
    ├── ConfigError (ValueError)      a setting given to `create_app` is out of range
    ├── TrustError                    a key, a signature or the trust list refused something
    │   └── SignatureError (ValueError)  a signature that does not verify (or cannot be made)
    ├── IllegalTransitionError        a move the state machine forbids
    ├── ConflictError                 a check-and-set lost against a concurrent write
    └── StoreError                    a backend failed or was misconfigured
        ├── StoreDownError (ConnectionError)  the backend cannot be reached: may come back
        ├── StoreTimeoutError (InternalError)  one call past its time limit: it alone fails
        └── StoreVersionError         the store's schema is behind this code, or ahead of it

`RpcError` subclasses are the table mapping errors to the wire, one class attribute each:
`code` (JSON-RPC), `http_status` and `status` (the HTTP+JSON binding's status and its
`google.rpc.Code` name, spec §5.4), and `reason` (the `google.rpc.ErrorInfo` reason, spec §9.5:
every A2A error -32001…-32009 carries one in `error.data`, domain `a2a-protocol.org`; ours carry
one in the domain `a2a-handoff`; the standard JSON-RPC errors carry none).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

A2A_ERROR_DOMAIN = "a2a-protocol.org"
OUR_ERROR_DOMAIN = "a2a-handoff"
ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"


class HandoffError(Exception):
    """Root of every error raised by a2a_handoff."""


class RpcError(HandoffError):
    """An error that is answered to the caller as a JSON-RPC error object (or, over
    HTTP+JSON, as an AIP-193 error with `http_status`)."""

    code: ClassVar[int] = -32603
    default_message: ClassVar[str] = "Internal error"
    http_status: ClassVar[int] = 500
    status: ClassVar[str] = "INTERNAL"
    reason: ClassVar[str] = ""  # the ErrorInfo reason; "" for the standard JSON-RPC errors
    domain: ClassVar[str] = A2A_ERROR_DOMAIN

    def __init__(
        self,
        message: str | None = None,
        *,
        data: Any = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        self.message = message or self.default_message
        self.data = data
        self.metadata = dict(metadata) if metadata else None
        super().__init__(self.message)

    def error_info(self) -> dict[str, Any] | None:
        """The `google.rpc.ErrorInfo` (ProtoJSON `Any`) naming this error, if it has one."""
        if not self.reason:
            return None
        info: dict[str, Any] = {"@type": ERROR_INFO_TYPE, "reason": self.reason}
        info["domain"] = self.domain
        if self.metadata:
            info["metadata"] = self.metadata
        return info

    def to_dict(self) -> dict[str, Any]:
        """The JSON-RPC `error` member: `data` is [ErrorInfo, data?] when there is a reason."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        info = self.error_info()
        if info is not None:
            error["data"] = [info] if self.data is None else [info, self.data]
        elif self.data is not None:
            error["data"] = self.data
        return error

    def to_status(self) -> dict[str, Any]:
        """The HTTP+JSON error body (AIP-193 `google.rpc.Status`, spec §11.6)."""
        info = self.error_info()
        error: dict[str, Any] = {
            "code": self.http_status,
            "status": self.status,
            "message": self.message,
        }
        if info is not None:
            error["details"] = [info]
        return {"error": error}


class ParseError(RpcError):
    code = -32700
    default_message = "Parse error: the body is not valid JSON"
    http_status = 400
    status = "INVALID_ARGUMENT"


class InvalidRequestError(RpcError):
    code = -32600
    default_message = "Invalid request: not a JSON-RPC 2.0 request"
    http_status = 400
    status = "INVALID_ARGUMENT"


class MethodNotFoundError(RpcError):
    code = -32601
    default_message = "Method not found"
    http_status = 404
    status = "NOT_FOUND"


class InvalidParamsError(RpcError):
    code = -32602
    default_message = "Invalid params"
    http_status = 400
    status = "INVALID_ARGUMENT"


class InternalError(RpcError):
    code = -32603
    default_message = "Internal error"
    http_status = 500


class TaskNotFoundError(RpcError):
    code = -32001
    default_message = "Task not found"
    http_status = 404
    status = "NOT_FOUND"
    reason = "TASK_NOT_FOUND"


class TaskNotCancelableError(RpcError):
    code = -32002
    default_message = "Task cannot be canceled"
    http_status = 409
    status = "FAILED_PRECONDITION"
    reason = "TASK_NOT_CANCELABLE"


class PushNotificationNotSupportedError(RpcError):
    code = -32003
    default_message = "Push notifications are not supported"
    http_status = 400
    status = "UNIMPLEMENTED"
    reason = "PUSH_NOTIFICATION_NOT_SUPPORTED"


class UnsupportedOperationError(RpcError):
    code = -32004
    default_message = "This operation is not supported"
    http_status = 400
    status = "UNIMPLEMENTED"
    reason = "UNSUPPORTED_OPERATION"


class ContentTypeNotSupportedError(RpcError):
    code = -32005
    default_message = "Content type not supported"
    http_status = 415
    status = "INVALID_ARGUMENT"
    reason = "CONTENT_TYPE_NOT_SUPPORTED"


class InvalidAgentResponseError(RpcError):
    code = -32006
    default_message = "Invalid agent response"
    http_status = 502
    reason = "INVALID_AGENT_RESPONSE"


class ExtendedCardNotConfiguredError(RpcError):
    code = -32007
    default_message = "Extended agent card is not configured"
    http_status = 400
    status = "FAILED_PRECONDITION"
    reason = "EXTENDED_AGENT_CARD_NOT_CONFIGURED"


class ExtensionSupportRequiredError(RpcError):
    code = -32008
    default_message = "A required extension was not activated"
    http_status = 400
    status = "FAILED_PRECONDITION"
    reason = "EXTENSION_SUPPORT_REQUIRED"


class VersionNotSupportedError(RpcError):
    code = -32009
    default_message = "A2A protocol version not supported; send 'A2A-Version: 1.0'"
    http_status = 400
    status = "UNIMPLEMENTED"
    reason = "VERSION_NOT_SUPPORTED"


class PayloadTooLargeError(RpcError):
    code = -32100
    default_message = "Request body too large"
    http_status = 413
    status = "INVALID_ARGUMENT"
    reason = "PAYLOAD_TOO_LARGE"
    domain = OUR_ERROR_DOMAIN


class AuthenticationError(RpcError):
    code = -32101
    default_message = "Authentication required: missing or invalid credentials"
    http_status = 401
    status = "UNAUTHENTICATED"
    reason = "UNAUTHENTICATED"
    domain = OUR_ERROR_DOMAIN


class IssuerUnavailableError(AuthenticationError):
    """A bearer token that cannot be checked yet: its issuer's keys have not been fetched
    (the issuer has not answered). The caller may retry; the agent asks the issuer again."""

    default_message = "the token issuer cannot be reached yet: the token cannot be checked; retry"
    http_status = 503
    status = "UNAVAILABLE"
    reason = "ISSUER_UNAVAILABLE"


class HandoffProcessingError(RpcError):
    code = -32102
    default_message = "processing: this handoff is still being created; retry shortly"
    http_status = 409
    status = "ABORTED"
    reason = "HANDOFF_PROCESSING"
    domain = OUR_ERROR_DOMAIN


class IdempotencyConflictError(RpcError):
    code = -32103
    default_message = "this idempotency key was used with a different envelope"
    http_status = 409
    status = "ALREADY_EXISTS"
    reason = "IDEMPOTENCY_CONFLICT"
    domain = OUR_ERROR_DOMAIN


class TaskBusyError(RpcError):
    code = -32104
    default_message = "the task is busy: another message to it is being processed; retry"
    http_status = 409
    status = "ABORTED"
    reason = "TASK_BUSY"
    domain = OUR_ERROR_DOMAIN


class StoreUnavailableError(RpcError):
    code = -32105
    default_message = "the agent's store is unavailable; retry shortly"
    http_status = 503
    status = "UNAVAILABLE"
    reason = "STORE_UNAVAILABLE"
    domain = OUR_ERROR_DOMAIN


class TooManyStreamsError(RpcError):
    code = -32106
    default_message = "too many open streams on this agent; retry shortly"
    http_status = 503
    status = "UNAVAILABLE"
    reason = "TOO_MANY_STREAMS"
    domain = OUR_ERROR_DOMAIN


class ForeignRequestError(RpcError):
    code = -32107
    default_message = "refused: the request's Host or Origin is not this agent's"
    http_status = 403
    status = "PERMISSION_DENIED"
    reason = "FOREIGN_REQUEST"
    domain = OUR_ERROR_DOMAIN


class DrainingError(RpcError):
    code = -32108
    default_message = (
        "this agent is shutting down and takes no new work: nothing was done with the message;"
        " send it again (another replica takes it)"
    )
    http_status = 503
    status = "UNAVAILABLE"
    reason = "DRAINING"
    domain = OUR_ERROR_DOMAIN


class IllegalTransitionError(HandoffError):
    """A task state change the transition table forbids."""


class ConflictError(HandoffError):
    """A check-and-set write found the record changed by someone else."""


class StoreError(HandoffError):
    """A store backend failed or was configured wrongly."""


class StoreDownError(StoreError, ConnectionError):
    """The backend did not answer (refused, timed out): a later call may succeed."""


class StoreTimeoutError(InternalError, StoreError):
    """A store call past its time limit: -32603 to its caller alone; the store is not down."""

    default_message = "the store query took too long"
    http_status = 504
    status = "DEADLINE_EXCEEDED"


class StoreVersionError(StoreError):
    """The store's schema (or key layout) is at a version this code cannot use: behind it
    (`python -m a2a_handoff db upgrade` brings it up) or ahead of it and not compatible."""


class RemoteError(HandoffError):
    """The target answered with a JSON-RPC error; `code` and `message` are the target's."""

    def __init__(self, code: int, message: str, data: Any = None, *, url: str = "") -> None:
        self.code = code
        self.message = message
        self.data = data
        self.url = url
        super().__init__(f"{url or 'agent'} answered {code}: {message}")


class UnavailableError(HandoffError, ConnectionError):
    """The target could not be reached, or answered with an HTTP error, after every retry.

    `may_have_arrived`: one of the attempts may have reached it (its connection was made),
    whatever the last one's error says."""

    may_have_arrived = False


class TokenError(UnavailableError):
    """No access token to present to the target (its token endpoint refused or could not be
    reached): the call was not made. `refused`: the endpoint answered no (a wrong secret, an
    unknown client or audience) — asking again at once would get the same answer."""

    def __init__(self, message: str, *, refused: bool) -> None:
        super().__init__(message)
        self.refused = refused


class CircuitOpenError(HandoffError, ConnectionError):
    """The breaker for this endpoint is open: the call was not attempted."""


class GateRefused(HandoffError):
    """The capability gate, a contract, or the envelope's own limits refused the handoff."""


class ModelError(HandoffError):
    """A language model's endpoint could not be reached, timed out, refused the call or
    answered something that is not a chat completion (`a2a_handoff.llm`)."""


class ToolCallError(HandoffError):
    """An MCP tool call (`ctx.tools.call`) gave no result; `kind` says why: `tool_error` (the
    tool answered `isError`, its text the message), `unreachable`, `timeout`, `refused` (the
    server answered with an error), `circuit_open`, `unknown_server` (none of that name is
    configured), `replayed` (the key was used for another call)."""

    def __init__(self, message: str, *, kind: str, server: str = "", tool: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.server = server
        self.tool = tool


class IncompleteEscalationError(HandoffError, ValueError):
    """An escalation without what happened, what was tried, or what is needed."""


class ContractError(HandoffError, ValueError):
    """A contract file that cannot be read as a contract."""


class AgentUrlError(HandoffError, ValueError):
    """An agent URL in the configuration (a route, a trusted agent, a card) that cannot be
    called: the message says which and what to write."""


class ConfigError(HandoffError, ValueError):
    """A setting given to `create_app` (`server.app_config`) that is out of range or of the wrong
    kind: the message names it and says what it takes."""


class TrustError(HandoffError):
    """A key, a signature or the trust list refused something (see `a2a_handoff.trust`)."""


class SignatureError(TrustError, ValueError):
    """A signature that does not verify, or a value that cannot be signed.

    `unknown_kid`: the key id the signature names, when no key known for the signer has it
    (the signer may have rotated: its keys are worth fetching again once).
    """

    def __init__(self, message: str, *, unknown_kid: str | None = None) -> None:
        super().__init__(message)
        self.unknown_kid = unknown_kid


def _every(cls: type[RpcError]) -> list[type[RpcError]]:
    found = [cls]
    for sub in cls.__subclasses__():
        found += _every(sub)
    return found


_BY_REASON = {(c.domain, c.reason): c for c in _every(RpcError) if c.reason}


def rpc_error_named(domain: str, reason: str) -> type[RpcError] | None:
    """The error class a `google.rpc.ErrorInfo` names by its domain and reason (a gRPC
    status's details, read back), or None for one this library does not know."""
    return _BY_REASON.get((domain, reason))
