"""The A2A gRPC binding, a face over the agent's service: `serve_grpc`, and the card entry.

`proto` builds the messages from the specification's `a2a.proto` (kept here with its
licence, and compiled by `scripts/protos` into `a2a.binpb`), `codec` turns them into the
service's typed requests and its domain results into them, and `face` is the gRPC server.
Importing this package imports none of them, nor grpcio: an agent without the gRPC face
loads nothing of gRPC.
"""

from __future__ import annotations

from a2a_handoff.errors import ConfigError
from a2a_handoff.protocol.agent_card import AgentCard, AgentInterface
from a2a_handoff.server.app_config import GrpcConfig
from a2a_handoff.server.service import AgentService

BINDING = "GRPC"


def with_grpc_interface(card: AgentCard, config: GrpcConfig) -> AgentCard:
    """`card` listing the gRPC interface last (JSON-RPC stays the preferred one), in the
    tenant its first interface names; a card that lists one already is kept as it is."""
    if any(i.protocol_binding == BINDING for i in card.supported_interfaces):
        return card
    first = card.supported_interfaces[0] if card.supported_interfaces else None
    tenant = first.tenant if first is not None else None
    interface = AgentInterface(url=config.address, protocol_binding=BINDING, tenant=tenant)
    return card.model_copy(update={"supported_interfaces": [*card.supported_interfaces, interface]})


def serve_grpc(service: AgentService, config: GrpcConfig) -> None:
    """Serve `service` over gRPC too, on `config`'s port, while the service serves (call it
    before entering the service; `create_app(grpc=…)` does). Its card should list the
    interface (`with_grpc_interface`). Needs the `grpc` extra (ConfigError without it)."""
    try:
        from a2a_handoff.server._grpc.face import GrpcFace
    except ImportError as exc:  # the extra is missing: said before anything is served
        raise ConfigError(
            "the gRPC face needs grpcio and protobuf: pip install '.[grpc]' in the"
            " a2a-handoff clone"
        ) from exc

    service.while_serving(GrpcFace(service, config).running)
