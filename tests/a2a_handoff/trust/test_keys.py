"""An agent's identity: rotation, retirement, its document, and the key file."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from a2a_handoff.errors import TrustError
from a2a_handoff.stores import MemoryTaskStore, SqliteTaskStore
from a2a_handoff.trust.keys import EnvIdentity, Identity, KeyFile, change, load_or_create

pytestmark = pytest.mark.anyio


def test_rotation_adds_a_signing_key_and_retirement_drops_the_old_one() -> None:
    first = Identity.generate("billing")
    old = first.signing_key.kid
    rotated = first.rotated()
    new = rotated.signing_key.kid
    assert new != old
    assert set(rotated.public_keys) == {old, new}  # both verify until one is retired
    retired = rotated.retired(str(old))
    assert set(retired.public_keys) == {new}
    assert [k["kid"] for k in retired.jwks()["keys"]] == [new]
    # The retired key keeps no private half, in memory or in the document.
    entry = next(e for e in retired.entries if e.kid == old)
    assert not entry.key.is_private
    document = json.loads(retired.to_document())
    assert all("d" not in k["jwk"] for k in document["keys"] if k["retired"])
    with pytest.raises(TrustError, match="only active key"):
        retired.retired(str(new))
    with pytest.raises(TrustError, match="no key"):
        retired.retired("nope")


def test_the_document_round_trips_and_the_jwks_has_no_private_part() -> None:
    identity = Identity.generate("billing").rotated()
    again = Identity.from_document(identity.to_document())
    assert again.signing_key.kid == identity.signing_key.kid
    assert set(again.public_keys) == set(identity.public_keys)
    assert all(set(k) == {"kty", "crv", "x", "kid", "use"} for k in again.jwks()["keys"])


@pytest.mark.parametrize(
    "text",
    ["not json", "[]", '{"keys": "x"}', '{"keys": []}', '{"keys": [{"jwk": {"kty": "RSA"}}]}'],
)
def test_a_bad_document_is_a_clear_error(text: str) -> None:
    with pytest.raises(TrustError):
        Identity.from_document(text)


async def test_the_key_file_is_private_and_kept_across_opens(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "billing.db")
    first = await load_or_create(store, "billing")
    path = tmp_path / "billing.keys.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = await load_or_create(SqliteTaskStore(tmp_path / "billing.db"), "billing")
    assert again.signing_key.kid == first.signing_key.kid


async def test_changes_are_check_and_set() -> None:
    store = MemoryTaskStore()
    made = await load_or_create(store, "billing")
    document = made.to_document()
    assert await store.save_identity("billing", made.rotated().to_document(), document)
    # A writer that read the old document loses: nothing is overwritten behind its back.
    assert not await store.save_identity("billing", made.to_document(), document)
    rotated = await change(store, "billing", Identity.rotated)
    assert len(rotated.active) == 3


async def test_a_key_file_and_an_env_identity(tmp_path: Path) -> None:
    file = KeyFile(tmp_path / "keys" / "agent.json")
    made = await load_or_create(file, "agent")
    assert (await load_or_create(file, "agent")).signing_key.kid == made.signing_key.kid
    single = json.dumps(made.signing_key.as_dict(private=True))
    env = EnvIdentity(single)
    assert (await load_or_create(env, "agent")).signing_key.kid == made.signing_key.kid
    with pytest.raises(TrustError, match="change it there"):
        await change(env, "agent", Identity.rotated)
