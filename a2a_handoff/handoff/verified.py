"""The receiving edge: a handoff message's envelope, proven — or refused.

`verify()` is the only maker of a `VerifiedEnvelope`. One exists only once:
- the envelope carries a signature (else `envelope_unsigned`);
- its `source.agent` is on this agent's trust list (else `untrusted_source`);
- the signature verifies over the canonical envelope with a key of that agent — an unknown
  key id fetches its keys again, once, from its configured address (else `envelope_forged`);
- under API-key auth, the caller's principal is that agent's (else `untrusted_source`: a
  user's key never delivers a handoff, not even a copy of a real one);
- a `return` carries an operator's decision signed by that same agent, one allowed to sign
  decisions, for this agent, answering the task the return comes from (else
  `decision_invalid`).
Everything past the receiver takes a VerifiedEnvelope — refusals, dedupe, the task, the
handler — so nothing unverified reaches them. `visited`, `hop`, `onBehalfOf` and the transfer
context are covered by the signature. A refused envelope leaves nothing behind but its ledger
row (`HandoffReceiver.refuse_unverified`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from a2a_handoff.canonical import canonical
from a2a_handoff.errors import InternalError, InvalidParamsError, SignatureError, TrustError
from a2a_handoff.escalation import Decision, decision_from_claims
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI
from a2a_handoff.trust.signing import DECISION_TYP, ENVELOPE_TYP, verify_claims, verify_detached
from a2a_handoff.trust.trustlist import TrustedAgent, TrustList

_MINT = object()


class EnvelopeRefused(Exception):
    """The envelope is not proven: answered REJECTED with `code`, nothing of it stored."""

    def __init__(self, code: str, reason: str, envelope: HandoffEnvelope) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason
        self.envelope = envelope  # as claimed: only for the ledger row


@dataclass(frozen=True, slots=True)
class VerifiedEnvelope:
    """An envelope whose signature, signer and caller were proven (made only by `verify`)."""

    envelope: HandoffEnvelope
    signer: str  # the trusted agent that signed it: the envelope's `source.agent`
    kid: str
    digest: str  # SHA-256 of the canonical envelope: tells a replay from another envelope
    size: int  # bytes of the canonical envelope
    decision: Decision | None = None  # a `return`'s operator decision, verified
    approver: bool = False  # the signer may sign operators' decisions (a human desk)
    signed: dict[str, Any] = field(default_factory=dict, repr=False)  # exactly as signed
    signature: str = field(default="", repr=False)
    _proof: object = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._proof is not _MINT:
            raise TypeError("a VerifiedEnvelope is made only by handoff.verified.verify()")

    @property
    def transfer_context(self) -> dict[str, Any]:
        return dict(self.envelope.transfer_context)


def parse(raw: Any) -> HandoffEnvelope:
    """The envelope a message carries; -32602 naming the first bad field when it is not one."""
    try:
        envelope: HandoffEnvelope = HandoffEnvelope.__pydantic_validator__.validate_python(raw)
        return envelope
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidParamsError(
            f"message.metadata[{HANDOFF_EXTENSION_URI}].{where}: {first['msg']}"
        ) from None


async def verify(raw: Any, token: Any, caller: str, trust: TrustList, me: str) -> VerifiedEnvelope:
    """Prove the envelope `raw` signed by `token` and delivered by principal `caller` ("":
    no authentication); EnvelopeRefused with the code the sender reads otherwise."""
    envelope = parse(raw)
    if token is None:
        raise EnvelopeRefused("envelope_unsigned", "the envelope carries no signature", envelope)
    signer = envelope.source.agent
    agent = trust.get(signer)
    if agent is None:
        raise EnvelopeRefused("untrusted_source", f"{signer} is not on {me}'s trust list", envelope)
    try:
        payload = canonical(raw)
        fetches = trust.fetches(signer)
        keys = await trust.keys(signer)
        try:
            header = verify_detached(token, payload, keys, ENVELOPE_TYP)
        except SignatureError as exc:
            kid = exc.unknown_kid
            if kid is None or trust.pinned(signer) or trust.fetches(signer) != fetches:
                raise  # a key it does not have, by what it publishes right now
            keys = await trust.keys(signer, unknown_kid=kid)  # it may have rotated
            if kid not in keys and trust.fetches(signer) == fetches:
                # Its keys were fetched a moment ago: ask the sender to retry shortly
                # rather than refuse a key it may have added since.
                raise InternalError(
                    f"key {kid!r} of {signer} is not known yet; retry in a few seconds"
                ) from None
            header = verify_detached(token, payload, keys, ENVELOPE_TYP)
    except SignatureError as exc:
        raise EnvelopeRefused(
            "envelope_forged", f"not signed by {signer}: {exc}", envelope
        ) from None
    except TrustError as exc:  # its keys cannot be had now: the sender retries
        raise InternalError(f"cannot verify the envelope now: {exc}") from None
    if caller and caller != agent.caller:
        raise EnvelopeRefused(
            "untrusted_source",
            f"delivered by principal {caller!r}, not by {signer}'s principal {agent.caller!r}",
            envelope,
        )
    decision = _decision(envelope, agent, keys, me) if envelope.kind == "return" else None
    return VerifiedEnvelope(
        envelope,
        signer,
        str(header["kid"]),
        hashlib.sha256(payload).hexdigest(),
        len(payload),
        decision,
        agent.approvals,
        dict(raw),
        str(token),
        _proof=_MINT,
    )


def _decision(envelope: HandoffEnvelope, agent: TrustedAgent, keys: Any, me: str) -> Decision:
    """The operator's decision a `return` carries, proven; EnvelopeRefused otherwise."""

    def refuse(reason: str) -> EnvelopeRefused:
        return EnvelopeRefused("decision_invalid", reason, envelope)

    if not agent.approvals:
        raise refuse(f"{agent.name} is not trusted to sign operators' decisions")
    carried = envelope.transfer_context.get("decision")
    if not isinstance(carried, dict):
        raise refuse("a return carries no decision")
    try:
        claims, _ = verify_claims(carried.get("signed"), keys, DECISION_TYP)
    except SignatureError as exc:
        raise refuse(f"the decision is not signed by {agent.name}: {exc}") from None
    if claims.get("iss") != agent.name or claims.get("aud") != me:
        raise refuse(f"the decision is from {claims.get('iss')!r} for {claims.get('aud')!r}")
    if claims.get("sub") != envelope.source.task_id:
        raise refuse("the decision answers another escalation than the one returning")
    escalation = carried.get("escalation")
    try:
        return decision_from_claims(
            claims,
            agent.name,
            escalation if isinstance(escalation, dict) else {},
            str(carried.get("at") or ""),
        )
    except ValueError as exc:
        raise refuse(f"not a decision: {exc}") from None
