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
    │   ├── HandoffProcessingError    -32102  that handoff is still being created: retry
    │   └── IdempotencyConflictError  -32103  one key, two different envelopes
    ├── RemoteError                   another agent answered with a JSON-RPC error
    ├── UnavailableError (ConnectionError)  another agent could not be reached
    ├── CircuitOpenError (ConnectionError)  its breaker is open: the call was not made
    ├── GateRefused                   the capability gate or a contract refused a handoff
    ├── IncompleteEscalationError (ValueError)  an escalation missing what it must say
    ├── ContractError (ValueError)    a handoff contract that cannot be loaded or used
    ├── TrustError                    a key, a signature or the trust list refused something
    │   └── SignatureError (ValueError)  a signature that does not verify (or cannot be made)
    ├── IllegalTransitionError        a move the state machine forbids
    ├── ConflictError                 a check-and-set lost against a concurrent write
    └── StoreError                    a backend failed or was misconfigured

`RpcError.code` is the table mapping errors to JSON-RPC codes: one class attribute each.
"""

from __future__ import annotations

from typing import Any, ClassVar


class HandoffError(Exception):
    """Root of every error raised by a2a_handoff."""


class RpcError(HandoffError):
    """An error that is answered to the caller as a JSON-RPC error object."""

    code: ClassVar[int] = -32603
    default_message: ClassVar[str] = "Internal error"

    def __init__(self, message: str | None = None, *, data: Any = None) -> None:
        self.message = message or self.default_message
        self.data = data
        super().__init__(self.message)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-RPC `error` member."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(RpcError):
    code = -32700
    default_message = "Parse error: the body is not valid JSON"


class InvalidRequestError(RpcError):
    code = -32600
    default_message = "Invalid request: not a JSON-RPC 2.0 request"


class MethodNotFoundError(RpcError):
    code = -32601
    default_message = "Method not found"


class InvalidParamsError(RpcError):
    code = -32602
    default_message = "Invalid params"


class InternalError(RpcError):
    code = -32603
    default_message = "Internal error"


class TaskNotFoundError(RpcError):
    code = -32001
    default_message = "Task not found"


class TaskNotCancelableError(RpcError):
    code = -32002
    default_message = "Task cannot be canceled"


class PushNotificationNotSupportedError(RpcError):
    code = -32003
    default_message = "Push notifications are not supported"


class UnsupportedOperationError(RpcError):
    code = -32004
    default_message = "This operation is not supported"


class ContentTypeNotSupportedError(RpcError):
    code = -32005
    default_message = "Content type not supported"


class InvalidAgentResponseError(RpcError):
    code = -32006
    default_message = "Invalid agent response"


class ExtendedCardNotConfiguredError(RpcError):
    code = -32007
    default_message = "Extended agent card is not configured"


class ExtensionSupportRequiredError(RpcError):
    code = -32008
    default_message = "A required extension was not activated"


class VersionNotSupportedError(RpcError):
    code = -32009
    default_message = "A2A protocol version not supported; send 'A2A-Version: 1.0'"


class PayloadTooLargeError(RpcError):
    code = -32100
    default_message = "Request body too large"


class AuthenticationError(RpcError):
    code = -32101
    default_message = "Authentication required: missing or invalid credentials"


class HandoffProcessingError(RpcError):
    code = -32102
    default_message = "processing: this handoff is still being created; retry shortly"


class IdempotencyConflictError(RpcError):
    code = -32103
    default_message = "this idempotency key was used with a different envelope"


class IllegalTransitionError(HandoffError):
    """A task state change the transition table forbids."""


class ConflictError(HandoffError):
    """A check-and-set write found the record changed by someone else."""


class StoreError(HandoffError):
    """A store backend failed or was configured wrongly."""


class RemoteError(HandoffError):
    """The target answered with a JSON-RPC error; `code` and `message` are the target's."""

    def __init__(self, code: int, message: str, data: Any = None, *, url: str = "") -> None:
        self.code = code
        self.message = message
        self.data = data
        self.url = url
        super().__init__(f"{url or 'agent'} answered {code}: {message}")


class UnavailableError(HandoffError, ConnectionError):
    """The target could not be reached, or answered with an HTTP error, after every retry."""


class CircuitOpenError(HandoffError, ConnectionError):
    """The breaker for this endpoint is open: the call was not attempted."""


class GateRefused(HandoffError):
    """The capability gate, a contract, or the envelope's own limits refused the handoff."""


class IncompleteEscalationError(HandoffError, ValueError):
    """An escalation without what happened, what was tried, or what is needed."""


class ContractError(HandoffError, ValueError):
    """A contract file that cannot be read as a contract."""


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
