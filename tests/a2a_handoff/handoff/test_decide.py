"""The receiver decides once: a proven handoff is a `Duplicate`, a `Refuse` or an `Accept`."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_handoff.errors import HandoffProcessingError, IdempotencyConflictError
from a2a_handoff.handoff.envelope import TargetRef
from a2a_handoff.handoff.receiver import (
    Accept,
    Duplicate,
    HandoffReceiver,
    Refuse,
    receive_metadata,
)
from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.handoff.verified import VerifiedEnvelope
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.extension import SIGNATURE_KEY
from a2a_handoff.protocol.models import StreamResponse, Task, TaskStatus, utc_now
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import Commit, TaskRecord
from a2a_handoff.stores.memory import MemoryTaskStore
from a2a_handoff.trust.trustlist import TrustList
from tests.a2a_handoff.handoff.test_delivery import envelope
from tests.trust_support import Signer

pytestmark = pytest.mark.anyio

SIGNER = Signer("triage")
LONG_AGO = "2020-01-01T00:00:00.000Z"


def receiver(store: MemoryTaskStore) -> HandoffReceiver:
    settings = HandoffSettings(agent_name="billing", agent_url="http://127.0.0.1:2/")
    return HandoffReceiver(settings, store, TrustList([SIGNER.trusted()]))


async def proven(receiving: HandoffReceiver, **changes: Any) -> VerifiedEnvelope:
    return await receiving.verify(SIGNER.metadata(envelope(**changes)), "")


def idle(key: str) -> bool:
    return False


async def taken(
    store: MemoryTaskStore, verified: VerifiedEnvelope, key: str, owner: str = "triage"
) -> TaskRecord:
    """The task a first delivery of `verified` made (as `owner`), stored under `key`."""
    task = Task(
        id="taken",
        context_id="c1",
        status=TaskStatus(state=TaskState.SUBMITTED, timestamp=utc_now()),
        metadata={URI: receive_metadata(verified)},
    )
    now = utc_now()
    record = TaskRecord(task, owner, 1, now, now)
    return await store.commit(Commit(record, [StreamResponse(task=task)], dedupe_key=key))


async def test_a_new_handoff_is_accepted_under_its_key_with_only_its_signed_parts() -> None:
    receiving = receiver(MemoryTaskStore())
    verified = await proven(receiving)
    decision = await receiving.decide(verified, idle)
    assert isinstance(decision, Accept)
    env = verified.envelope
    assert decision.key == f"handoff\x1f{env.idempotency_key}"
    assert decision.window is None  # no contract: the key deduplicates forever
    message = decision.message
    assert [p.text for p in message.parts] == [env.summary, None]
    assert message.parts[1].data == env.transfer_context
    assert message.metadata is not None
    assert message.metadata[SIGNATURE_KEY] == verified.signature


async def test_a_replay_is_a_duplicate_of_the_task_it_made_whatever_its_age() -> None:
    store = MemoryTaskStore()
    receiving = receiver(store)
    # Expired by now: a replay is still answered with its task, never refused as expired.
    verified = await proven(receiving, created_at=LONG_AGO, ttl_seconds=1)
    key, _ = receiving.dedupe_for(verified)
    record = await taken(store, verified, key)
    assert await receiving.decide(verified, idle) == Duplicate(record)


async def test_the_same_key_with_another_envelope_is_a_conflict() -> None:
    store = MemoryTaskStore()
    receiving = receiver(store)
    first = await proven(receiving)
    key, _ = receiving.dedupe_for(first)
    await taken(store, first, key)
    other = await proven(receiving, reason="something else")  # same key, other envelope
    assert receiving.dedupe_for(other)[0] == key
    with pytest.raises(IdempotencyConflictError, match="different envelope"):
        await receiving.decide(other, idle)


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"created_at": LONG_AGO, "ttl_seconds": 1}, "envelope_expired"),
        ({"target": TargetRef(agent="billing", url="http://127.0.0.1:9/")}, "misaddressed"),
        ({"visited": ["triage", "billing"]}, "loop_detected"),
        ({"hop": 99}, "loop_detected"),
    ],
)
async def test_a_handoff_never_taken_is_refused_with_the_code_the_sender_reads(
    changes: dict[str, Any], code: str
) -> None:
    receiving = receiver(MemoryTaskStore())
    verified = await proven(receiving, **changes)
    decision = await receiving.decide(verified, idle)
    assert isinstance(decision, Refuse)
    assert decision.code == code
    assert decision.key == receiving.dedupe_for(verified)[0]  # its REJECTED task's key


async def test_a_key_this_process_is_creating_is_still_processing() -> None:
    store = MemoryTaskStore()
    receiving = receiver(store)
    verified = await proven(receiving)
    key, _ = receiving.dedupe_for(verified)
    with pytest.raises(HandoffProcessingError):
        await receiving.decide(verified, lambda k: k == key)
    # Even once its task is stored: the creation has not answered yet.
    await taken(store, verified, key)
    with pytest.raises(HandoffProcessingError):
        await receiving.decide(verified, lambda k: k == key)
    assert isinstance(await receiving.decide(verified, idle), Duplicate)


async def test_a_handoff_taken_in_one_tenant_is_new_in_another_and_a_replay_in_its_own() -> None:
    store = MemoryTaskStore()
    receiving = receiver(store)
    verified = await proven(receiving)
    key, _ = receiving.dedupe_for(verified, "acme")
    assert key == f"\x1facme\x1fhandoff\x1f{verified.envelope.idempotency_key}"
    assert key != receiving.dedupe_for(verified)[0] != receiving.dedupe_for(verified, "globex")[0]
    record = await taken(store, verified, key, owner="\x1facme\x1ftriage")
    # The same envelope replayed in its tenant: its task; in another, or the default one, a
    # handoff of its own there (never the acme task answered where acme is not).
    assert await receiving.decide(verified, idle, tenant="acme") == Duplicate(record)
    for elsewhere in ("globex", ""):
        decision = await receiving.decide(verified, idle, tenant=elsewhere)
        assert isinstance(decision, Accept)
        assert decision.key == receiving.dedupe_for(verified, elsewhere)[0]


async def test_a_key_that_finds_another_tenants_task_is_a_conflict_never_that_task() -> None:
    store = MemoryTaskStore()
    receiving = receiver(store)
    verified = await proven(receiving)
    key, _ = receiving.dedupe_for(verified, "acme")
    await taken(store, verified, key, owner="\x1fglobex\x1ftriage")  # joined, however
    with pytest.raises(IdempotencyConflictError, match="another tenant"):
        await receiving.decide(verified, idle, tenant="acme")


async def test_a_withdrawal_refuses_its_key_in_its_own_tenant_alone() -> None:
    store = MemoryTaskStore()
    receiving = receiver(store)
    verified = await proven(receiving)
    withdrawn = await receiving.decide(verified, idle, withdraw=True, tenant="acme")
    assert isinstance(withdrawn, Refuse)
    assert withdrawn.code == "withdrawn"
    assert withdrawn.key == receiving.dedupe_for(verified, "acme")[0]
    owner = "\x1facme\x1ftriage"
    args = (withdrawn.message, owner, withdrawn.key, verified, withdrawn.code, withdrawn.reason)
    record, _ = await receiving.reject(*args)
    # A try still on its way to acme finds the refusal; one sent in another tenant does not.
    assert await receiving.decide(verified, idle, tenant="acme") == Duplicate(record)
    for elsewhere in ("globex", ""):
        taken_there = await receiving.decide(verified, idle, tenant=elsewhere)
        assert isinstance(taken_there, Accept)
        assert taken_there.key != withdrawn.key
