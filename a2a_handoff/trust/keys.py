"""An agent's identity: its Ed25519 signing keys, each with a `kid`, kept where its store is.

Several keys may be active at once, for rotation: the newest active key signs, every active
key verifies and is published (the JWKS). Retiring a key removes it from the JWKS and drops
its private half, so a retired key can neither sign again nor be stolen later; an envelope
signed with it no longer verifies anywhere that re-read the JWKS. The last active key cannot
be retired (rotate first). A `kid` is the key's RFC 7638 thumbprint.

The identity is one JSON document (`to_document`), kept by an `IdentityStore`: a key file
(mode 0600) next to a SQLite database or named by `--key-file`, a Redis key per agent name,
or memory. `A2A_AGENT_KEY` may hold it (or one private JWK) instead: read-only then.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from joserfc.errors import JoseError
from joserfc.jwk import OKPKey

from a2a_handoff.errors import SignatureError, TrustError
from a2a_handoff.protocol.models import utc_now
from a2a_handoff.secrets import private_dir
from a2a_handoff.trust.signing import KEY_TYP, sign_claims, verify_claims

ENV_VAR = "A2A_AGENT_KEY"
NO_KEYS_IN_SHARED_STORE = (
    "a shared store (Redis, PostgreSQL) keeps no signing keys — whoever reaches it would read"
    " them: give the agent a key file of its own, mode 0600 — made by `python -m a2a_handoff"
    " keys init --key-file PATH --agent NAME` — and start it with --key-file PATH (its"
    " replicas with the same file), or put the key in $A2A_AGENT_KEY"
)


def public_key(jwk: Mapping[str, Any]) -> OKPKey:
    """An Ed25519 public key from its JWK; TrustError when it is not one."""
    if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        raise TrustError("a signing key must be an Ed25519 (OKP) JWK")
    try:
        key = OKPKey.import_key({k: v for k, v in jwk.items() if k != "d"})
    except (JoseError, ValueError, TypeError) as exc:
        raise TrustError(f"not a usable Ed25519 key: {exc}") from None
    key.ensure_kid()
    return key


def jwks_keys(document: Any) -> dict[str, OKPKey]:
    """kid → public key of a JWKS document; keys of other types are skipped (RFC 7517 §5)."""
    if not isinstance(document, Mapping) or not isinstance(document.get("keys"), list):
        raise TrustError("a JWKS is an object with a list of keys")
    keys: dict[str, OKPKey] = {}
    for jwk in document["keys"]:
        if isinstance(jwk, Mapping) and jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519":
            key = public_key(jwk)
            assert key.kid is not None
            keys[key.kid] = key
    return keys


@dataclass(frozen=True, slots=True)
class KeyEntry:
    """One key of an identity: private while active, public only once retired."""

    key: OKPKey
    created: str
    retired: str | None = None
    # The key that signed before this one vouching for it (a rotation statement): a
    # receiver that pinned the older key accepts this one on that proof alone.
    endorsement: dict[str, Any] | None = None

    @property
    def kid(self) -> str:
        assert self.key.kid is not None
        return self.key.kid


def _new_key() -> OKPKey:
    return OKPKey.generate_key("Ed25519", auto_kid=True)


@dataclass(frozen=True)
class Identity:
    """One agent's keys, oldest first."""

    agent: str
    entries: tuple[KeyEntry, ...]

    @classmethod
    def generate(cls, agent: str) -> Identity:
        return cls(agent, (KeyEntry(_new_key(), utc_now()),))

    @cached_property  # frozen: its entries never change (an edit makes a new Identity)
    def active(self) -> tuple[KeyEntry, ...]:
        return tuple(e for e in self.entries if e.retired is None)

    @cached_property
    def signing_key(self) -> OKPKey:
        """The newest active key: what signs from now on (read several times a handoff)."""
        return self.active[-1].key

    @cached_property
    def public_keys(self) -> dict[str, OKPKey]:
        """kid → public key of every active key."""
        return {e.kid: public_key(e.key.as_dict(private=False)) for e in self.active}

    def jwks(self) -> dict[str, Any]:
        """The public JWKS (`/.well-known/jwks.json`): active keys only, no `alg` member,
        and every rotation statement (`ENDORSEMENTS`), so that a receiver that pinned an
        older key can follow the chain to the keys that sign now."""
        keys = []
        for entry in self.active:
            jwk = dict(entry.key.as_dict(private=False))
            jwk.update(use="sig", kid=entry.kid)
            keys.append(jwk)
        endorsements = [e.endorsement for e in self.entries if e.endorsement]
        return {"keys": keys, ENDORSEMENTS: endorsements} if endorsements else {"keys": keys}

    def rotated(self) -> Identity:
        """A new key added: it signs from now on; the others still verify until retired. The
        key that signed until now endorses it (a rotation statement it signs)."""
        new = _new_key()
        endorsement = endorse(self.agent, self.signing_key, new)
        entry = KeyEntry(new, utc_now(), endorsement=endorsement)
        return replace(self, entries=(*self.entries, entry))

    def retired(self, kid: str) -> Identity:
        """Key `kid` retired (its private half dropped); TrustError for the last active key."""
        if kid not in {e.kid for e in self.entries}:
            raise TrustError(f"{self.agent} has no key {kid!r}")
        if kid not in {e.kid for e in self.active}:
            return self
        if len(self.active) == 1:
            raise TrustError(f"{kid} is {self.agent}'s only active key: rotate first")
        entries = tuple(
            KeyEntry(public_key(e.key.as_dict(private=False)), e.created, utc_now(), e.endorsement)
            if e.kid == kid
            else e
            for e in self.entries
        )
        return replace(self, entries=entries)

    def to_document(self) -> str:
        keys = [
            {
                "jwk": {**e.key.as_dict(private=e.retired is None), "kid": e.kid},
                "created": e.created,
                "retired": e.retired,
                **({"endorsement": e.endorsement} if e.endorsement else {}),
            }
            for e in self.entries
        ]
        return json.dumps({"agent": self.agent, "keys": keys}, indent=2) + "\n"

    @classmethod
    def from_document(cls, text: str, agent: str = "") -> Identity:
        """Parse an identity document — or a single private Ed25519 JWK (`agent` names it)."""
        try:
            data = json.loads(text)
        except ValueError:
            raise TrustError("an identity must be JSON: an identity document or a JWK") from None
        if isinstance(data, dict) and data.get("kty"):
            data = {"agent": agent, "keys": [{"jwk": data, "created": ""}]}
        if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
            raise TrustError("an identity document has a list of keys")
        entries = []
        for raw in data["keys"]:
            if not isinstance(raw, dict) or not isinstance(raw.get("jwk"), dict):
                raise TrustError("every key of an identity document is {jwk, created, retired}")
            jwk, retired = raw["jwk"], raw.get("retired")
            if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
                raise TrustError("identity keys must be Ed25519 (OKP) JWKs")
            try:
                key = OKPKey.import_key(jwk)
            except (JoseError, ValueError, TypeError) as exc:
                raise TrustError(f"an identity key cannot be read: {exc}") from None
            key.ensure_kid()
            if retired is None and not key.is_private:
                raise TrustError(f"active key {key.kid} has no private part")
            endorsement = raw.get("endorsement")
            entries.append(
                KeyEntry(
                    key,
                    str(raw.get("created") or ""),
                    retired,
                    endorsement if isinstance(endorsement, dict) else None,
                )
            )
        identity = cls(str(data.get("agent") or agent), tuple(entries))
        if not identity.active:
            raise TrustError("an identity needs at least one active key")
        return identity


ENDORSEMENTS = "a2a-handoff:endorsements"  # the JWKS member listing rotation statements


def endorse(agent: str, signer: OKPKey, new: OKPKey) -> dict[str, Any]:
    """A rotation statement: `signer` (a key of `agent`) vouches for `new`."""
    jwk = {**new.as_dict(private=False), "kid": new.kid}
    claims = {"iss": agent, "kid": new.kid, "jwk": jwk, "iat": int(time.time())}
    return sign_claims(claims, signer, KEY_TYP)


def endorsed(agent: str, anchors: Mapping[str, OKPKey], document: Any) -> dict[str, OKPKey]:
    """The keys a JWKS document's rotation statements prove, starting from `anchors` (keys
    already trusted): a key is proven when a proven key of the same agent endorsed it —
    along a chain, however many rotations ago the anchor was. Anchors included."""
    proven = dict(anchors)
    statements = document.get(ENDORSEMENTS) if isinstance(document, Mapping) else None
    pending = (
        [s for s in statements if isinstance(s, Mapping)] if isinstance(statements, list) else []
    )
    progress = True
    while pending and progress:
        progress = False
        for statement in list(pending):
            try:
                claims, _ = verify_claims(statement, proven, KEY_TYP)
            except SignatureError:
                continue  # not (yet) signed by a proven key
            pending.remove(statement)
            jwk = claims.get("jwk")
            if claims.get("iss") != agent or not isinstance(jwk, Mapping):
                continue
            try:
                key = public_key(jwk)
            except TrustError:
                continue
            if key.kid == claims.get("kid") and key.kid is not None and key.kid not in proven:
                proven[key.kid] = key
                progress = True
    return proven


class IdentityStore(Protocol):
    """Where an agent's identity document is kept (see `stores`, and `KeyFile`)."""

    async def load_identity(self, agent: str) -> str | None:
        """The identity document of `agent`, or None when it has none yet."""
        ...

    async def save_identity(self, agent: str, document: str, expected: str | None) -> bool:
        """Replace the document if the stored one is still `expected` (None: absent);
        False, and nothing written, otherwise."""
        ...


class KeyFile:
    """An identity document in a file, mode 0600, replaced atomically (check-and-set under
    an advisory lock, so an agent starting and `keys rotate` cannot lose each other's key).

    Only a private file of this user's is used: one another user owns (planted) or can read
    is refused with TrustError, never signed with. A missing file becomes a new identity
    only when `create` says so — `keys init`, or a store opened for the first time: an agent
    whose key file disappeared must not quietly become someone else.
    """

    def __init__(self, path: str | Path, *, create: bool = False, missing_hint: str = "") -> None:
        self.path = Path(path)
        self.create = create
        self.missing_hint = missing_hint

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        private_dir(self.path.parent)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def read(self) -> str | None:
        """The document, or None when there is no file; TrustError for an unsafe one."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise TrustError(f"cannot read the key file {self.path}: {exc.strerror}") from None
        with os.fdopen(fd) as handle:
            _check_private(self.path, os.fstat(fd))
            return handle.read()

    def write_if(self, document: str, expected: str | None) -> bool:
        with self._locked():
            if self.read() != expected:
                return False
            if expected is None and not self.create:
                raise TrustError(
                    f"the key file {self.path} is missing"
                    + (f" {self.missing_hint}" if self.missing_hint else "")
                    + ": this agent will not make itself a new identity on its own (agents"
                    " that pinned its keys would refuse it). Restore the file, or make a new"
                    " identity on purpose: python -m a2a_handoff keys init --key-file"
                    f" {self.path} --agent {json.loads(document).get('agent') or 'NAME'}"
                )
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(document)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
            return True

    async def load_identity(self, agent: str) -> str | None:
        return self.read()

    async def save_identity(self, agent: str, document: str, expected: str | None) -> bool:
        return self.write_if(document, expected)


def _check_private(path: Path, status: os.stat_result) -> None:
    """TrustError unless `path` is this user's own file, readable by nobody else."""
    if status.st_uid != os.geteuid():
        raise TrustError(
            f"the key file {path} belongs to uid {status.st_uid}, not to this user"
            f" ({os.geteuid()}): another user may have put it there; refusing to sign with it"
        )
    mode = stat.S_IMODE(status.st_mode)
    if mode & 0o077:
        raise TrustError(
            f"the key file {path} is readable by other users (mode {mode:o}): a private key"
            f" must be mode 600 (chmod 600 {path}), and should be replaced if others read it"
        )


class EnvIdentity:
    """An identity given in an environment variable: read-only."""

    def __init__(self, document: str) -> None:
        self.document = document

    async def load_identity(self, agent: str) -> str | None:
        return self.document

    async def save_identity(self, agent: str, document: str, expected: str | None) -> bool:
        raise TrustError(f"the identity comes from ${ENV_VAR}: change it there")


def own_identity(document: str, agent: str, store: object = None) -> Identity:
    """`agent`'s identity from its document; TrustError when the document is another agent's.

    Keys belong to an agent name: an agent started on another agent's store (a SQLite file
    shared with `?shared=1`, meant for replicas of one agent) or key file would otherwise sign
    as that agent — two agents, one JWKS, each able to impersonate the other."""
    identity = Identity.from_document(document, agent)
    if identity.agent != agent:
        where = f" ({store.path})" if isinstance(store, KeyFile) else ""
        raise TrustError(
            f"the signing keys{where} belong to agent {identity.agent!r}, not {agent!r}: keys,"
            f" and the store they sit beside, serve one agent (?shared=1 shares a file between"
            f" replicas of one agent, not between agents); give {agent} a store of its own"
            f" (sqlite:///data/{agent}.db), or a key file of its own (python -m a2a_handoff"
            f" keys init --key-file PATH --agent {agent})"
        )
    return identity


async def load_or_create(store: IdentityStore, agent: str) -> Identity:
    """The agent's identity; generated and saved on first use (one winner if two race);
    TrustError when the store holds another agent's (`own_identity`)."""
    for _ in range(3):
        document = await store.load_identity(agent)
        if document is not None:
            return own_identity(document, agent, store)
        identity = Identity.generate(agent)
        if await store.save_identity(agent, identity.to_document(), None):
            return identity
    raise TrustError(f"could not create an identity for {agent}")


async def change(store: IdentityStore, agent: str, edit: Any) -> Identity:
    """Apply `edit(identity) -> identity` to the stored identity, check-and-set."""
    for _ in range(5):
        document = await store.load_identity(agent)
        if document is None:
            raise TrustError(f"{agent} has no identity yet (it is made on first start)")
        updated: Identity = edit(own_identity(document, agent, store))
        if await store.save_identity(agent, updated.to_document(), document):
            return updated
    raise TrustError(f"{agent}'s identity kept changing; try again")
