"""One agent's trust: its identity (it signs) and its trust list (it verifies)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from joserfc.jwk import OKPKey

from a2a_handoff.trust.keys import Identity, IdentityStore, load_or_create, own_identity
from a2a_handoff.trust.signing import ENVELOPE_TYP, sign_detached
from a2a_handoff.trust.trustlist import TrustList

__all__ = ["AgentTrust"]

log = logging.getLogger("a2a_handoff.trust")


class AgentTrust:
    """One agent's trust: its identity (it signs) and its trust list (it verifies).

    The identity is read from its store at `open()` (made on first start) and read again
    every `reload_every` seconds, so `keys rotate` / `keys retire` take effect in a running
    agent: the newest active key signs, the JWKS lists the active keys.
    """

    def __init__(
        self,
        agent: str,
        store: IdentityStore,
        trust_list: TrustList,
        *,
        reload_every: float = 2.0,
    ) -> None:
        self.agent = agent
        self.store = store
        self.trust_list = trust_list
        self.reload_every = reload_every
        self._identity: Identity | None = None
        self._document: str | None = None
        self._job: asyncio.Task[None] | None = None

    @property
    def identity(self) -> Identity:
        if self._identity is None:
            raise RuntimeError("the agent's identity is not loaded yet (open() first)")
        return self._identity

    @property
    def signing_key(self) -> OKPKey:
        return self.identity.signing_key

    async def open(self) -> Identity:
        identity = await load_or_create(self.store, self.agent)
        self._identity = identity
        self._document = identity.to_document()
        log.info("%s signs with key %s", self.agent, identity.signing_key.kid)
        return identity

    async def reload(self) -> bool:
        """Read the identity again; whether it changed."""
        document = await self.store.load_identity(self.agent)
        if document is None or document == self._document:
            return False
        identity = own_identity(document, self.agent, self.store)
        before = set(self.identity.public_keys)
        self._identity, self._document = identity, document
        log.warning(
            "%s's keys changed: signing with %s; active %s (was %s)",
            self.agent,
            identity.signing_key.kid,
            sorted(identity.public_keys),
            sorted(before),
        )
        return True

    def sign_envelope(self, payload: bytes) -> str:
        """The detached JWS of an envelope's canonical bytes, by the newest active key."""
        return sign_detached(payload, self.identity.signing_key, ENVELOPE_TYP)

    def start(self) -> None:
        if self.reload_every > 0:
            self._job = asyncio.create_task(self._reload_forever(), name="identity-reload")

    async def _reload_forever(self) -> None:
        while True:
            await asyncio.sleep(self.reload_every)
            try:
                await self.reload()
            except Exception as exc:
                log.error("could not read %s's identity again: %s", self.agent, exc)

    async def aclose(self) -> None:
        if self._job is not None:
            self._job.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._job
