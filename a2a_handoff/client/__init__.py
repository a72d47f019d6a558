"""Calling other agents: the client, its HTTP/1.1 transport, retries, breakers and replicas.

`grpc_transport` (calls to an agent whose card offers gRPC alone) is not imported here: it
needs the `grpc` extra, and the client imports it when a card asks for it."""

from a2a_handoff.client.breaker import BreakerState, CircuitBreaker
from a2a_handoff.client.client import CARD_PATH, AgentClient
from a2a_handoff.client.oauth import ClientCredentials, OAuth2Tokens, TokenSource, read_credential
from a2a_handoff.client.reasons import reason
from a2a_handoff.client.replicas import replicas
from a2a_handoff.client.retry import RetryPolicy
from a2a_handoff.client.transport import Http11Transport

__all__ = [
    "CARD_PATH",
    "AgentClient",
    "BreakerState",
    "CircuitBreaker",
    "ClientCredentials",
    "Http11Transport",
    "OAuth2Tokens",
    "RetryPolicy",
    "TokenSource",
    "read_credential",
    "reason",
    "replicas",
]
