"""The agent's identity (`capabilities.identity`): one document per agent, made once,
replaced only check-and-set — so an agent starting and `keys rotate` never lose a key."""

from __future__ import annotations

import uuid

import pytest

from a2a_handoff.stores.base import IdentityStore, TaskStore
from a2a_handoff.stores.conformance.samples import Suite, declared
from a2a_handoff.trust.keys import Identity, load_or_create


class IdentitySuite(Suite):
    """`IdentityStore`, for every store that keeps the agent's keys."""

    @pytest.fixture
    def identity(self, store: TaskStore) -> IdentityStore:
        return declared(store.capabilities.identity, "identity (it keeps no keys)")

    async def test_an_identity_is_made_once_and_changed_check_and_set(
        self, identity: IdentityStore
    ) -> None:
        agent = f"agent-{uuid.uuid4().hex[:6]}"
        assert await identity.load_identity(agent) is None
        made = await load_or_create(identity, agent)
        again = await load_or_create(identity, agent)
        assert again.signing_key.kid == made.signing_key.kid
        document = made.to_document()
        rotated = made.rotated().to_document()
        assert await identity.save_identity(agent, rotated, document)
        assert not await identity.save_identity(agent, document, document)  # stale: refused
        assert not await identity.save_identity(agent, document, None)  # exists already
        kept = await identity.load_identity(agent)
        assert kept is not None
        assert len(Identity.from_document(kept).active) == 2
