"""A handoff's create call against respx-scripted answers, read as the delivery reads it
(`created_task`) and classified: what each answer of a target means for the handoff."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from a2a_handoff.client.answers import Created, created_task
from a2a_handoff.client.client import AgentClient
from a2a_handoff.errors import (
    CircuitOpenError,
    HandoffProcessingError,
    IdempotencyConflictError,
    InternalError,
    RemoteError,
    RpcError,
    StoreUnavailableError,
    TaskNotFoundError,
    UnavailableError,
)
from a2a_handoff.handoff.classify import (
    Done,
    GiveUp,
    Outcome,
    Refused,
    Retry,
    Rules,
    Tries,
    Verdict,
    classify,
)
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.states import TaskState
from tests.a2a_handoff.client.scripted import TASK, URL, html, ok, rpc_error, scripted
from tests.a2a_handoff.handoff.test_classify import contract

pytestmark = pytest.mark.anyio

RULES = Rules("billing")


async def create(client: AgentClient) -> Outcome:
    """One create call, its outcome as the delivery takes it: a task, or what went wrong."""
    try:
        created: Outcome = await client.call_json(
            URL, "SendMessage", "{}", extensions=[URI], idempotent=True, read=created_task
        )
    except (RemoteError, UnavailableError, CircuitOpenError, ValidationError) as exc:
        return exc
    return created


async def verdict_on(*answers: Any, tries: Tries | None = None, rules: Rules = RULES) -> Verdict:
    async with scripted() as (router, client):
        router.post(URL).mock(side_effect=list(answers))
        return classify(await create(client), tries or Tries(), rules)


async def test_a_created_task_is_done() -> None:
    verdict = await verdict_on(ok({"task": TASK}))
    assert verdict == Done(Created("t1", "c1", TaskState.WORKING))


async def test_a_create_that_passed_a_transient_failure_is_done() -> None:
    verdict = await verdict_on(httpx.ConnectError, httpx.Response(503), ok({"task": TASK}))
    assert isinstance(verdict, Done)


async def test_a_refused_envelope_follows_on_reject() -> None:
    rejected = {**TASK, "status": {"state": "TASK_STATE_REJECTED"}}
    rejected["metadata"] = {URI: {"rejected": "loop_detected"}}
    verdict = await verdict_on(ok({"task": rejected}))
    assert isinstance(verdict, Refused)
    assert (verdict.outcome, verdict.path) == ("rejected:loop_detected", "on_reject")


@pytest.mark.parametrize(
    "error",
    [TaskNotFoundError("no such skill"), IdempotencyConflictError()],
    ids=lambda e: type(e).__name__,
)
async def test_an_error_of_the_target_that_is_not_passing_is_refused_on_error(
    error: RpcError,
) -> None:
    verdict = await verdict_on(rpc_error(error.to_dict(), error.http_status))
    assert isinstance(verdict, Refused)
    assert (verdict.outcome, verdict.path) == ("refused", "on_error")
    assert error.message in verdict.reason


async def test_still_being_created_is_retried_and_not_counted_as_a_failure() -> None:
    error = HandoffProcessingError()
    verdict = await verdict_on(rpc_error(error.to_dict(), error.http_status))
    assert isinstance(verdict, Retry)
    assert isinstance(verdict.error, RemoteError)
    assert verdict.tries == Tries(failed=1, errors=0, may_have_arrived=True)


async def test_the_targets_internal_error_is_retried_until_the_contracts_max_retries() -> None:
    error = rpc_error(InternalError().to_dict(), 500)
    rules = Rules("billing", contract(max_retries=1))
    first = await verdict_on(error, rules=rules)
    assert isinstance(first, Retry)
    assert first.tries.errors == 1
    second = await verdict_on(error, tries=first.tries, rules=rules)
    assert isinstance(second, GiveUp)
    assert (second.outcome, second.path) == ("failed", "on_error")


@pytest.mark.parametrize(
    "answer",
    [
        html(200),
        html(502),
        httpx.Response(200, content=b'{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t1"'),
        httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": {"message": {}}}),
        rpc_error(StoreUnavailableError().to_dict(), 503),
        httpx.ReadTimeout,
    ],
    ids=["html-200", "html-502", "truncated", "not-a-task", "store-503", "read-timeout"],
)
async def test_an_answer_that_is_not_a_task_is_retried_as_having_arrived(answer: Any) -> None:
    verdict = await verdict_on(*[answer] * 5)
    assert isinstance(verdict, Retry)
    assert verdict.tries.may_have_arrived
    expired = await verdict_on(*[answer] * 5, tries=Tries(expired=True))
    assert isinstance(expired, Retry)  # only the target can tell whether it took it


async def test_a_target_never_reached_is_retried_until_the_handoff_expires() -> None:
    refused = [httpx.ConnectError] * 5
    verdict = await verdict_on(*refused)
    assert isinstance(verdict, Retry)
    assert not verdict.tries.may_have_arrived
    expired = await verdict_on(*refused, tries=Tries(expired=True))
    assert isinstance(expired, Refused)
    assert expired.outcome == "expired"


async def test_an_error_with_a_garbled_code_is_the_targets_failure_and_retried() -> None:
    verdict = await verdict_on(rpc_error({"code": "E42", "message": "boom"}))
    assert isinstance(verdict, Retry)
    assert isinstance(verdict.error, RemoteError)
    assert verdict.error.code == InternalError.code
    assert verdict.tries.may_have_arrived
