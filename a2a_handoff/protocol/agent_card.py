"""The agent card: its wire models, and `build_card()` with the defaults this library serves.

A card says where the agent is served (`supportedInterfaces`), what it can do
(`capabilities`, with the handoff extension declaring the capabilities it offers to agents
handing tasks to it), its skills, and its security schemes when authentication is on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, model_validator

from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI
from a2a_handoff.protocol.models import WireModel, exactly_one
from a2a_handoff.protocol.urls import check_agent_url

__all__ = [
    "AgentCapabilities",
    "AgentCard",
    "AgentExtension",
    "AgentInterface",
    "AgentProvider",
    "AgentSkill",
    "ApiKeySecurityScheme",
    "HttpAuthSecurityScheme",
    "SecurityRequirement",
    "SecurityScheme",
    "StringList",
    "build_card",
    "handoff_extension",
    "named_tenant",
    "skill",
]


class AgentInterface(WireModel):
    url: str
    protocol_binding: str = "JSONRPC"
    protocol_version: str = "1.0"
    tenant: str | None = None


class AgentProvider(WireModel):
    organization: str
    url: str


class AgentExtension(WireModel):
    uri: str
    description: str | None = None
    required: bool | None = None
    params: dict[str, Any] | None = None


class AgentCapabilities(WireModel):
    streaming: bool | None = None
    push_notifications: bool | None = None
    extensions: list[AgentExtension] | None = None
    extended_agent_card: bool | None = None


_Strings = list[str]


class StringList(WireModel):
    list: _Strings = Field(default_factory=_Strings)


class SecurityRequirement(WireModel):
    schemes: dict[str, StringList]


class AgentSkill(WireModel):
    id: str
    name: str
    description: str
    tags: list[str] = Field(default_factory=list)
    examples: list[str] | None = None
    input_modes: list[str] | None = None
    output_modes: list[str] | None = None
    security_requirements: list[SecurityRequirement] | None = None


class ApiKeySecurityScheme(WireModel):
    location: Literal["header", "query", "cookie"] = "header"
    name: str = "X-API-Key"
    description: str | None = None


class HttpAuthSecurityScheme(WireModel):
    scheme: str = "Bearer"
    bearer_format: str | None = None
    description: str | None = None


class SecurityScheme(WireModel):
    """A oneof; the OAuth, OpenID Connect and mTLS members are carried as plain objects.

    An A2A 0.3 scheme (OpenAPI's form, `{"type": "apiKey", "in": …, "name": …}`) is read as
    its 1.0 member: a card serving 0.3 clients too carries its schemes in that form (a
    gateway's card does, `protocol.v03.card_v03`)."""

    api_key_security_scheme: ApiKeySecurityScheme | None = None
    http_auth_security_scheme: HttpAuthSecurityScheme | None = None
    oauth2_security_scheme: dict[str, Any] | None = None
    open_id_connect_security_scheme: dict[str, Any] | None = None
    mtls_security_scheme: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_v03(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            return data
        rest = {k: v for k, v in data.items() if k != "type"}
        kind = data["type"]
        if kind == "apiKey":
            member = {"location": rest.pop("in", "header"), **rest}
            return {"apiKeySecurityScheme": member}
        if kind == "http":
            return {"httpAuthSecurityScheme": rest}
        members = {
            "oauth2": "oauth2SecurityScheme",
            "openIdConnect": "openIdConnectSecurityScheme",
            "mutualTLS": "mtlsSecurityScheme",
        }
        return {members[kind]: rest} if kind in members else data

    @model_validator(mode="after")
    def _one_member(self) -> SecurityScheme:
        exactly_one(
            self,
            (
                "api_key_security_scheme",
                "http_auth_security_scheme",
                "oauth2_security_scheme",
                "open_id_connect_security_scheme",
                "mtls_security_scheme",
            ),
            "a security scheme",
        )
        return self


class AgentCard(WireModel):
    name: str
    description: str
    supported_interfaces: list[AgentInterface] = Field(min_length=1)
    version: str
    capabilities: AgentCapabilities
    default_input_modes: list[str] = Field(default_factory=lambda: ["text/plain"])
    default_output_modes: list[str] = Field(default_factory=lambda: ["text/plain"])
    skills: list[AgentSkill] = Field(default_factory=list)
    provider: AgentProvider | None = None
    documentation_url: str | None = None
    security_schemes: dict[str, SecurityScheme] | None = None
    security_requirements: list[SecurityRequirement] | None = None
    signatures: list[dict[str, Any]] | None = None
    icon_url: str | None = None

    @property
    def url(self) -> str:
        """The URL of the first (preferred) interface."""
        return self.supported_interfaces[0].url

    @property
    def offered(self) -> frozenset[str]:
        """The capabilities this agent offers to agents handing tasks to it (the handoff
        extension's `params.capabilities`)."""
        offered: set[str] = set()
        for ext in self.capabilities.extensions or []:
            if ext.uri == HANDOFF_EXTENSION_URI and ext.params:
                offered |= {str(c) for c in ext.params.get("capabilities", [])}
        return frozenset(offered)


def handoff_extension(
    capabilities: list[str] | None = None, contracts: list[dict[str, Any]] | None = None
) -> AgentExtension:
    """The card entry declaring the extension and what this agent accepts.

    Empty lists and `required: false` (a proto3 default) are left out: a signed card must
    canonicalize the same here and in the official SDK, which drops them.
    """
    params: dict[str, Any] = {}
    if capabilities:
        params["capabilities"] = sorted(capabilities)
    if contracts:
        params["contracts"] = contracts
    return AgentExtension(
        uri=HANDOFF_EXTENSION_URI,
        description="Atomic task handoff between agents; TRANSFERRED state and transfer pointer",
        params=params or None,
    )


def skill(
    skill_id: str,
    description: str,
    *tags: str,
    name: str | None = None,
    examples: Sequence[str] = (),
    input_modes: Sequence[str] | None = None,
    output_modes: Sequence[str] | None = None,
) -> AgentSkill:
    """A skill entry; the name defaults to the id. `examples` are sample prompts; the
    modes, when given, override the card's defaults for this skill."""
    return AgentSkill(
        id=skill_id,
        name=name or skill_id,
        description=description,
        tags=list(tags),
        examples=list(examples) or None,
        input_modes=list(input_modes) if input_modes is not None else None,
        output_modes=list(output_modes) if output_modes is not None else None,
    )


def build_card(
    name: str,
    url: str,
    *,
    description: str = "",
    skills: Sequence[AgentSkill] = (),
    capabilities: Sequence[str] = (),
    version: str = "1.0.0",
    input_modes: Sequence[str] = ("text/plain",),
    output_modes: Sequence[str] = ("text/plain",),
    provider: AgentProvider | None = None,
    documentation_url: str | None = None,
    icon_url: str | None = None,
    streaming: bool = True,
    push_notifications: bool = False,
    extended_agent_card: bool | None = None,
    http_json: bool = True,
    tenant: str | None = None,
) -> AgentCard:
    """A card for an agent served at `url`: JSON-RPC and HTTP+JSON (A2A 1.0, both at `url`,
    as `create_app` serves them; `http_json=False` declares JSON-RPC only), streaming, the
    handoff extension.

    `capabilities` are what the agent offers to agents handing tasks to it (the handoff
    extension's `params.capabilities`). `input_modes` / `output_modes` are the media types
    the agent takes and gives; `provider` (`AgentProvider(organization=…, url=…)`),
    `documentation_url` and `icon_url` describe it. The capability flags are declarations:
    this library's server streams, and answers push-notification configs and the extended
    card as not supported — declare those only when something in front of it serves them.
    `tenant`: the tenant every interface names (`named_tenant`).
    """
    url = check_agent_url(url, f"the card of {name}", replicas=False)
    interfaces = [AgentInterface(url=url)]
    if http_json:
        # REST paths are appended to it (`{url}/message:send`): no trailing slash.
        interfaces.append(AgentInterface(url=url.rstrip("/"), protocol_binding="HTTP+JSON"))
    card = AgentCard(
        name=name,
        description=description or name,
        version=version,
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(
            streaming=streaming,
            push_notifications=push_notifications,
            extensions=[handoff_extension(list(capabilities))],
            extended_agent_card=extended_agent_card,
        ),
        default_input_modes=list(input_modes),
        default_output_modes=list(output_modes),
        skills=list(skills),
        provider=provider,
        documentation_url=documentation_url,
        icon_url=icon_url,
    )
    return named_tenant(card, tenant) if tenant else card


def named_tenant(card: AgentCard, tenant: str) -> AgentCard:
    """`card` with every interface naming `tenant`: A2A clients that follow the card — this
    library's `AgentClient`, so every handoff and delegation sent to the agent — call it in
    that tenant (the `tenant` param, `/{tenant}/…` over HTTP+JSON, the gRPC field)."""
    interfaces = [i.model_copy(update={"tenant": tenant}) for i in card.supported_interfaces]
    return card.model_copy(update={"supported_interfaces": interfaces})
