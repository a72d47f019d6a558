"""The delivery's classifier, case by case: what one try at creating the successor means."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from a2a_handoff.client.retry import RetryPolicy
from a2a_handoff.contracts.contract import Contract
from a2a_handoff.errors import (
    CircuitOpenError,
    GateRefused,
    HandoffProcessingError,
    RemoteError,
    UnavailableError,
)
from a2a_handoff.handoff.classify import (
    GIVEN_UP,
    Done,
    GiveUp,
    Refused,
    Retry,
    Rules,
    Tries,
    classify,
    refused,
)
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.models import Task, TaskStatus, utc_now
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import agent_message, with_status

PASSING = -32603  # the target's own passing failure


def contract(idempotent: bool = True, **recovery: Any) -> Contract:
    return Contract.model_validate(
        {
            "id": "triage-to-billing",
            "source": "triage",
            "target": "billing",
            "trigger": {"intent": "refund"},
            "payload": {},
            "acceptance_criteria": {},
            "recovery": recovery,
            "idempotency": {"idempotent": idempotent},
        }
    )


def task(state: TaskState = TaskState.SUBMITTED, rejected: str | None = None) -> Task:
    made = Task(
        id="t1",
        context_id="c1",
        status=TaskStatus(state=TaskState.SUBMITTED, timestamp=utc_now()),
        metadata={URI: {"rejected": rejected}} if rejected else None,
    )
    if state is TaskState.SUBMITTED:
        return made
    return with_status(made, state, agent_message(f"{rejected}: not here", made))


def unreachable(connect: bool) -> UnavailableError:
    """A failure to reach the target: refused connection (cannot have arrived) or not."""
    exc = UnavailableError("cannot reach http://127.0.0.1:2/ (connection refused)")
    exc.__cause__ = httpx.ConnectError("refused") if connect else httpx.ReadTimeout("slow")
    return exc


def not_a_task() -> ValidationError:
    try:
        Task.model_validate(None)
    except ValidationError as exc:
        return exc
    raise AssertionError("None is no task")


BILLING = Rules("billing")


# -- the target answered a task ----------------------------------------------------------


def test_a_created_task_is_done() -> None:
    created = task()
    assert classify(created, Tries(), BILLING) == Done(created)


def test_a_task_its_handler_rejected_is_done_the_target_took_it() -> None:
    # REJECTED without the `rejected` mark: the successor's handler said no, after taking it.
    created = task(TaskState.REJECTED)
    assert not refused(created)
    assert classify(created, Tries(), BILLING) == Done(created)


def test_a_refusal_follows_on_reject_or_fails_the_source() -> None:
    verdict = classify(task(TaskState.REJECTED, "loop_detected"), Tries(), BILLING)
    assert verdict == Refused(
        "billing rejected the handoff: loop_detected: not here",
        "rejected:loop_detected",
        "on_reject",
        reopen=False,
    )


def test_a_refusal_reopens_the_task_a_handler_waits_on() -> None:
    waiting = Rules("billing", reopen=True)
    verdict = classify(task(TaskState.REJECTED, "contract_rejected"), Tries(), waiting)
    assert isinstance(verdict, Refused)
    assert verdict.reopen
    source = Rules("billing", contract(on_reject="source"), reopen=True)
    verdict = classify(task(TaskState.REJECTED, "contract_rejected"), Tries(), source)
    assert isinstance(verdict, Refused)
    assert verdict.reopen


def test_a_refusal_under_a_contract_path_goes_there_even_for_a_waiting_handler() -> None:
    rules = Rules("billing", contract(on_reject="supervisor"), reopen=True)
    verdict = classify(task(TaskState.REJECTED, "contract_rejected"), Tries(), rules)
    assert verdict == Refused(
        "billing rejected the handoff: contract_rejected: not here",
        "rejected:contract_rejected",
        "on_reject",
        reopen=False,
    )


def test_an_expired_envelope_the_target_never_took_fails_the_source_or_tells_its_handler() -> None:
    for reopen in (False, True):  # no contract path: the source, or a handler that waits
        rules = Rules("billing", contract(on_reject="supervisor"), reopen=reopen)
        verdict = classify(task(TaskState.REJECTED, "envelope_expired"), Tries(), rules)
        assert verdict == Refused("handoff_expired: the envelope expired", "expired", None, reopen)


def test_past_its_time_limit_a_handoff_no_try_reached_ends_and_one_that_may_have_waits() -> None:
    unreachable = UnavailableError("cannot reach billing")
    unreachable.__cause__ = httpx.ConnectError("refused")
    expired = Tries(failed=3, expired=True)
    verdict = classify(unreachable, expired, BILLING)
    assert verdict == Refused(
        "handoff_expired: billing could not be reached before the handoff expired (4 tries):"
        " nothing was delivered",
        "expired",
    )
    # A try failed before it sent anything (the target's card unread): nothing arrived.
    timed_out = UnavailableError("billing timed out")
    timed_out.__cause__ = httpx.ReadTimeout("slow")
    assert isinstance(classify(timed_out, expired, BILLING, sent=False), Refused)
    # Sent, and no answer: it may have arrived. Only the target can say: tried again.
    assert isinstance(classify(timed_out, expired, BILLING), Retry)
    arrived = Tries(failed=3, may_have_arrived=True, expired=True)
    assert isinstance(classify(unreachable, arrived, BILLING), Retry)


# -- the gate and the target's errors ----------------------------------------------------


def test_the_capability_gate_refuses_and_reopens_only_for_a_waiting_handler() -> None:
    gate = GateRefused("billing lacks refunds")
    expected = Refused("capability gate refused the handoff: billing lacks refunds", "gate_refused")
    assert classify(gate, Tries(), BILLING) == expected
    waiting = classify(gate, Tries(), Rules("billing", reopen=True))
    assert isinstance(waiting, Refused)
    assert waiting.reopen
    assert waiting.path is None


def test_an_error_that_is_not_passing_is_a_refusal_on_error() -> None:
    error = RemoteError(-32001, "Authentication required")
    verdict = classify(error, Tries(), Rules("billing", reopen=True))
    assert verdict == Refused("billing refused: Authentication required", "refused", "on_error")


def test_still_being_created_is_retried_and_never_counted() -> None:
    error = RemoteError(HandoffProcessingError.code, "processing")
    rules = Rules("billing", contract(idempotent=False))
    verdict = classify(error, Tries(), rules)
    assert verdict == Retry(error, Tries(failed=1, errors=0, may_have_arrived=True))


def test_a_passing_error_without_a_contract_is_retried() -> None:
    error = RemoteError(PASSING, "boom")
    verdict = classify(error, Tries(failed=7, errors=0), BILLING)
    assert verdict == Retry(error, Tries(failed=8, errors=0, may_have_arrived=True))


def test_passing_errors_past_max_retries_give_up_on_error() -> None:
    rules = Rules("billing", contract(max_retries=1, on_error="supervisor"))
    error = RemoteError(PASSING, "boom")
    first = classify(error, Tries(), rules)
    assert isinstance(first, Retry)
    assert first.tries.errors == 1
    second = classify(error, first.tries, rules)
    assert second == GiveUp("billing failed 2 time(s): boom", "failed", "on_error")


def test_a_non_idempotent_edge_gives_up_at_the_first_passing_error() -> None:
    rules = Rules("billing", contract(idempotent=False, max_retries=5))
    verdict = classify(RemoteError(PASSING, "boom"), Tries(), rules)
    assert verdict == GiveUp("billing failed 1 time(s): boom", "failed", "on_error")


# -- an unreachable target ---------------------------------------------------------------


@pytest.mark.parametrize("error", [unreachable(connect=True), CircuitOpenError("open")])
def test_unreachable_past_timeout_while_nothing_arrived_gives_up_on_timeout(
    error: Exception,
) -> None:
    rules = Rules("billing", contract(timeout_ms=100))
    early = classify(error, Tries(elapsed=0.05), rules)
    assert early == Retry(error, Tries(failed=1, may_have_arrived=False, elapsed=0.05))
    late = classify(error, Tries(elapsed=0.2), rules)
    assert late == GiveUp("billing unreachable for over 100 ms", "timeout", "on_timeout")


@pytest.mark.parametrize("error", [unreachable(connect=False), not_a_task()])
def test_a_try_that_may_have_arrived_is_retried_past_the_timeout(error: Exception) -> None:
    # A read timeout or an answer that is not a task: the target may hold the envelope, so a
    # fallback could orphan a successor — it is tried again (same key) instead.
    rules = Rules("billing", contract(timeout_ms=100, on_timeout="supervisor"))
    verdict = classify(error, Tries(elapsed=60.0), rules)
    assert verdict == Retry(error, Tries(failed=1, may_have_arrived=True, elapsed=60.0))


def test_once_something_may_have_arrived_the_timeout_never_follows() -> None:
    # A replay after a crash (or an earlier try that reached the target).
    rules = Rules("billing", contract(timeout_ms=100))
    error = unreachable(connect=True)
    verdict = classify(error, Tries(may_have_arrived=True, elapsed=60.0), rules)
    assert isinstance(verdict, Retry)
    assert verdict.tries.may_have_arrived


def test_without_a_timeout_an_unreachable_target_is_retried_forever() -> None:
    error = unreachable(connect=True)
    verdict = classify(error, Tries(failed=1000, elapsed=1e6), BILLING)
    assert verdict == Retry(error, Tries(failed=1001, elapsed=1e6))


# -- a return (an operator's decision going back) ----------------------------------------


RETURNS = Rules("ops", returns=RetryPolicy(10**9, 60.0, 1.0, 30.0))


def test_a_return_is_retried_until_its_policy_is_exhausted() -> None:
    error = unreachable(connect=True)
    assert isinstance(classify(error, Tries(failed=3, age=59.0), RETURNS), Retry)
    verdict = classify(error, Tries(failed=3, age=61.0), RETURNS)
    assert verdict == GiveUp(
        "return to ops given up after 4 tries over 61 s (limit 60 s): the decision did not"
        " reach it",
        GIVEN_UP,
    )
    assert verdict.path is None  # the source fails: no recovery path for a decision


def test_a_return_refused_past_its_limit_is_a_refusal_not_a_give_up() -> None:
    verdict = classify(RemoteError(-32001, "no"), Tries(age=600.0), RETURNS)
    assert isinstance(verdict, Refused)
    created = task()
    assert classify(created, Tries(age=600.0), RETURNS) == Done(created)
