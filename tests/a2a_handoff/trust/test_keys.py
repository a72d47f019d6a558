"""An agent's identity: rotation, retirement, its document, and the key file."""

from __future__ import annotations

import json
import os
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
    missing = KeyFile(tmp_path / "keys" / "agent.json")
    with pytest.raises(TrustError, match="keys init --key-file"):  # never made on its own
        await load_or_create(missing, "agent")
    file = KeyFile(tmp_path / "keys" / "agent.json", create=True)
    made = await load_or_create(file, "agent")
    assert stat.S_IMODE(file.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(file.path.parent.stat().st_mode) == 0o700
    assert (await load_or_create(file, "agent")).signing_key.kid == made.signing_key.kid
    single = json.dumps(made.signing_key.as_dict(private=True))
    env = EnvIdentity(single)
    assert (await load_or_create(env, "agent")).signing_key.kid == made.signing_key.kid
    with pytest.raises(TrustError, match="change it there"):
        await change(env, "agent", Identity.rotated)


@pytest.mark.parametrize(
    ("mode", "owner", "said"),
    [
        (0o644, None, "readable by other users"),
        (0o640, None, "readable by other users"),
        (0o600, 65534, "belongs to uid 65534"),
    ],
)
async def test_an_unsafe_key_file_is_refused(
    tmp_path: Path, mode: int, owner: int | None, said: str
) -> None:
    # A key another user can read may be someone else's already; one another user owns may
    # have been planted: neither ever signs.
    file = KeyFile(tmp_path / "agent.json", create=True)
    await load_or_create(file, "agent")
    file.path.chmod(mode)
    if owner is not None:
        os.chown(file.path, owner, owner)
    with pytest.raises(TrustError, match=said):
        await load_or_create(file, "agent")
