"""One agent, served: `AgentService` owns its lifecycle and answers the A2A operations; the
ways in (JSON-RPC, HTTP+JSON, A2A 0.3, MCP) are adapters over it.

The design, in three parts:

- **The service** (`AgentService`) is an async context manager that owns what one agent runs
  on, and opens and closes it in order. Entered: the store claimed for this agent and opened;
  its keys loaded (`trust`, before any delivery: deliveries are signed); this runner's
  heartbeat started; the tasks a previous process left running recovered (failed, or resumed);
  then the work that goes on while it serves — the handoff outbox (replaying what that
  process left pending), the agent's own background job, push deliveries, the retention
  sweep (`runtime.retention`, when finished tasks are kept for a while only) — and last the faces
  that run while it serves (the MCP sessions). Left: everything closed, in the reverse order.
  A store that fails reads during recovery is served degraded rather than not at all
  (`/health` says what is wrong; the heartbeat tries again).
- **The operations** (`server._operations`, which the service is) take an operation's typed
  request (`protocol.models`) and the `Caller` (its principal, its active extensions) and
  answer with domain values (`server.results`): a `TaskView` (a task as that caller is shown
  it), a `Message`, a `TaskPage`, an `EventStream` of (sequence number, item), or an A2A error
  raised (`errors`). They know no HTTP: no request, no response, no JSON-RPC id.
- **The faces** are adapters, each contributing its routes and its encoding: JSON-RPC
  (`server._jsonrpc`), HTTP+JSON (`server._rest`) and A2A 0.3 on the JSON-RPC endpoint
  (`server._compat03`) parse params into the typed requests through the HTTP methods they
  share (`server._http_methods`), and each binding encodes the domain result itself (1.0
  ProtoJSON in an envelope or bare, or 0.3's shapes); the MCP tools (`server._mcp`) call the
  operations directly. `server.routes.agent_routes` gathers them, with the card, health and
  metrics routes, for `create_app` — or for an app of one's own.

**Stopping**: `drain()` (a `DrainConfig`'s bound; `server.DrainingServer` calls it on SIGTERM)
turns the service not ready at once (`/readyz` 503), goes on taking work for the grace, then
refuses what would start a run (-32108, HTTP 503: sent again, another replica takes it) and
finishes or hands over its runs by the deadline (`runtime.draining`); reads and requests in
flight are served throughout. Leaving the service afterwards closes it as ever.

What stays the faces': envelopes and error objects, SSE framing, and a blocking answer held
past the keep-alive interval (`server._patience`: its head at once, spaces, then its body).
So SendMessage comes in two steps — `sending` takes the message and gives a `Sent`, whose
`ready` is what its answer waits for — letting an HTTP face hold its head while the task
runs; `send_message` awaits both, for a caller that just wants the result.

On the hot path nothing is serialised twice: the task's JSON as the store wrote it is the
answer's when the caller is shown it unchanged (`TaskView.json()`), and a face frames it by
concatenation.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType

from a2a_handoff.agent import Agent
from a2a_handoff.errors import ConfigError, StoreError
from a2a_handoff.escalation import EscalationPolicy
from a2a_handoff.failpoints import pausepoint
from a2a_handoff.observe import Observer, events, use
from a2a_handoff.protocol.agent_card import AgentCard
from a2a_handoff.push import Pusher, PushSettings
from a2a_handoff.runtime.retention import RetentionSweep
from a2a_handoff.runtime.tasks import TaskManager
from a2a_handoff.server._app_trust import agent_trust_of, operators_of
from a2a_handoff.server._authentication import Authentication
from a2a_handoff.server._card_route import CardRoute
from a2a_handoff.server._cards import served_cards
from a2a_handoff.server._oidc import OidcVerifier
from a2a_handoff.server._operations import A2AOperations
from a2a_handoff.server._push import PushConfigs
from a2a_handoff.server._wiring import default_client, handoff_settings, mcp_tools
from a2a_handoff.server.app_config import (
    DrainConfig,
    HandoffConfig,
    LimitsConfig,
    RetentionConfig,
    TlsConfig,
    ToolsConfig,
    TrustConfig,
)
from a2a_handoff.server.tls import require_https
from a2a_handoff.stores.base import Store
from a2a_handoff.trust.tokens import TokenRules

log = logging.getLogger("a2a_handoff.server")

Face = Callable[[], AbstractAsyncContextManager[None]]
"""A way in that runs while the service serves (the MCP face's sessions)."""


class AgentService(A2AOperations):
    """One agent's service: its store, keys, task manager and background work, opened and
    closed in order (`async with`), and the A2A operations on them (see the module
    docstring). Its settings are `create_app`'s, less what only the faces use."""

    def __init__(
        self,
        agent: Agent,
        card: AgentCard,
        store: Store,
        *,
        handoff: HandoffConfig | None = None,
        trust: TrustConfig | None = None,
        limits: LimitsConfig | None = None,
        tools: ToolsConfig | None = None,
        escalation: EscalationPolicy | None = None,
        extended_card: AgentCard | None = None,
        push: PushSettings | None = None,
        dedupe_message_ids: bool = True,
        tls: TlsConfig | None = None,
        drain: DrainConfig | None = None,
        retention: RetentionConfig | None = None,
    ) -> None:
        if not inspect.iscoroutinefunction(getattr(agent, "handle", None)):
            raise TypeError(
                f"{type(agent).__name__}.handle must be an async method (async def handle(self,"
                " ctx)): the server awaits it for every task step"
            )
        handoff, trust = handoff or HandoffConfig(), trust or TrustConfig()
        self.limits = limits or LimitsConfig()
        self.trust_config = trust  # who is trusted, who decides; its hosts for the faces
        self.tls = tls  # served with (the faces'), presented and trusted calling others
        if tls is not None and tls.serves:
            require_https(card)
        self.auth = _authentication(trust, card, tls)  # who calls: keys, tokens, certificates
        card, extended = served_cards(card, extended_card, self.auth, handoff.contracts, push)
        self.agent, self.card, self.store = agent, card, store
        self.own_client = handoff.client is None  # built here: closed with the service
        client = handoff.client
        if client is None:
            client = default_client(handoff.credentials, tls)
        self.client = client
        self.trust = agent_trust_of(card, store, client, trust, handoff.routes, escalation)
        manager = TaskManager(
            agent,
            store,
            handoff_settings(card, handoff),
            client,
            self.trust,
            escalation,
            operators_of(card, self.auth, trust.operators),
            dedupe_message_ids=dedupe_message_ids,
            tools=mcp_tools(tools or ToolsConfig()),
        )
        self.observer = Observer(card.name)
        agent_trust = self.trust
        self.pusher = None if push is None else Pusher(store, push, lambda: agent_trust.signing_key)
        super().__init__(
            manager,
            max_streams=self.limits.max_streams,
            extended_card=None if extended is None else CardRoute(extended, self.trust).text,
            extended_declared=bool(card.capabilities.extended_agent_card),
            push=None if self.pusher is None else PushConfigs(manager, self.pusher),
        )
        if self.pusher is not None:
            self.observer.metrics.add_collector(self.pusher.collector())
        self._faces: list[Face] = []
        self._serving: contextlib.AsyncExitStack | None = None
        self.drain_config = drain or DrainConfig()
        self.draining = False  # told to stop: not ready, whatever the store says
        self.retention = _retention_sweep(store, retention)

    def while_serving(self, face: Face) -> None:
        """Run `face` (entered, then left) while the service serves: after everything else
        has started, and stopped before anything else is closed."""
        if self._serving is not None:
            raise RuntimeError("the service is open already: add its faces before entering it")
        self._faces.append(face)

    # -- the lifecycle --------------------------------------------------------------------

    async def __aenter__(self) -> AgentService:
        if self._serving is not None:
            raise RuntimeError(f"the service of {self.card.name} is open already")
        use(self.observer)  # its background work (started here) is this agent's
        self.store.claim(self.card.name)  # one store, one agent: another's is refused here
        await self.store.open()
        faces = contextlib.AsyncExitStack()
        try:
            await self._start()
            for face in self._faces:
                await faces.enter_async_context(face())
        except BaseException:
            try:
                await faces.aclose()
            finally:
                await self._stop()
            raise
        self._serving = faces
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await pausepoint("service.before_close")
        faces, self._serving = self._serving, None
        try:
            if faces is not None:
                await faces.__aexit__(exc_type, exc, traceback)
        finally:
            await self._stop()

    async def drain(self) -> None:
        """Stop taking work and finish or hand over the runs under way, within the drain's
        bound (see the module docstring); the service stays open (leave it after)."""
        if self.draining:
            return
        self.draining = True
        config = self.drain_config
        loop = asyncio.get_running_loop()
        deadline = loop.time() + config.seconds
        log.info(
            "draining: not ready; new work refused in %gs, running tasks handed over in %gs",
            config.grace_seconds,
            config.seconds,
        )
        await asyncio.sleep(config.grace_seconds)
        handed = await self.manager.drain(deadline)
        log.info("drained: %d task(s) handed over", handed)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """The service open while an app serves: Starlette's `lifespan=service.lifespan`."""
        async with self:
            yield

    async def _start(self) -> None:
        legacy = self.store.capabilities.legacy_keys
        if legacy is not None:  # private keys left in a shared store: moved out first
            await legacy.refuse_legacy_identity(self.card.name)
        await self.trust.open()  # before any delivery: deliveries are signed
        self.trust.start()
        # Before serving: fail the tasks a previous process left running (with replicas:
        # those whose runner is gone). Its pending handoffs are the outbox's, once serving.
        await self.manager.start()
        try:
            await self._recover()
        except StoreError as exc:
            log.error("start-up recovery failed, serving degraded: %s", exc)
        self.manager.serve()
        if self.auth is not None:
            self.auth.start()  # the token issuer's keys, fetched meanwhile
        if self.pusher is not None:
            self.pusher.start()  # its first sweep resumes what a previous process left
        if self.retention is not None:
            self.retention.start()

    async def _recover(self) -> None:
        recovered = await self.manager.recover()
        if recovered:
            done = "resumed" if getattr(self.agent, "resumes", False) else "failed"
            events.recovery(
                "orphaned",
                f"{done} %d task(s) left running by a previous process",
                recovered,
                count=recovered,
            )

    async def _stop(self) -> None:
        if self.retention is not None:
            await self.retention.aclose()
        if self.pusher is not None:
            await self.pusher.aclose()
        await self.manager.aclose()
        await self.trust.aclose()
        if self.own_client:
            await self.client.aclose()
        if self.auth is not None:
            await self.auth.aclose()
        await self.store.aclose()


def _retention_sweep(store: Store, config: RetentionConfig | None) -> RetentionSweep | None:
    """The sweep deleting finished tasks, when `config` keeps them for a while only;
    ConfigError for a store that cannot delete them."""
    if config is None or config.retain is None:
        return None
    purging = store.capabilities.retention
    if purging is None:
        raise ConfigError("retention: this store declares no retention (capabilities.retention)")
    return RetentionSweep(purging, config.retain, batch=config.batch, interval=config.interval)


def _authentication(
    trust: TrustConfig, card: AgentCard, tls: TlsConfig | None
) -> Authentication | None:
    """Who may call: API keys, an issuer's tokens, client certificates under mutual TLS, any
    of them (None: anyone). A token's audience is the one configured, or the card's JSON-RPC
    URL exactly as the card writes it."""
    oidc = trust.oidc
    certificates = tls is not None and tls.mutual
    if oidc is None:
        if trust.auth is None and not certificates:
            return None
        return Authentication(trust.auth, None, certificates)
    audience = oidc.audience or next(
        (i.url for i in card.supported_interfaces if i.protocol_binding == "JSONRPC"), card.url
    )
    rules = TokenRules(oidc.issuer, audience, oidc.leeway)
    tokens = OidcVerifier(rules, retry=oidc.retry, cache_size=oidc.cache_size)
    return Authentication(trust.auth, tokens, certificates)
