"""JSON-RPC 2.0 envelopes as models: a request, an error, a response (exactly one of result
or error). The server frames its answers itself (`server._jsonrpc`); these read and check
envelopes where a whole one is at hand (clients, tests)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["JsonRpcError", "JsonRpcRequest", "JsonRpcResponse"]


class JsonRpcRequest(BaseModel):
    """A JSON-RPC 2.0 request; `params` is validated per method elsewhere."""

    model_config = ConfigDict(extra="forbid")

    jsonrpc: Literal["2.0"]
    method: str = Field(min_length=1)
    id: str | int | None = None
    params: dict[str, Any] | None = None


class JsonRpcError(BaseModel):
    code: int
    message: str
    data: Any = None


class JsonRpcResponse(BaseModel):
    jsonrpc: Literal["2.0"] = "2.0"
    id: str | int | None
    result: Any = None
    error: JsonRpcError | None = None

    @model_validator(mode="after")
    def _result_or_error(self) -> JsonRpcResponse:
        if (self.error is None) == ("result" not in self.model_fields_set):
            raise ValueError("a JSON-RPC response holds exactly one of result or error")
        return self
