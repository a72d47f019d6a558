"""What one try at creating the successor means: retry, done, refused, or give up.

`classify` is pure: it reads the try's outcome (the task the target answered, or what went
wrong), the tries so far and the delivery's rules, and returns a verdict; the delivery acts
on it. The rules it encodes:

- a task the target created → `Done`; one it refused (REJECTED, marked `rejected`) →
  `Refused`: the contract's `on_reject` path — or, for a handler waiting on the handoff,
  its task reopened; an expired envelope the target never took fails the source;
- the target's card lacks what the envelope requires → `Refused` by the capability gate;
- a JSON-RPC error that is not passing (`TRANSIENT_CODES`) → `Refused` (`on_error`);
- a passing error, an unreachable target or an answer that is not a task → `Retry` — until
  a contract's `max_retries` of the target's own failures (`on_error`) or, while no try can
  have reached the target, its `timeout_ms` (`on_timeout`) → `GiveUp`. Past an envelope's
  TTL a handoff no try can have reached is over: `Refused` (`expired`: the source fails, a
  waiting handler is told); one a try may have reached is still retried — only the target
  can tell whether it took the envelope, and it answers with its task or refuses the
  expired envelope for good;
- a `return` (an operator's decision going back) is given up once its retry policy is
  exhausted (the age of its entry): the source then fails `given_up`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from a2a_handoff.client.answers import Created
from a2a_handoff.client.replicas import never_arrived
from a2a_handoff.client.retry import RetryPolicy
from a2a_handoff.contracts.contract import Contract
from a2a_handoff.errors import GateRefused, HandoffProcessingError, RemoteError
from a2a_handoff.protocol.extension import ext_metadata
from a2a_handoff.protocol.models import Task
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import status_text

# The target's answers worth a replay: still being created, or its own passing failure.
TRANSIENT_CODES = frozenset({HandoffProcessingError.code, -32603})
GIVEN_UP = "given_up"  # the outcome of a return given up

Outcome = Task | Created | Exception
"""One try: the task the target answered (a `Created` when only what the source keeps of it
was read: never a refusal), or what went wrong (`GateRefused` for the gate)."""


@dataclass(frozen=True, slots=True)
class Tries:
    """One delivery's tries so far, its clocks read as the latest try ended."""

    failed: int = 0  # tries that failed
    errors: int = 0  # the target's own failures, counted against a contract's max_retries
    may_have_arrived: bool = False  # some try may have reached the target
    elapsed: float = 0.0  # seconds since this delivery started
    age: float = 0.0  # seconds since the handoff was checkpointed
    expired: bool = False  # the envelope's time limit has passed


@dataclass(frozen=True, slots=True)
class Rules:
    """What a delivery may do: the target's name (for reasons), the contract it goes under,
    whether a handler waits on it (`reopen`), and a return's retry policy."""

    target: str
    contract: Contract | None = None
    reopen: bool = False
    returns: RetryPolicy | None = None  # a return: given up once exhausted


@dataclass(frozen=True, slots=True)
class Retry:
    """Try again: `error` went wrong; `tries` counts it."""

    error: Exception
    tries: Tries


@dataclass(frozen=True, slots=True)
class Done:
    """The target created the successor `created`: terminate the source TRANSFERRED."""

    created: Task | Created


@dataclass(frozen=True, slots=True)
class Refused:
    """The target (or its card) said no. `path`: the contract's recovery path to follow
    (`on_reject`, `on_error`), None: fail the source; `reopen`: reopen the waiting task."""

    reason: str
    outcome: str
    path: str | None = None
    reopen: bool = False


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Stop trying. `path`: the contract's recovery path to follow (`on_error`,
    `on_timeout`), None: fail the source (a return given up)."""

    reason: str
    outcome: str
    path: str | None = None


Verdict = Retry | Done | Refused | GiveUp


def classify(outcome: Outcome, tries: Tries, rules: Rules, sent: bool = True) -> Verdict:
    """What the try that ended in `outcome` means, after `tries` (not counting it). `sent`:
    the try sent the envelope (False: it failed before, reading the target's card)."""
    target, contract = rules.target, rules.contract
    if isinstance(outcome, Created):
        return Done(outcome)
    if isinstance(outcome, Task):
        if refused(outcome):
            return _rejected(outcome, rules)
        return Done(outcome)
    if isinstance(outcome, GateRefused):
        return Refused(
            f"capability gate refused the handoff: {outcome}", "gate_refused", reopen=rules.reopen
        )
    after = replace(tries, failed=tries.failed + 1)
    if isinstance(outcome, RemoteError):
        after = replace(after, may_have_arrived=True)
        if outcome.code not in TRANSIENT_CODES:
            return Refused(f"{target} refused: {outcome.message}", "refused", "on_error")
        if outcome.code != HandoffProcessingError.code and contract is not None:
            after = replace(after, errors=after.errors + 1)
            # A non-idempotent edge is never retried, whatever the contract says.
            retries = contract.recovery.max_retries if contract.idempotent else 0
            if after.errors > retries:
                reason = f"{target} failed {after.errors} time(s): {outcome.message}"
                return GiveUp(reason, "failed", "on_error")
    else:  # unreachable, its breaker open, or an answer that is not a task
        arrived = tries.may_have_arrived or (sent and not never_arrived(outcome))
        after = replace(after, may_have_arrived=arrived)
        timeout = contract.recovery.timeout_ms if contract is not None else None
        if timeout and not arrived and tries.elapsed > timeout / 1000:
            return GiveUp(f"{target} unreachable for over {timeout} ms", "timeout", "on_timeout")
        if tries.expired and not arrived:
            reason = (
                f"handoff_expired: {target} could not be reached before the handoff expired"
                f" ({after.failed} tries): nothing was delivered"
            )
            return Refused(reason, "expired", reopen=rules.reopen)
    policy = rules.returns
    if policy is not None and policy.exhausted(after.failed, tries.age):
        reason = (
            f"return to {target} given up after {after.failed} tries over {tries.age:.0f} s"
            f" (limit {policy.total_seconds:g} s): the decision did not reach it"
        )
        return GiveUp(reason, GIVEN_UP)
    return Retry(outcome, after)


def _rejected(created: Task, rules: Rules) -> Refused:
    code = str(ext_metadata(created).get("rejected", "rejected"))
    if code == "envelope_expired":
        return Refused("handoff_expired: the envelope expired", "expired", reopen=rules.reopen)
    reason = f"{rules.target} rejected the handoff: {status_text(created)}"
    contract = rules.contract
    path = contract.recovery.on_reject if contract is not None else None
    reopen = rules.reopen and path in (None, "", "source")
    return Refused(reason, f"rejected:{code}", "on_reject", reopen)


def refused(created: Task) -> bool:
    """Whether the target refused the envelope (not: took it, and its handler said no)."""
    return created.status.state is TaskState.REJECTED and bool(
        ext_metadata(created).get("rejected")
    )
